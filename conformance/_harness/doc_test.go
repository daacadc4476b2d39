// Package kpconformance is the node-level conformance harness of make conformance. It is not
// compiled in this repository's module (the directory starts with an underscore): build/conformance.sh
// lays it into test/kpconformance of a copy of the assembled pristine tree and builds it there as a
// test binary, against upstream's own go.mod, so that it can start etcd (embedded) and
// kube-apiserver (cmd/kube-apiserver/app/testing) in-process.
//
// The binary builds a small world of network namespaces (node, client, pods), runs the kube-proxy
// binaries under test in the node namespace, drives Services and EndpointSlices through client-go
// as a controller would, and checks every case with real packets. See docs/testing.md.
package kpconformance
