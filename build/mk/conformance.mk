# Node-level conformance on the real kernel (root): etcd and kube-apiserver in-process, the
# patched and the pristine upstream kube-proxy in a node network namespace, every case checked
# with real packets, side by side. make test runs it last; this target runs it alone. See
# build/conformance.sh.
#
#   make conformance

.PHONY: conformance

conformance: deps-test $(BIN) $(UPSTREAM_BIN) $(PRISTINE)/.upstream-tag
	build/conformance.sh $(PRISTINE) $(BIN) $(UPSTREAM_BIN)
