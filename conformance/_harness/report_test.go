package kpconformance

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// result is one proxy's outcome of one case.
type result struct {
	err error
	dur time.Duration
}

// report collects the results of both proxies, keyed by "variant phase case", in first-seen
// order, and the patched build's load counts.
type report struct {
	mu      sync.Mutex
	order   []string
	results map[string]map[string]result // key -> proxy name -> result
	load    [3]int64                     // attempted, failed, reset
	loadRun bool
}

func newReport() *report { return &report{results: map[string]map[string]result{}} }

// record stores a result and prints it as progress; failures are printed with their error.
func (r *report) record(variant, phase, name, proxy string, err error, dur time.Duration) {
	key := fmt.Sprintf("%-5s %-9s %-22s", variant, phase, name)
	r.mu.Lock()
	if r.results[key] == nil {
		r.results[key] = map[string]result{}
		r.order = append(r.order, key)
	}
	r.results[key][proxy] = result{err: err, dur: dur}
	r.mu.Unlock()
	if err != nil {
		progress("%-8s %s FAIL (%.1fs): %v", proxy, key, dur.Seconds(), err)
	} else {
		progress("%-8s %s ok (%.1fs)", proxy, key, dur.Seconds())
	}
}

// addLoad adds the counts of one load run.
func (r *report) addLoad(attempted, failed, reset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.load[0] += attempted
	r.load[1] += failed
	r.load[2] += reset
	r.loadRun = true
}

// verdict is "PASS", "FAIL" or "-" (not run) for one proxy's result of key.
func (r *report) verdict(key, proxy string) string {
	res, ok := r.results[key][proxy]
	switch {
	case !ok:
		return "-"
	case res.err != nil:
		return "FAIL"
	default:
		return "PASS"
	}
}

// counts returns how many cases proxy passed and failed.
func (r *report) counts(proxy string) (passed, failed int) {
	for _, k := range r.order {
		switch r.verdict(k, proxy) {
		case "PASS":
			passed++
		case "FAIL":
			failed++
		}
	}
	return
}

// agreement returns on how many of the cases that both proxies ran they agree, and how many
// both ran.
func (r *report) agreement() (agree, both int) {
	for _, k := range r.order {
		u, p := r.verdict(k, "upstream"), r.verdict(k, "patched")
		if u == "-" || p == "-" {
			continue
		}
		both++
		if u == p {
			agree++
		}
	}
	return
}

// ok reports whether the run passes: the patched build failed nothing, agreed with upstream on
// every case both ran, and lost no connection under load.
func (r *report) ok() bool {
	_, pf := r.counts("patched")
	agree, both := r.agreement()
	return pf == 0 && agree == both && r.loadRun && r.load[1] == 0 && r.load[2] == 0
}

// lines returns the report: one line per case with both proxies' verdicts side by side, then
// the closing lines, the patched build's last.
func (r *report) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{fmt.Sprintf("%-5s %-9s %-22s %-8s %-8s", "", "phase", "case", "patched", "upstream")}
	for _, k := range r.order {
		out = append(out, fmt.Sprintf("%s %-8s %-8s", k, r.verdict(k, "patched"), r.verdict(k, "upstream")))
	}
	up, uf := r.counts("upstream")
	pp, pf := r.counts("patched")
	agree, both := r.agreement()
	return append(out,
		fmt.Sprintf("upstream: %d passed, %d failed", up, uf),
		fmt.Sprintf("agreement: %d/%d cases", agree, both),
		fmt.Sprintf("load: attempted=%d failed=%d reset=%d", r.load[0], r.load[1], r.load[2]),
		fmt.Sprintf("patched: %d passed, %d failed", pp, pf),
	)
}

// write writes the report to path, or to stdout if path is empty.
func (r *report) write(path string) error {
	text := strings.Join(r.lines(), "\n") + "\n"
	if path == "" {
		fmt.Print(text)
		return nil
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
