//go:build benchkernel

// Command benchkernel is the real-kernel benchmark of kube-proxy's nftables mode: it drives
// the real nftables proxier (real knftables, real nft) of one tree inside throwaway network
// namespaces. The same source is built once in the pristine tree and once in the patched
// tree (each with its own adapter_*.go); either binary can orchestrate.
//
//	benchkernel run -upstream-bin A -patched-bin B -shim S [-work DIR]   the benchmark (make bench-kernel)
//	benchkernel probe [flags]                                           the rule-shape probe (make bench-kernel-probe)
//	benchkernel child ...        one proxier process; run by `run` inside a netns
//	benchkernel echo ...         TCP/UDP echo server for the per-packet probe
//	benchkernel pktclient ...    client of the per-packet probe
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchkernel run|probe|child|echo|pktclient [flags]")
		os.Exit(2)
	}
	var rc int
	switch os.Args[1] {
	case "run":
		rc = runMain(os.Args[2:])
	case "child":
		rc = childMain(os.Args[2:])
	case "probe":
		rc = probeMain(os.Args[2:])
	case "echo":
		rc = echoMain(os.Args[2:])
	case "pktclient":
		rc = pktClientMain(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "unknown sub-command %q\n", os.Args[1])
		rc = 2
	}
	os.Exit(rc)
}

func numCPU() int { return runtime.NumCPU() }
