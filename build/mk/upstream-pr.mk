# The upstream pull request: a per-feature git format-patch series against the pinned tag and its
# description, checked against a fresh pristine tree (see build/upstream-pr.sh).
#
#   make upstream-pr                         _output/upstream/series/*.patch, _output/upstream/PR.md;
#                                            every commit builds and vets on its own, upstream's
#                                            tests pass on the last
#   make upstream-pr UPSTREAM_PR_TESTS=each  upstream's tests on every commit
#   make upstream-pr UPSTREAM_PR_TESTS=0     no tests (make test: its own run covers the last commit)
#   make upstream-pr UPSTREAM_PR_EACH=0      without the commit-by-commit build and vet
#   make upstream-pr UPSTREAM=v1.37.2        the series against v1.37.2 (its overrides from
#                                            patches/v1.37.2/), under _output/upstream/v1.37.2/

.PHONY: upstream-pr
export UPSTREAM_PR_TESTS UPSTREAM_PR_EACH

upstream-pr: $(PATCHED)/.upstream-tag
	build/upstream-pr.sh $(PRISTINE) $(PATCHED)
