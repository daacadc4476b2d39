# The Go rule-generation benchmark of the nftables proxier: pristine upstream against the patched
# tree, interleaved in one session (not part of make test). See build/bench-sync.sh.
#
#   make bench-sync                               1k, 6k, 12k and 36k service ports, IPv4 and IPv6
#   make bench-sync SYNC_SIZES=6000 SYNC_FAMILIES=ipv6 SYNC_ROUNDS=5

.PHONY: bench-sync

BENCH_SYNC_ENV := SYNC_SIZES SYNC_FAMILIES SYNC_ROUNDS SYNC_FULL SYNC_PARTIAL SYNC_BATCH SYNC_CHECK_UPSTREAM_MAX
export $(BENCH_SYNC_ENV)

bench-sync: $(PATCHED)/.upstream-tag
	build/bench-sync.sh $(PRISTINE) $(PATCHED)
