//go:build benchkernel

package main

// The rule-shape probe: cold-load (and reload) cost of candidate rule shapes on the real
// kernel, and the per-connection cost of one rule per endpoint, all in throwaway netns.

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nftRun is one timed nft run.
type nftRun struct {
	wall, user, sys time.Duration
}

// runNFTFile loads file into netns ns with nft -f and returns its wall and CPU time.
func runNFTFile(ns, nft, file string) (nftRun, error) {
	return runNFT(ns, nft, "-f", file)
}

// runNFT runs nft with args in netns ns, discarding its output, and returns its wall and CPU
// time; a failure's error carries the first line of nft's message.
func runNFT(ns, nft string, args ...string) (nftRun, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, nft}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	s := time.Now()
	err := cmd.Run()
	r := nftRun{wall: time.Since(s)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		r.user = time.Duration(ru.Utime.Nano())
		r.sys = time.Duration(ru.Stime.Nano())
	}
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.Index(msg, "\n"); i >= 0 {
			msg = msg[:i] + " ..."
		}
		return r, fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return r, nil
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

func probeMain(argv []string) int {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	sizesF := fs.String("sizes", envOr("PROBE_SIZES", "1000,6000,12000"), "service-port counts")
	variantsF := fs.String("variants", envOr("PROBE_VARIANTS", strings.Join(Variants, ",")), "rule shapes")
	famF := fs.String("family", envOr("PROBE_FAMILY", FamIPv4), "ipv4 or ipv6")
	v0Max := fs.Int("v0-max", atoiOr(os.Getenv("PROBE_V0_MAX"), 12000), "largest size for upstream's shape v0, which grows super-linearly")
	a0Max := fs.Int("a0-max", atoiOr(os.Getenv("PROBE_A0_MAX"), 6000), "largest size for upstream's affinity shape a0 (65 s cold and 105 s reload at 6000 on the reference machine)")
	ksF := fs.String("ks", envOr("PROBE_KS", "1,10,100"), "endpoint counts of the per-packet probe")
	epsF := fs.String("endpoints", envOr("PROBE_ENDPOINTS", "2"), "endpoints per service of the load probe (each count is a run of its own)")
	pktN := fs.Int("pkt-n", atoiOr(os.Getenv("PROBE_PKT_N"), 2000), "connections per batch")
	rounds := fs.Int("pkt-rounds", atoiOr(os.Getenv("PROBE_PKT_ROUNDS"), 5), "batches per configuration (interleaved)")
	skipLoad := fs.Bool("skip-load", os.Getenv("PROBE_SKIP_LOAD") == "1", "skip the load probe")
	skipPkt := fs.Bool("skip-pkt", os.Getenv("PROBE_SKIP_PKT") == "1", "skip the per-packet probe")
	work := fs.String("work", "_output/bench/probe", "directory for generated rulesets")
	id := fs.String("id", fmt.Sprintf("bkp%d", os.Getpid()), "prefix of the netns names")
	fs.Parse(argv)

	nft, err := exec.LookPath("nft")
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe: nft not found")
		return 2
	}
	sizes, err := ParseSizes(*sizesF)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	epCounts, err := ParseSizes(*epsF)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe: -endpoints:", err)
		return 2
	}
	wd, _ := filepath.Abs(*work)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := &orchestrator{children: map[int]bool{}, id: *id, out: os.Stdout}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-sig
		o.cleanup()
		os.Exit(130)
	}()
	defer o.cleanup()
	o.printf("probe: kernel %s, %s, load %s\n", kernelRelease(), nftVersion(nft), loadavg())

	rc := 0
	if !*skipLoad {
		o.printf("probe-load: each ruleset is one `nft -f` transaction into a fresh netns (cold), then `nft -t list table` (the drift check's read), then the same content after `flush table` (reload, like a full re-sync); 6 TCP ports per service; wall s (user/sys)\n")
		for _, size := range sizes {
			for _, eps := range epCounts {
				for _, v := range strings.Split(*variantsF, ",") {
					v = strings.TrimSpace(v)
					if v == V0 && size > *v0Max || v == A0 && size > *a0Max {
						o.printf("probe-load: variant %s size %d: skipped (above PROBE_V0_MAX=%d / PROBE_A0_MAX=%d)\n", v, size, *v0Max, *a0Max)
						continue
					}
					if err := o.probeLoad(nft, wd, v, *famF, size, eps); err != nil {
						o.printf("probe-load: variant %s size %d endpoints %d: ERROR %v\n", v, size, eps, err)
						rc = 1
					}
				}
			}
		}
	}
	if !*skipPkt {
		var ks []int
		for _, f := range strings.Split(*ksF, ",") {
			if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && k > 0 {
				ks = append(ks, k)
			}
		}
		if err := o.probePackets(nft, ks, *pktN, *rounds); err != nil {
			o.printf("probe-pkt: ERROR %v\n", err)
			rc = 1
		}
	}
	return rc
}

