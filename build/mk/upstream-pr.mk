# The upstream pull request: a per-feature git format-patch series against the pinned tag and its
# description, checked against a fresh pristine tree (see build/upstream-pr.sh).
#
#   make upstream-pr                      _output/upstream/series/*.patch, _output/upstream/PR.md
#   make upstream-pr UPSTREAM_PR_TESTS=0  without running upstream's tests on the result
#   make upstream-pr UPSTREAM_PR_EACH=1   also compile every commit of the series on its own

.PHONY: upstream-pr
export UPSTREAM_PR_TESTS UPSTREAM_PR_EACH

upstream-pr: $(PATCHED)/.upstream-tag
	build/upstream-pr.sh $(PRISTINE) $(PATCHED)
