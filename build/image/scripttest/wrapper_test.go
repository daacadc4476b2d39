package scripttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "../../.."))
}

var wrapped = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// stub is a fake xtables-*-multi: invoked as *-save it prints the fixture for its backend and
// family (or fails when the fixture is "FAIL"), logging the call; otherwise it prints its name,
// its arguments and what it read on standard input.
const stub = `#!/bin/sh
me=${0##*/}
case $me in
*-nft*) backend=nft ;;
*) backend=legacy ;;
esac
case $me in
ip6*) family=v6 ;;
*) family=v4 ;;
esac
case $me in
*-save)
	echo "$me" >>"$STUB/calls"
	f="$STUB/$backend-$family"
	[ -f "$f" ] || exit 0
	if [ "$(cat "$f")" = FAIL ]; then echo "can't initialize $me: Table does not exist" >&2; exit 1; fi
	cat "$f"
	;;
*-restore)
	echo "$me $*"
	cat
	;;
*)
	echo "$me $*"
	;;
esac
`

type node struct {
	t    *testing.T
	sbin string
	stub string
}

func newNode(t *testing.T, fixtures map[string]string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, sbin: filepath.Join(dir, "usr/sbin"), stub: filepath.Join(dir, "stub")}
	os.MkdirAll(n.sbin, 0o755)
	os.MkdirAll(n.stub, 0o755)
	w, err := os.ReadFile(filepath.Join(repoRoot(t), "images/iptables-wrapper"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(n.sbin, "iptables-wrapper"), w, 0o755))
	for _, m := range []string{"nft", "legacy"} {
		must(os.WriteFile(filepath.Join(n.sbin, "xtables-"+m+"-multi"), []byte(stub), 0o755))
		for _, c := range []string{"iptables", "ip6tables"} {
			for _, s := range []string{"", "-save", "-restore"} {
				must(os.Symlink("xtables-"+m+"-multi", filepath.Join(n.sbin, c+"-"+m+s)))
			}
		}
	}
	for _, c := range wrapped {
		must(os.Symlink("iptables-wrapper", filepath.Join(n.sbin, c)))
	}
	for k, v := range fixtures {
		must(os.WriteFile(filepath.Join(n.stub, k), []byte(v), 0o644))
	}
	return n
}

// run executes sbin/cmd with args and stdin, returning its combined output.
func (n *node) run(stdin, cmd string, args ...string) (string, error) {
	c := exec.Command(filepath.Join(n.sbin, cmd), args...)
	c.Env = append(os.Environ(), "STUB="+n.stub, "IPTABLES_WRAPPER_DEBUG=1")
	c.Stdin = strings.NewReader(stdin)
	out, err := c.CombinedOutput()
	return string(out), err
}

func (n *node) links() map[string]string {
	m := map[string]string{}
	for _, c := range wrapped {
		l, err := os.Readlink(filepath.Join(n.sbin, c))
		if err != nil {
			n.t.Fatal(err)
		}
		m[c] = l
	}
	return m
}

func (n *node) saveCalls() int {
	b, _ := os.ReadFile(filepath.Join(n.stub, "calls"))
	return strings.Count(string(b), "\n")
}

// An iptables-mode kube-proxy's leftovers, as iptables-save prints them.
const kubeRules = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABCDEFGHIJKLMNOP - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-ABCDEFGHIJKLMNOP
COMMIT
`

const hint = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"

const plainRules = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p tcp --dport 80 -j ACCEPT\nCOMMIT\n"

func TestWrapperPicksTheBackendThatHoldsTheRules(t *testing.T) {
	cases := []struct {
		name     string
		fixtures map[string]string
		want     string
	}{
		{"fresh node: nft", nil, "nft"},
		{"old kube-proxy rules in legacy", map[string]string{"legacy-v4": kubeRules}, "legacy"},
		{"old kube-proxy rules in legacy ip6tables only", map[string]string{"legacy-v6": kubeRules}, "legacy"},
		{"more KUBE-* rules in nft", map[string]string{"legacy-v4": kubeRules, "nft-v4": kubeRules, "nft-v6": kubeRules}, "nft"},
		{"kubelet's hint chains decide first", map[string]string{"legacy-v4": hint, "nft-v4": kubeRules + plainRules}, "legacy"},
		{"hints in both: KUBE-* counts decide", map[string]string{"legacy-v4": hint + kubeRules, "nft-v4": hint}, "legacy"},
		{"legacy iptables missing from the kernel", map[string]string{"legacy-v4": "FAIL", "legacy-v6": "FAIL"}, "nft"},
		{"no KUBE-* anywhere: more rules wins", map[string]string{"legacy-v4": plainRules, "nft-v4": "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n"}, "legacy"},
		{"a tie goes to nft", map[string]string{"legacy-v4": plainRules, "nft-v4": plainRules}, "nft"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, c.fixtures)
			out, err := n.run("", "iptables", "-w", "-L", "-n")
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(out, "iptables-"+c.want+" -w -L -n") {
				t.Errorf("ran:\n%s\nwant iptables-%s with the caller's arguments", out, c.want)
			}
			for cmd, target := range n.links() {
				want := strings.Replace(cmd, "tables", "tables-"+c.want, 1)
				if target != want {
					t.Errorf("%s -> %s, want %s", cmd, target, want)
				}
			}
		})
	}
}

func TestWrapperDecidesOnceAndKeepsStdin(t *testing.T) {
	n := newNode(t, map[string]string{"legacy-v4": kubeRules})
	out, err := n.run("*nat\n-X KUBE-SERVICES\nCOMMIT\n", "ip6tables-restore", "--noflush")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "ip6tables-legacy-restore --noflush\n*nat\n-X KUBE-SERVICES\nCOMMIT\n") {
		t.Errorf("the restore command did not get its input:\n%s", out)
	}
	calls := n.saveCalls()
	if calls == 0 {
		t.Fatal("the wrapper did not look at the save commands")
	}
	// The links now lead straight to legacy: no more decisions.
	out, err = n.run("", "iptables-save", "-t", "nat")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "KUBE-SERVICES") || strings.Contains(out, "iptables-wrapper:") {
		t.Errorf("the second call went through the wrapper or the wrong backend:\n%s", out)
	}
	if got := n.saveCalls(); got != calls+1 {
		t.Errorf("save calls %d, want %d (only the caller's own)", got, calls+1)
	}
}

func TestWrapperRefusesOtherNames(t *testing.T) {
	n := newNode(t, nil)
	os.Symlink("iptables-wrapper", filepath.Join(n.sbin, "ebtables"))
	out, err := n.run("", "ebtables", "-L")
	if err == nil || !strings.Contains(out, "run it as iptables") {
		t.Errorf("err %v, output %s", err, out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit %v, want 2", err)
	}
	if n.links()["iptables"] != "iptables-wrapper" {
		t.Error("a refused call repointed the links")
	}
}
