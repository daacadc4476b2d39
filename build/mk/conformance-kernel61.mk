# The nftables proxier's real-kernel tests (rule programming, and real TCP packets through a
# Service's life: endpoints lost and restored, deletion and stale chains) under Debian bookworm's
# Linux 6.1, the kernel of AL2023 and Bottlerocket nodes, booted in qemu with an initramfs built
# here. Not part of make test: under software emulation it takes minutes (see the README). See
# build/conformance-kernel61.sh.
#
#   make conformance-kernel61
#   make conformance-kernel61 KERNEL61_RUN=RealKernelPackets KERNEL61_TIMEOUT=900

.PHONY: conformance-kernel61

KERNEL61_ENV := KERNEL61_RUN KERNEL61_TIMEOUT KERNEL61_PACKAGE
export $(KERNEL61_ENV)

conformance-kernel61: $(PATCHED)/.upstream-tag
	build/conformance-kernel61.sh $(PATCHED)
