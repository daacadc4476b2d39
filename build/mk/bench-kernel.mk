# The real-kernel benchmark of the nftables proxier, pristine upstream against the patched tree,
# in throwaway network namespaces (root; not part of make test). See build/bench-kernel.sh.
#
#   make bench-kernel                       every shape and size (hours; see the README of bench/kernel)
#   make bench-kernel SIZES=1000,6000 SHAPES=ipv4,ipv6
#   make bench-kernel-probe                 rule-shape cold-load and per-packet probe
#   make bench-kernel-test                  unit tests of the benchmark's pure parts

.PHONY: bench-kernel bench-kernel-build bench-kernel-probe bench-kernel-test

BENCH_KERNEL_ENV := SHAPES SIZES UPSTREAM_MAX UPGRADE_MAX PERIODIC_SLOT IDLE_SECONDS PHASE_TIMEOUT RTNL_INTERVAL PATCHED_ONLY UPSTREAM_ONLY \
	PROBE_SIZES PROBE_VARIANTS PROBE_FAMILY PROBE_V0_MAX PROBE_A0_MAX PROBE_KS PROBE_PKT_N PROBE_PKT_ROUNDS PROBE_SKIP_LOAD PROBE_SKIP_PKT PROBE_ENDPOINTS
export $(BENCH_KERNEL_ENV)

bench-kernel-build: $(PATCHED)/.upstream-tag
	build/bench-kernel.sh build $(PRISTINE) $(PATCHED)

bench-kernel: $(PATCHED)/.upstream-tag
	build/bench-kernel.sh run $(PRISTINE) $(PATCHED)

bench-kernel-probe: $(PATCHED)/.upstream-tag
	build/bench-kernel.sh probe $(PRISTINE) $(PATCHED)

bench-kernel-test:
	go test ./bench/...
