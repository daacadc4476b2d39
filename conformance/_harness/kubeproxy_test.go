package kpconformance

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proxyUnderTest is one kube-proxy binary and how it is run.
type proxyUnderTest struct {
	name    string   // "patched" or "upstream"
	bin     string   // absolute path of the binary
	patched bool     // it has the ruleSync flags (--full-sync-period, ...)
	extra   []string // flags added to every start (the patched schedule)
}

// kubeProxy is a running kube-proxy in the node namespace.
type kubeProxy struct {
	cmd     *exec.Cmd
	done    chan error
	log     *os.File
	started time.Time // just before the process was started
}

var (
	healthzURL = "http://" + apiNodeV4 + ":10256/healthz"
	metricsURL = "http://" + apiNodeV4 + ":10249/metrics"
)

// startKubeProxy starts p in the node namespace for families fams (the cluster CIDRs follow
// them), with its output appended to logDir/kube-proxy-<name>.log, and waits until its healthz
// answers 200 (its first sync is done).
func startKubeProxy(ctx context.Context, p proxyUnderTest, fams []family, kubeconfig, logDir string, extra ...string) (*kubeProxy, error) {
	kp, err := launchKubeProxy(p, fams, kubeconfig, logDir, extra...)
	if err != nil {
		return nil, err
	}
	if err := kp.waitHealthy(ctx, 60*time.Second); err != nil {
		kp.stop()
		return nil, fmt.Errorf("%s kube-proxy not healthy: %w (log: %s)", p.name, err, kp.log.Name())
	}
	return kp, nil
}

// launchKubeProxy starts p in the node namespace for families fams as startKubeProxy does, and
// returns at once. `ip netns exec` execs the binary, so the process is kube-proxy itself.
func launchKubeProxy(p proxyUnderTest, fams []family, kubeconfig, logDir string, extra ...string) (*kubeProxy, error) {
	var cidrs []string
	for _, f := range fams {
		cidrs = append(cidrs, f.podCIDR)
	}
	args := []string{"netns", "exec", nodeNS, p.bin,
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=nftables",
		"--hostname-override=" + nodeName,
		"--cluster-cidr=" + strings.Join(cidrs, ","),
		"--healthz-bind-address=0.0.0.0:10256",
		"--metrics-bind-address=0.0.0.0:10249",
		"--conntrack-max-per-core=0",
		"--v=2",
	}
	args = append(args, p.extra...)
	args = append(args, extra...)
	lf, err := os.OpenFile(filepath.Join(logDir, "kube-proxy-"+p.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(lf, "\n===== %s start: ip %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	kp := &kubeProxy{cmd: cmd, done: make(chan error, 1), log: lf, started: started}
	go func() { kp.done <- cmd.Wait() }()
	return kp, nil
}

// waitHealthy polls kube-proxy's healthz every 100ms until it answers 200 (nil), the process
// exits, or timeout passes (an error).
func (kp *kubeProxy) waitHealthy(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() error {
		if err := kp.exited(); err != nil {
			return err
		}
		resp, err := http.Get(healthzURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("healthz %d", resp.StatusCode)
		}
		return nil
	})
}

// exited returns an error when the process has exited, and nil while it runs.
func (kp *kubeProxy) exited() error {
	select {
	case err := <-kp.done:
		kp.done <- err
		return fmt.Errorf("kube-proxy exited: %v", err)
	default:
		return nil
	}
}

// stop sends SIGTERM, waits up to 10s, then kills. It is idempotent.
func (kp *kubeProxy) stop() {
	if kp == nil || kp.cmd.Process == nil {
		return
	}
	_ = kp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-kp.done:
		kp.done <- err
	case <-time.After(10 * time.Second):
		_ = kp.cmd.Process.Kill()
		err := <-kp.done
		kp.done <- err
	}
	kp.log.Close()
}

// metric returns the sum of the samples of metric name (for example a histogram's
// "..._count") whose ip_family label is fam's, from kube-proxy's metrics.
func metric(name string, f family) (float64, error) {
	total, found, err := metricSum(name, f)
	if err == nil && !found {
		err = fmt.Errorf("no %s for %s in kube-proxy's metrics", name, f.name)
	}
	return total, err
}

// metricSum is metric that also reports whether any sample was found: a counter that has not
// counted anything yet has none.
func metricSum(name string, f family) (total float64, found bool, err error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	label := `ip_family="IPv4"`
	if f.v6 {
		label = `ip_family="IPv6"`
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fs := strings.Fields(line)
		v, err := strconv.ParseFloat(fs[len(fs)-1], 64)
		if err != nil {
			return 0, false, err
		}
		total += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, false, err
	}
	return total, found, nil
}

// fullSyncs returns how many full syncs of family f kube-proxy has completed.
func fullSyncs(f family) (int, error) {
	n, err := metric("kubeproxy_sync_full_proxy_rules_duration_seconds_count", f)
	return int(n), err
}

// waitFullSyncs waits until n more full syncs of family f than now have completed, or timeout.
func waitFullSyncs(ctx context.Context, f family, n int, timeout time.Duration) error {
	start, err := fullSyncs(f)
	if err != nil {
		return err
	}
	return poll(ctx, timeout, func() error {
		cur, err := fullSyncs(f)
		if err != nil {
			return err
		}
		if cur < start+n {
			return fmt.Errorf("%d of %d %s full syncs", cur-start, n, f.name)
		}
		return nil
	})
}

// poll calls fn every 100ms until it returns nil, ctx ends, or timeout passes; then it returns
// fn's last error.
func poll(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v (last: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
