# kube-proxy overlay: a patched kube-proxy built from a pinned upstream tag.
#
#   make build                 _output/bin/kube-proxy (the patched binary)
#   make test                  the overlay's tests, upstream's tests on the patched tree, then
#                              make conformance (real packets, patched and upstream side by side)
#   make verify-reproducible   a second, isolated build must give the same sha256
#   make build-upstream        the pristine upstream binary, for side-by-side comparisons
#   make bench-fleet           full-sync fleet simulation (FLEET_ARGS="-nodes 5000 ...")
#
# UPSTREAM selects the upstream line: the tag pinned in go.mod (default), or a second line pinned
# by patches/<tag>/go.mod and go.sum (build/pin-line.sh <tag>), whose patches/<tag>/*.patch replace
# the default patches of the same name. Each line assembles its trees under _output/src/<tag>/.
#
#   make build UPSTREAM=v1.37.2          _output/v1.37.2/bin/kube-proxy
#   make build-upstream UPSTREAM=v1.37.2 _output/upstream/v1.37.2/bin/kube-proxy
#   make test UPSTREAM=v1.37.2           the same tests, on the v1.37.2 line

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := build

ROOT := $(CURDIR)
PINNED := $(shell go list -m -f '{{.Version}}' k8s.io/kubernetes)
UPSTREAM ?= $(PINNED)
LINES := $(PINNED) $(patsubst patches/%/go.mod,%,$(wildcard patches/v*/go.mod))
ifeq ($(UPSTREAM),$(PINNED))
MODDIR := $(ROOT)
else ifneq ($(wildcard patches/$(UPSTREAM)/go.mod),)
MODDIR := $(ROOT)/patches/$(UPSTREAM)
else
$(error UPSTREAM=$(UPSTREAM) is not a line this repo knows ($(LINES)); build/pin-line.sh $(UPSTREAM) pins a new one)
endif

SRC := _output/src/$(UPSTREAM)
PRISTINE := $(SRC)/pristine
PATCHED := $(SRC)/patched
ifeq ($(UPSTREAM),$(PINNED))
BIN := _output/bin/kube-proxy
else
BIN := _output/$(UPSTREAM)/bin/kube-proxy
endif
UPSTREAM_BIN := _output/upstream/$(UPSTREAM)/bin/kube-proxy

PATCHES := $(sort $(wildcard patches/*.patch patches/$(UPSTREAM)/*.patch))
OVERLAY_FILES := $(shell find overlay -type f 2>/dev/null | LC_ALL=C sort)
BUILD_SCRIPTS := build/lib.sh build/assemble.sh build/build.sh

# Build metadata. The version is the tag plus a semver build suffix counting this repo's commits;
# the build date is the tag's commit time, so two builds of one commit are byte-identical.
OVERLAY_N := $(shell git rev-list --count HEAD 2>/dev/null || echo 0)
VERSION := $(UPSTREAM)+overlay.$(OVERLAY_N)
export SOURCE_DATE_EPOCH := $(shell . build/lib.sh && tag_epoch $(MODDIR) $(UPSTREAM))
export KUBE_GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
export KUBE_GIT_TREE_STATE := $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo clean || echo dirty)

.PHONY: build build-upstream tree test bench-fleet verify-reproducible deps-test clean FORCE

build: $(BIN)

build-upstream: $(UPSTREAM_BIN)

tree: $(PATCHED)/.upstream-tag

$(PRISTINE)/.upstream-tag: $(MODDIR)/go.mod $(MODDIR)/go.sum $(BUILD_SCRIPTS)
	build/assemble.sh pristine $(MODDIR) $(PRISTINE)

$(PATCHED)/.upstream-tag: $(PRISTINE)/.upstream-tag $(PATCHES) $(OVERLAY_FILES) $(BUILD_SCRIPTS)
	build/assemble.sh patched $(PRISTINE) patches overlay $(PATCHED)

# The stamped version lives in a file that changes only when the version does, so that a new
# commit relinks the binary and nothing else does.
_output/version.$(UPSTREAM): FORCE
	@mkdir -p $(@D); v="$(VERSION) $(KUBE_GIT_COMMIT) $(KUBE_GIT_TREE_STATE)"; \
	  [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@

$(BIN): $(PATCHED)/.upstream-tag _output/version.$(UPSTREAM) build/build.sh
	build/build.sh $(PATCHED) $@ $(VERSION)
	@$@ --version

$(UPSTREAM_BIN): $(PRISTINE)/.upstream-tag build/build.sh
	KUBE_GIT_COMMIT= build/build.sh $(PRISTINE) $@ $(UPSTREAM)

# deps installs the Debian packages the tests need, when they are missing.
deps-test:
	@build/deps.sh test

# The node-level conformance (build/mk/conformance.mk) runs last, so that its closing lines,
# ending with `patched: N passed, N failed`, end the output.
test: deps-test $(BIN) $(UPSTREAM_BIN) $(PRISTINE)/.upstream-tag
	build/test.sh $(PATCHED) $(BIN) $(UPSTREAM_BIN)
	build/conformance.sh $(PRISTINE) $(BIN) $(UPSTREAM_BIN)

# bench-fleet simulates a fleet of nodes joining together and reports how many full-sync at once,
# driving the real schedule code (pkg/proxy/fullsync) from the patched tree: bench/fleet is laid
# into test/fleetsim of a hard-linked copy of that tree. Its last table puts the defaults beside
# upstream for a fleet that joined within a minute and one that joined evenly over a day.
FLEET_SRC := _output/bench-fleet/$(UPSTREAM)
bench-fleet: $(PATCHED)/.upstream-tag
	rm -rf $(FLEET_SRC) && mkdir -p $(dir $(FLEET_SRC))
	cp -al $(PATCHED) $(FLEET_SRC) 2>/dev/null || { rm -rf $(FLEET_SRC); cp -r $(PATCHED) $(FLEET_SRC); }
	mkdir -p $(FLEET_SRC)/test/fleetsim && cp bench/fleet/*.go $(FLEET_SRC)/test/fleetsim/
	cd $(FLEET_SRC) && go run -tags benchfleet ./test/fleetsim $(FLEET_ARGS)

verify-reproducible: $(BIN)
	build/verify-reproducible.sh $(BIN)

clean:
	rm -rf _output

# Feature targets (image, benchmarks, conformance, ...) live in their own files.
include $(sort $(wildcard build/mk/*.mk))
