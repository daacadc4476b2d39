# The model-based soak on the real kernel (root): a seeded random walk of Service, endpoint,
# restart, rule-shape, failure, damage, clock and hand-over (to upstream's own proxier and back)
# steps, with the invariants checked after every commit
# (overlay/pkg/proxy/nftables/realkernel_soak_test.go). make test runs two short walks (50 steps
# each, seeds 1 and 2); this target runs a long one. See build/soak.sh.
#
#   make soak STEPS=5000 [SEED=N] [TRACE=STEP]   (TRACE: print that step's transactions)

.PHONY: soak

STEPS ?= 1000
SEED ?=
TRACE ?=

soak: deps-test $(PATCHED)/.upstream-tag $(PRISTINE)/.upstream-tag
	KUBE_PROXY_OVERLAY_SOAK_TRACE=$(TRACE) build/soak.sh $(PATCHED) $(STEPS) $(SEED)
