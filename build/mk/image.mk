# The kube-proxy container image, built without a container engine (build/image/, images/).
#
#   make image          _output/image/oci/ (OCI layout of the multi-arch index), _output/image/digest
#                       (the index digest), and per platform _output/image/linux-ARCH/
#                       (kube-proxy.tar for docker load, sbom.spdx.json, config.json, digest)
#   make verify-image   two isolated builds must give the same digest; then the amd64 image's own
#                       kube-proxy programs nftables in a throwaway network namespace, and the
#                       arm64 image's tools run under qemu-aarch64-static
#   make push IMAGE=registry/repo[:tag]
#                       push the OCI layout byte for byte; prints the registry's digest and fails
#                       unless it is the one `make image` printed
#   make image-lock     re-resolve images/packages.in against Debian's archive and rewrite
#                       images/packages.lock and images/PACKAGES.md
#
# BASE=<image reference> appends the kube-proxy layer to that image from a registry instead of
# the self-contained Debian base layer (needs registry access).

IMAGE_NAME ?= kube-proxy-overlay/kube-proxy
# A tag cannot hold "+": v1.36.3+overlay.2 is tagged v1.36.3_overlay.2.
IMAGE_TAG ?= $(subst +,_,$(VERSION))
BASE ?=
IMAGE_OUT := _output/image
# The .deb cache may be shared between trees (make verify-image does): every file in it is
# checked against images/packages.lock before use.
DEB_CACHE ?= $(ROOT)/_output/cache/debs
IMAGE_APT_DIR := $(ROOT)/_output/cache/apt
KPIMAGE := _output/bin/kpimage
FAKEAPISERVER := _output/bin/fakeapiserver
IMAGE_GO := $(shell find build/image -name '*.go' -not -name '*_test.go' 2>/dev/null | LC_ALL=C sort)
IMAGE_INPUTS := images/packages.in images/packages.lock images/PACKAGES.md images/iptables-wrapper
# One image per architecture of images/packages.in, in that order in the index. kube-proxy is
# cross-compiled (CGO_ENABLED=0) for each into $(dir $(BIN))linux-ARCH/kube-proxy (where
# images/Dockerfile also takes it); the host's own architecture is a copy of $(BIN).
IMAGE_ARCHES := $(shell awk '$$1 == "arch" { $$1 = ""; print }' images/packages.in)
HOST_GOARCH := $(shell go env GOARCH)
image_bin = $(dir $(BIN))linux-$(1)/kube-proxy
IMAGE_BINS := $(foreach a,$(IMAGE_ARCHES),$(call image_bin,$(a)))

$(call image_bin,$(HOST_GOARCH)): $(BIN)
	@mkdir -p $(@D)
	cp -f $(BIN) $@

$(dir $(BIN))linux-%/kube-proxy: $(PATCHED)/.upstream-tag _output/version.$(UPSTREAM) build/build.sh
	GOOS=linux GOARCH=$* build/build.sh $(PATCHED) $@ $(VERSION)

# image-binaries: kube-proxy for every platform of the image (for images/Dockerfile).
image-binaries: $(IMAGE_BINS)

.PHONY: image verify-image image-lock push image-binaries deps-image

$(KPIMAGE): $(IMAGE_GO) go.mod go.sum
	CGO_ENABLED=0 go build -trimpath -o $@ ./build/image/cmd/kpimage

$(FAKEAPISERVER): $(IMAGE_GO) go.mod go.sum
	CGO_ENABLED=0 go build -trimpath -o $@ ./build/image/cmd/fakeapiserver

image: $(IMAGE_BINS) $(PRISTINE)/.upstream-tag $(KPIMAGE) $(IMAGE_INPUTS)
	$(KPIMAGE) check-lock
ifeq ($(BASE),)
	build/image/debs.sh $(KPIMAGE) images/packages.lock $(DEB_CACHE) $(IMAGE_APT_DIR)
endif
	@echo "==> assembling $(IMAGE_NAME):$(IMAGE_TAG)$(if $(BASE), on $(BASE))" >&2
	$(KPIMAGE) build -out $(IMAGE_OUT) -debs $(DEB_CACHE) $(foreach a,$(IMAGE_ARCHES),-binary $(a)=$(call image_bin,$(a))) \
	  -license $(PRISTINE)/LICENSE -licenses $(PRISTINE)/LICENSES \
	  -version $(VERSION) -upstream $(UPSTREAM) -commit "$(KUBE_GIT_COMMIT)" \
	  -name $(IMAGE_NAME) -tag $(IMAGE_TAG) -base "$(BASE)" -epoch $(SOURCE_DATE_EPOCH) >/dev/null
	@echo "image: $(IMAGE_OUT)/oci (OCI layout: index of $(foreach a,$(IMAGE_ARCHES),linux/$(a))), $(IMAGE_OUT)/linux-*/kube-proxy.tar ($(IMAGE_NAME):$(IMAGE_TAG)), $(IMAGE_OUT)/linux-*/sbom.spdx.json"
	@for a in $(IMAGE_ARCHES); do echo "  linux/$$a: $$(cat $(IMAGE_OUT)/linux-$$a/digest)"; done
	@echo "image digest: $$(cat $(IMAGE_OUT)/digest)"

# deps-image installs qemu-user-static (for the arm64 image's tools) when it is missing.
deps-image:
	@build/deps.sh image

verify-image: deps-image image $(FAKEAPISERVER)
	DEB_CACHE=$(DEB_CACHE) build/image/verify-image.sh $(IMAGE_OUT) $(FAKEAPISERVER) $(KPIMAGE)

image-lock: $(KPIMAGE)
	build/image/lock.sh $(KPIMAGE) images/packages.in images/packages.lock images/PACKAGES.md $(DEB_CACHE) $(IMAGE_APT_DIR)

push: image
	@[ -n "$(IMAGE)" ] || { echo "error: make push needs IMAGE=registry/repo[:tag]" >&2; exit 2; }
	$(KPIMAGE) push -oci $(IMAGE_OUT)/oci -digest-file $(IMAGE_OUT)/digest -image $(IMAGE)