// probeLoad loads variant v at size service ports with eps endpoints per service into a fresh
// netns, lists it tersely, reloads it, and prints the three timings on one line.
func (o *orchestrator) probeLoad(nft, wd, v, fam string, size, eps int) error {
	spec := ProbeSpec(fam, size)
	spec.Endpoints = eps
	cold := filepath.Join(wd, fmt.Sprintf("%s-%s-%d-%d.nft", v, fam, size, eps))
	reload := filepath.Join(wd, fmt.Sprintf("%s-%s-%d-%d.reload.nft", v, fam, size, eps))
	for file, rl := range map[string]bool{cold: false, reload: true} {
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		if err := GenerateRuleset(f, v, spec, rl); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	st, _ := os.Stat(cold)
	ns, err := o.newNetns("l")
	if err != nil {
		return err
	}
	defer o.delNetns(ns)
	c, err := runNFTFile(ns, nft, cold)
	if err != nil {
		return err
	}
	l, err := runNFT(ns, nft, "-t", "list", "table", nftFamily(fam), spec.Table)
	if err != nil {
		return err
	}
	r, err := runNFTFile(ns, nft, reload)
	if err != nil {
		return err
	}
	o.printf("probe-load: variant %s size %d endpoints %d family %s: cold %s s (%s/%s), list %s s (%s/%s), reload %s s (%s/%s), %d KiB\n",
		v, size, eps, fam, secs(c.wall), secs(c.user), secs(c.sys), secs(l.wall), secs(l.user), secs(l.sys), secs(r.wall), secs(r.user), secs(r.sys), st.Size()/1024)
	_ = os.Remove(cold)
	_ = os.Remove(reload)
	return nil
}

// probePackets measures the cost of a new connection through a DNAT service whose endpoints
// are k rules (v4) or one numgen map (v0), against a direct connection, in two netns joined
// by a veth pair: the client and the rules in one, an echo server on k addresses in the other.
func (o *orchestrator) probePackets(nft string, ks []int, n, rounds int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kmax := 1
	for _, k := range ks {
		kmax = max(kmax, k)
	}
	if kmax > 250 {
		return fmt.Errorf("k up to 250")
	}
	c, err := o.newNetns("c")
	if err != nil {
		return err
	}
	defer o.delNetns(c)
	s, err := o.newNetns("s")
	if err != nil {
		return err
	}
	defer o.delNetns(s)
	var batch strings.Builder
	fmt.Fprintf(&batch, "link add bkc0 type veth peer name bks0 netns %s\naddr add 10.98.0.1/24 dev bkc0\nlink set bkc0 up\nroute add 10.99.1.0/24 via 10.98.0.2\nroute add 172.30.0.0/16 via 10.98.0.2\n", s)
	if err := ipBatch(c, batch.String()); err != nil {
		return err
	}
	batch.Reset()
	fmt.Fprintf(&batch, "addr add 10.98.0.2/24 dev bks0\nlink set bks0 up\n")
	for i := 1; i <= kmax; i++ {
		fmt.Fprintf(&batch, "addr add 10.99.1.%d/32 dev lo\n", i)
	}
	if err := ipBatch(s, batch.String()); err != nil {
		return err
	}
	_ = exec.Command("ip", "netns", "exec", c, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000").Run()

	srv := exec.Command("ip", "netns", "exec", s, self, "echo", "-port", "9000", "-udp-addrs", strings.Join(epsFor(kmax), ","), "-discard", "10.98.0.2:9999")
	srv.Stderr = os.Stderr
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	o.mu.Lock()
	o.children[srv.Process.Pid] = true
	o.mu.Unlock()
	defer func() {
		_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
		_ = srv.Wait()
	}()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		return fmt.Errorf("echo server did not start: %v", err)
	}

	type cfg struct {
		name    string
		variant string
		k       int
	}
	cfgs := []cfg{{"direct (nat hook, no rule)", "none", 1}}
	for _, k := range ks {
		cfgs = append(cfgs, cfg{fmt.Sprintf("v4 k=%d", k), V4, k})
	}
	for _, k := range ks {
		cfgs = append(cfgs, cfg{fmt.Sprintf("v0 k=%d", k), V0, k})
	}
	eps := epsFor(kmax)
	res := map[string]map[string][]float64{} // proto -> cfg -> ns per connection, per batch
	for _, proto := range []string{"udp", "tcp"} {
		res[proto] = map[string][]float64{}
	}
	o.printf("probe-pkt: %d rounds x %d new connections per configuration and protocol; client in netns %s, echo server on %d addresses in %s\n", rounds, n, c, kmax, s)
	for r := 0; r < rounds; r++ {
		for _, cf := range cfgs {
			rs, err := PacketRuleset(cf.variant, FamIPv4, "172.30.0.1", 80, eps[:cf.k], 9000)
			if err != nil {
				return err
			}
			if cf.variant == "none" {
				rs += "add chain ip bkpkt out { type nat hook output priority -100 ; }\n"
			}
			if _, err := timedNFT(c, nft, rs, "-f", "-"); err != nil {
				return err
			}
			addr := "172.30.0.1:80"
			if cf.variant == "none" {
				addr = "10.99.1.1:9000"
			}
			for _, proto := range []string{"udp", "tcp"} {
				cmd := exec.Command("ip", "netns", "exec", c, self, "pktclient", "-proto", proto, "-addr", addr, "-n", strconv.Itoa(n))
				cmd.Stderr = os.Stderr
				b, err := cmd.Output()
				if err != nil {
					return fmt.Errorf("pktclient %s %s: %v", cf.name, proto, err)
				}
				f := strings.Fields(string(b))
				if len(f) < 2 {
					return fmt.Errorf("pktclient output %q", b)
				}
				per, _ := strconv.ParseFloat(f[0], 64)
				if fails, _ := strconv.Atoi(f[1]); fails > 0 {
					o.printf("probe-pkt: %s %s round %d: %d of %d failed\n", cf.name, proto, r+1, fails, n)
				}
				res[proto][cf.name] = append(res[proto][cf.name], per)
			}
		}
	}
	for _, proto := range []string{"udp", "tcp"} {
		base := Median(res[proto][fmt.Sprintf("v4 k=%d", ks[0])])
		for _, cf := range cfgs {
			v := res[proto][cf.name]
			m := Median(v)
			o.printf("probe-pkt: %s %-28s median %7.2f us per new connection (min %7.2f, max %7.2f), vs v4 k=%d: %+6.2f us\n",
				proto, cf.name, m/1e3, minF(v)/1e3, maxF(v)/1e3, ks[0], (m-base)/1e3)
		}
	}

	// Rule evaluation per packet: the endpoint-picking chain in the filter output hook,
	// traversed by every packet of a UDP flood on one socket.
	floodN := atoiOr(os.Getenv("PROBE_FLOOD_N"), 200000)
	evals := map[string][]float64{}
	var names []string
	for _, v := range []string{V4, V0} {
		for _, k := range ks {
			names = append(names, fmt.Sprintf("%s k=%d", v, k))
		}
	}
	// The connection probe's nat table is not needed any more.
	_, _ = timedNFT(c, nft, "", "delete", "table", "ip", "bkpkt")
	o.printf("probe-eval: %d rounds x %d UDP packets on one socket per configuration; the endpoint-picking chain runs for every packet (filter output hook)\n", rounds, floodN)
	for r := 0; r < rounds; r++ {
		for _, v := range []string{V4, V0} {
			for _, k := range ks {
				rs, err := EvalRuleset(v, k, "10.98.0.2", 9999)
				if err != nil {
					return err
				}
				if _, err := timedNFT(c, nft, rs, "-f", "-"); err != nil {
					return err
				}
				cmd := exec.Command("ip", "netns", "exec", c, self, "pktclient", "-mode", "flood", "-proto", "udp", "-addr", "10.98.0.2:9999", "-n", strconv.Itoa(floodN))
				cmd.Stderr = os.Stderr
				b, err := cmd.Output()
				if err != nil {
					return fmt.Errorf("flood %s k=%d: %v", v, k, err)
				}
				f := strings.Fields(string(b))
				if len(f) < 1 {
					return fmt.Errorf("flood output %q", b)
				}
				per, _ := strconv.ParseFloat(f[0], 64)
				name := fmt.Sprintf("%s k=%d", v, k)
				evals[name] = append(evals[name], per)
			}
		}
	}
	base := Median(evals[names[0]])
	for _, name := range names {
		v := evals[name]
		m := Median(v)
		o.printf("probe-eval: %-10s median %7.1f ns per packet (min %7.1f, max %7.1f), vs %s: %+7.1f ns\n", name, m, minF(v), maxF(v), names[0], m-base)
	}
	return nil
}

func epsFor(k int) []string {
	eps := make([]string, k)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.99.1.%d", i+1)
	}
	return eps
}

