//go:build !benchkernel

// Command benchkernel is the real-kernel benchmark of kube-proxy's nftables mode. Its main
// program drives k8s.io/kubernetes/pkg/proxy/nftables and so is only built inside an
// assembled tree with -tags benchkernel (see build/bench-kernel.sh); without the tag only the
// pure parts (log parsing, statistics, the fit model, ruleset generators, the report) are
// compiled, so that the root module can test them.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "benchkernel: build it inside an assembled tree with -tags benchkernel (make bench-kernel)")
	os.Exit(2)
}
