// Command sync is the orchestrator of make bench-sync: it runs the benchmark binaries built from
// the pristine and the patched tree (build/bench-sync.sh), interleaved in one session, and
// reports the Go time of full and partial syncs of the nftables proxier side by side. See
// bench/sync/README.md.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// result is one measurement, as the in-tree driver prints it.
type result struct {
	Tree        string  `json:"tree"`
	Family      string  `json:"family"`
	Ports       int     `json:"ports"`
	Phase       string  `json:"phase"`
	Workers     int     `json:"workers"`
	Ms          float64 `json:"ms"`
	GCCPUMs     float64 `json:"gc_cpu_ms"`
	AllocMB     float64 `json:"alloc_mb"`
	Allocs      uint64  `json:"allocs"`
	Ops         int     `json:"ops"`
	Txs         int     `json:"txs"`
	SerializeMs float64 `json:"serialize_ms"`
	Batch       int     `json:"batch"`
}

// config is the benchmark's plan, from the environment.
type config struct {
	sizes          []int
	families       []string
	rounds         int
	fulls          int
	partials       int
	batch          string
	checkUpstream  int
	workers        int
	upstream, tree string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func parseInts(name, v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func loadConfig() (config, error) {
	c := config{workers: runtime.GOMAXPROCS(0), batch: envOr("SYNC_BATCH", "1,4,16,64")}
	var err error
	if c.sizes, err = parseInts("SYNC_SIZES", envOr("SYNC_SIZES", "1000,6000,12000,36000")); err != nil {
		return c, err
	}
	c.families = strings.Split(envOr("SYNC_FAMILIES", "ipv4,ipv6"), ",")
	for _, f := range c.families {
		if f != "ipv4" && f != "ipv6" {
			return c, fmt.Errorf("SYNC_FAMILIES: %q is not ipv4 or ipv6", f)
		}
	}
	for name, dst := range map[string]*int{"SYNC_ROUNDS": &c.rounds, "SYNC_FULL": &c.fulls, "SYNC_PARTIAL": &c.partials, "SYNC_CHECK_UPSTREAM_MAX": &c.checkUpstream} {
		def := map[string]string{"SYNC_ROUNDS": "3", "SYNC_FULL": "2", "SYNC_PARTIAL": "15", "SYNC_CHECK_UPSTREAM_MAX": "6000"}[name]
		v, err := parseInts(name, envOr(name, def))
		if err != nil {
			return c, err
		}
		*dst = v[0]
	}
	if _, err := parseInts("SYNC_BATCH", c.batch); err != nil {
		return c, err
	}
	return c, nil
}

// servicesFor returns how many Services of 6 ports make about size service ports.
func servicesFor(size int) int {
	return max(1, (size+3)/6)
}

// runDriver runs one benchmark binary and returns its measurements.
func runDriver(bin string, env []string) ([]result, error) {
	cmd := exec.Command(bin, "-test.run", "^TestBenchSync$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{"BENCHSYNC=1"}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var results []result
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: bad line %q: %w", bin, line, err)
		}
		results = append(results, r)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	return results, nil
}

// nftCheck is the cost of `nft --check -f` of one ruleset.
type nftCheck struct {
	tree, family string
	ports        int
	wall, user   time.Duration
	sys          time.Duration
	skipped      string
	err          error
}

// checkRuleset runs nft --check -f file in a network namespace of its own.
func checkRuleset(nft, ns, file string) (wall, user, sys time.Duration, err error) {
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return 0, 0, 0, fmt.Errorf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	cmd := exec.Command("ip", "netns", "exec", ns, nft, "--check", "-f", file)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall = time.Since(start)
	if err != nil {
		return wall, 0, 0, fmt.Errorf("nft --check -f %s: %v: %.400s", file, err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		user = time.Duration(ru.Utime.Nano())
		sys = time.Duration(ru.Stime.Nano())
	}
	return wall, user, sys, nil
}

func main() {
	upstream := flag.String("upstream", "", "the benchmark binary built from the pristine tree")
	patched := flag.String("patched", "", "the benchmark binary built from the patched tree")
	work := flag.String("work", "", "a directory for the generated rulesets")
	nft := flag.String("nft", "", "nft binary for nft --check of the rulesets (needs root); empty: skip")
	flag.Parse()
	if *upstream == "" || *patched == "" || *work == "" {
		fmt.Fprintln(os.Stderr, "usage: sync -upstream BIN -patched BIN -work DIR [-nft NFT]")
		os.Exit(2)
	}
	c, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	fmt.Printf("bench-sync: GOMAXPROCS=%d (all workers = %d), rounds=%d, full syncs per round=%d, partial syncs per round=%d\n",
		c.workers, c.workers, c.rounds, c.fulls, c.partials)
	workerList := "1"
	if c.workers > 1 {
		workerList = fmt.Sprintf("1,%d", c.workers)
	}
	var all []result
	var checks []nftCheck
	var ceilings []float64
	largest := c.sizes[len(c.sizes)-1]
	for _, family := range c.families {
		for _, size := range c.sizes {
			ports := servicesFor(size) * 6
			for round := 0; round < c.rounds; round++ {
				for _, tree := range []string{"upstream", "patched"} {
					bin, workers := *upstream, "1"
					if tree == "patched" {
						bin, workers = *patched, workerList
					}
					env := []string{"BENCHSYNC_FAMILY=" + family, fmt.Sprintf("BENCHSYNC_PORTS=%d", ports),
						"BENCHSYNC_WORKERS=" + workers, fmt.Sprintf("BENCHSYNC_FULL=%d", c.fulls), fmt.Sprintf("BENCHSYNC_PARTIAL=%d", c.partials)}
					if round == 0 {
						env = append(env, "BENCHSYNC_DUMP="+filepath.Join(*work, fmt.Sprintf("%s-%s-%d.nft", tree, family, ports)))
					}
					if tree == "patched" && size == largest && round == c.rounds-1 {
						env = append(env, "BENCHSYNC_BATCH="+c.batch)
					}
					fmt.Fprintf(os.Stderr, "==> %s %s %d ports, round %d\n", tree, family, ports, round+1)
					rs, err := runDriver(bin, env)
					if err != nil {
						fmt.Fprintln(os.Stderr, "error:", err)
						os.Exit(1)
					}
					all = append(all, rs...)
				}
				if size == largest && c.workers > 1 {
					ceilings = append(ceilings, ceilingRound(c.workers))
				}
			}
			if *nft != "" {
				for i, tree := range []string{"upstream", "patched"} {
					ck := nftCheck{tree: tree, family: family, ports: ports}
					if tree == "upstream" && ports > c.checkUpstream {
						ck.skipped = fmt.Sprintf("above SYNC_CHECK_UPSTREAM_MAX=%d: the kernel cost of upstream's shapes is super-linear (make bench-kernel)", c.checkUpstream)
					} else {
						file := filepath.Join(*work, fmt.Sprintf("%s-%s-%d.nft", tree, family, ports))
						ck.wall, ck.user, ck.sys, ck.err = checkRuleset(*nft, fmt.Sprintf("bs%d-%d-%d", os.Getpid(), ports, i), file)
					}
					checks = append(checks, ck)
				}
			}
		}
	}
	rep := summarize(all, c.workers)
	fmt.Print(rep.table())
	fmt.Print(batchTable(all, c.workers))
	if *nft != "" {
		fmt.Println("\nnft --check -f of the first full sync's ruleset, in a throwaway netns (nft's user CPU is parsing; sys is the kernel validating the batch):")
		for _, ck := range checks {
			switch {
			case ck.skipped != "":
				fmt.Printf("  %-5s %6d  %-8s skipped: %s\n", ck.family, ck.ports, ck.tree, ck.skipped)
			case ck.err != nil:
				fmt.Printf("  %-5s %6d  %-8s FAILED: %v\n", ck.family, ck.ports, ck.tree, ck.err)
			default:
				fmt.Printf("  %-5s %6d  %-8s wall=%dms user=%dms sys=%dms\n", ck.family, ck.ports, ck.tree,
					ck.wall.Milliseconds(), ck.user.Milliseconds(), ck.sys.Milliseconds())
			}
		}
	} else {
		fmt.Println("\nnft --check: skipped (not root)")
	}
	fmt.Print(rep.closing(36000))
	if len(ceilings) > 0 {
		fmt.Printf("parallel_ceiling: %.2f (a loop with no serial part, 1 goroutine against %d, median of %d rounds beside the %d-port syncs: the most speedup could read here now)\n",
			median(ceilings), c.workers, len(ceilings), servicesFor(largest)*6)
	}
}