func minF(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxF(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func ipBatch(ns, batch string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s -batch: %v: %s", ns, err, out)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// echoMain serves TCP echo on the port on every address, and UDP echo on each of the
// given addresses (a socket per address, so that a reply leaves from the address the request
// was sent to, as conntrack's reverse NAT and the client's connected socket need); it prints
// "ready" when listening.
func echoMain(argv []string) int {
	fs := flag.NewFlagSet("echo", flag.ExitOnError)
	port := fs.Int("port", 9000, "port")
	udpAddrs := fs.String("udp-addrs", "", "comma-separated addresses for UDP")
	discard := fs.String("discard", "", "host:port of a UDP socket that reads and drops")
	fs.Parse(argv)
	if *discard != "" {
		pc, err := net.ListenPacket("udp", *discard)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
			}
		}()
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, a := range strings.Split(*udpAddrs, ",") {
		if a == "" {
			continue
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort(a, strconv.Itoa(*port)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo(buf[:n], from)
			}
		}()
	}
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 64)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}(c)
	}
}

// pktClientMain opens n new connections (a new source port each, so each is a new conntrack
// entry that traverses the nat rules), sends one byte and waits for the echo; it prints the
// mean nanoseconds per connection and the number of failures.
func pktClientMain(argv []string) int {
	fs := flag.NewFlagSet("pktclient", flag.ExitOnError)
	proto := fs.String("proto", "udp", "udp or tcp")
	addr := fs.String("addr", "", "host:port")
	n := fs.Int("n", 1000, "connections")
	mode := fs.String("mode", "connect", "connect: n new connections; flood: n UDP packets on one socket")
	fs.Parse(argv)
	if *mode == "flood" {
		c, err := net.Dial("udp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		msg := []byte{'x'}
		for range min(*n/10, 10000) {
			_, _ = c.Write(msg)
		}
		errs := 0
		start := time.Now()
		for range *n {
			if _, err := c.Write(msg); err != nil {
				errs++
			}
		}
		el := time.Since(start)
		fmt.Printf("%.1f %d\n", float64(el.Nanoseconds())/float64(*n), errs)
		return 0
	}
	msg := []byte{'x'}
	buf := make([]byte, 16)
	fails := 0
	one := func() error {
		c, err := net.DialTimeout(*proto, *addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST on close: no TIME_WAIT to run out of ports
		}
		_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Write(msg); err != nil {
			return err
		}
		_, err = c.Read(buf)
		return err
	}
	for range min(*n/10, 50) { // warm up
		_ = one()
	}
	start := time.Now()
	for range *n {
		if one() != nil {
			fails++
			if fails > 20 {
				fmt.Fprintf(os.Stderr, "pktclient: more than 20 failures, giving up\n")
				return 1
			}
		}
	}
	el := time.Since(start)
	fmt.Printf("%.0f %d\n", float64(el.Nanoseconds())/float64(*n), fails)
	return 0
}
