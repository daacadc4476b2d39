// Command nftshim stands in for nft on the PATH of a benchmarked kube-proxy. It runs the real
// nft (BENCHKERNEL_REAL_NFT, default /usr/sbin/nft) with the same arguments, standard streams
// and exit status, and appends one JSON line per invocation to BENCHKERNEL_NFT_LOG: wall-clock
// start and end, nft's user and system CPU from rusage, the arguments, and for -f input the
// size and the commands by verb. It is stdlib only so that it starts in about a millisecond.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// record must match Invocation in ../nftlog.go.
type record struct {
	StartNS    int64          `json:"start_ns"`
	EndNS      int64          `json:"end_ns"`
	UserUS     int64          `json:"user_us"`
	SysUS      int64          `json:"sys_us"`
	Exit       int            `json:"exit"`
	Args       []string       `json:"args"`
	InputBytes int64          `json:"input_bytes"`
	Cmds       map[string]int `json:"cmds"`
	PID        int            `json:"pid"`
}

// inputFile returns the argument of -f/--file, or "".
func inputFile(args []string) string {
	for i, a := range args {
		switch {
		case (a == "-f" || a == "--file") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--file="):
			return strings.TrimPrefix(a, "--file=")
		}
	}
	return ""
}

// countCmds counts the commands of an nft script by their first word.
func countCmds(script []byte) map[string]int {
	m := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, _, _ := strings.Cut(line, " ")
		m[verb]++
	}
	return m
}

func main() {
	real := os.Getenv("BENCHKERNEL_REAL_NFT")
	if real == "" {
		real = "/usr/sbin/nft"
	}
	args := os.Args[1:]
	rec := record{Args: args, PID: os.Getpid()}
	cmd := exec.Command(real, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Stdin = os.Stdin
	if f := inputFile(args); f == "-" || f == "/dev/stdin" {
		// Read the whole transaction first, so that nft's timing does not include the
		// caller's writing and the commands can be counted.
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			os.Stderr.WriteString("nftshim: reading stdin: " + err.Error() + "\n")
			os.Exit(1)
		}
		rec.InputBytes, rec.Cmds = int64(len(in)), countCmds(in)
		cmd.Stdin = bytes.NewReader(in)
	} else if f != "" {
		if in, err := os.ReadFile(f); err == nil {
			rec.InputBytes, rec.Cmds = int64(len(in)), countCmds(in)
		}
	}
	start := time.Now()
	err := cmd.Run()
	end := time.Now()
	rec.StartNS, rec.EndNS = start.UnixNano(), end.UnixNano()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		rec.Exit = exitErr.ExitCode()
	default:
		os.Stderr.WriteString("nftshim: " + err.Error() + "\n")
		rec.Exit = 127
	}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rec.UserUS = ru.Utime.Sec*1e6 + int64(ru.Utime.Usec)
			rec.SysUS = ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)
		}
	}
	if path := os.Getenv("BENCHKERNEL_NFT_LOG"); path != "" {
		if err := appendRecord(path, rec); err != nil {
			os.Stderr.WriteString("nftshim: log: " + err.Error() + "\n")
		}
	}
	if rec.Exit < 0 {
		rec.Exit = 1
	}
	os.Exit(rec.Exit)
}

// appendRecord appends rec as one line with a single write, so that concurrent shims do not
// interleave.
func appendRecord(path string, rec record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(line, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
