# Node-level conformance on the real kernel (root): etcd and kube-apiserver in-process, the
# patched and the pristine upstream kube-proxy in a node network namespace, every case checked
# with real packets, side by side. Not yet part of make test (its cold CI time is unmeasured;
# see the README). See build/conformance.sh.
#
#   make conformance

.PHONY: conformance

conformance: deps-test $(BIN) $(UPSTREAM_BIN) $(PRISTINE)/.upstream-tag
	build/conformance.sh $(PRISTINE) $(BIN) $(UPSTREAM_BIN)
