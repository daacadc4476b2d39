# The nftables proxier's real-kernel tests (rule programming, and real TCP packets through a
# Service's life: endpoints lost and restored, deletion and stale chains) under a Debian kernel
# booted in qemu with an initramfs built here: KERNEL=6.1 (bookworm's; AL2023 AMIs for
# Kubernetes 1.32 and older) or KERNEL=6.12 (trixie's, the default; AL2023 AMIs for 1.33 and
# later). Not part of make test: it downloads a kernel package and boots a VM (see
# docs/testing.md). See build/conformance-kernel.sh.
#
#   make conformance-kernel KERNEL=6.12
#   make conformance-kernel KERNEL=6.1 KERNEL_RUN=RealKernelPackets KERNEL_TIMEOUT=900
#   make conformance-kernel61            (the same as KERNEL=6.1)

.PHONY: conformance-kernel conformance-kernel61

KERNEL ?= 6.12
KERNEL_ENV := KERNEL_RUN KERNEL_TIMEOUT KERNEL_PACKAGE KERNEL61_RUN KERNEL61_TIMEOUT KERNEL61_PACKAGE
export $(KERNEL_ENV)

conformance-kernel61: override KERNEL = 6.1
conformance-kernel conformance-kernel61: $(PATCHED)/.upstream-tag
	build/conformance-kernel.sh $(KERNEL) $(PATCHED)
