# The end-to-end benchmark of the real binaries (root; not part of make test): etcd and
# kube-apiserver in-process, loaded with N service ports through the API, the patched and the
# pristine upstream kube-proxy one after the other in a fresh node network namespace; first
# sync, memory, CPU, network programming latency under churn, and the RTNL probe. See
# build/bench-e2e.sh and bench/e2e/README.md.
#
#   make bench-e2e                                   SIZES=6000,36000 FAMILY=ipv6 (the defaults)
#   make bench-e2e SIZES=600 FAMILY=ipv6 ENDPOINTS=4 AFFINITY_PERCENT=10 NODEPORT_PERCENT=10

.PHONY: bench-e2e

BENCH_E2E_ENV := SIZES FAMILY ENDPOINTS AFFINITY_PERCENT NODEPORT_PERCENT CHURN_RATE CHURN_SECONDS FULL_SYNC_PERIOD UPSTREAM_MAX
export $(BENCH_E2E_ENV)

bench-e2e: deps-test $(BIN) $(UPSTREAM_BIN) $(PRISTINE)/.upstream-tag
	build/bench-e2e.sh $(PRISTINE) $(BIN) $(UPSTREAM_BIN)
