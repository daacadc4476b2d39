package main

// Parsing and summarising the log that the nft shim (./nftshim) writes: one JSON object per
// nft invocation. This file is pure (stdlib only) so that it is tested from the root module.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Invocation is one nft run as the shim recorded it. The shim has its own copy of this
// struct (it cannot import package main); the field names and tags must stay in step.
type Invocation struct {
	StartNS    int64          `json:"start_ns"` // wall clock, Unix ns, just before nft was started
	EndNS      int64          `json:"end_ns"`   // wall clock, Unix ns, after nft exited
	UserUS     int64          `json:"user_us"`  // nft's user CPU (rusage), µs
	SysUS      int64          `json:"sys_us"`   // nft's system CPU (rusage), µs
	Exit       int            `json:"exit"`
	Args       []string       `json:"args"`        // argv without argv[0]
	InputBytes int64          `json:"input_bytes"` // bytes of the -f input (stdin or file)
	Cmds       map[string]int `json:"cmds"`        // commands in the -f input by verb (add, delete, flush, ...)
	PID        int            `json:"pid"`
}

// Kinds of invocation.
const (
	KindWrite   = "write"   // a transaction: -f with at least one command, not --check
	KindRead    = "read"    // list ...
	KindCheck   = "check"   // --check (dry run; still parses and fills the cache)
	KindVersion = "version" // --version
	KindOther   = "other"
)

var writeVerbs = map[string]bool{"add": true, "create": true, "insert": true, "replace": true, "delete": true, "destroy": true, "flush": true, "reset": true}

// Kind classifies the invocation from its arguments.
func (inv Invocation) Kind() string {
	hasFile := false
	for i, a := range inv.Args {
		switch {
		case a == "--check" || a == "-c":
			return KindCheck
		case a == "--version" || a == "-v" || a == "-V":
			return KindVersion
		case a == "-f" || a == "--file" || strings.HasPrefix(a, "--file="):
			hasFile = true
		case a == "list":
			return KindRead
		case !strings.HasPrefix(a, "-") && writeVerbs[a]:
			// A command on the command line ("nft add table ..."); the words after the
			// verb are its operands.
			if i == 0 || strings.HasPrefix(inv.Args[i-1], "-") {
				return KindWrite
			}
		}
	}
	if hasFile {
		return KindWrite
	}
	return KindOther
}

// Wall is the invocation's wall time.
func (inv Invocation) Wall() time.Duration { return time.Duration(inv.EndNS - inv.StartNS) }

// ParseNFTLog reads a shim log. Blank lines are skipped; a malformed line is an error that
// names its line number, except a truncated last line (a process killed mid-write), which
// is ignored.
func ParseNFTLog(r io.Reader) ([]Invocation, error) {
	var out []Invocation
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	var pendingErr error
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if pendingErr != nil {
			return nil, pendingErr
		}
		var inv Invocation
		if err := json.Unmarshal([]byte(text), &inv); err != nil {
			pendingErr = fmt.Errorf("nft log line %d: %w", line, err)
			continue
		}
		if inv.EndNS < inv.StartNS {
			return nil, fmt.Errorf("nft log line %d: end before start", line)
		}
		out = append(out, inv)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// NFTStats summarises the nft invocations of one phase.
type NFTStats struct {
	Count, Writes, Reads, Checks int
	FailedWrites, FailedOther    int // non-zero exits (a read of a table that does not exist yet fails)
	MaxWrite, MaxRead, MaxAny    time.Duration
	Total, WriteTotal, ReadTotal time.Duration // summed wall time
	User, Sys                    time.Duration // summed rusage of all invocations
	WriteCmds                    int           // commands in all writes
	WriteBytes                   int64
}

// SummarizeNFT summarises the invocations that ran within [fromNS, toNS]: a phase's own
// invocations all end before the phase does (it ends when its sync has finished), so one that
// ends later belongs to a sync that started right after.
func SummarizeNFT(invs []Invocation, fromNS, toNS int64) NFTStats {
	var s NFTStats
	for _, inv := range invs {
		if inv.StartNS < fromNS || inv.EndNS > toNS {
			continue
		}
		w := inv.Wall()
		s.Count++
		s.Total += w
		s.User += time.Duration(inv.UserUS) * time.Microsecond
		s.Sys += time.Duration(inv.SysUS) * time.Microsecond
		if inv.Exit != 0 {
			if inv.Kind() == KindWrite {
				s.FailedWrites++
			} else {
				s.FailedOther++
			}
		}
		s.MaxAny = max(s.MaxAny, w)
		switch inv.Kind() {
		case KindWrite:
			s.Writes++
			s.WriteTotal += w
			s.MaxWrite = max(s.MaxWrite, w)
			s.WriteBytes += inv.InputBytes
			for _, n := range inv.Cmds {
				s.WriteCmds += n
			}
		case KindRead:
			s.Reads++
			s.ReadTotal += w
			s.MaxRead = max(s.MaxRead, w)
		case KindCheck:
			s.Checks++
		}
	}
	return s
}
