package scripttest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
)

// fakeApt is apt-get and apt-cache for debs.sh: the "archive" is a directory of files named
// NAME=VERSION whose content is the .deb. apt-get download writes NAME_VERSION_ARCH.deb into
// the current directory, or fails as apt does when the version is gone.
const fakeApt = `#!/bin/sh
echo "$(basename "$0") $*" >>"$ARCHIVE/apt-calls"
case "$(basename "$0") $*" in
*indextargets*)
	echo "bookworm http://mirror.invalid/debian/"
	echo "bookworm-security http://mirror.invalid/debian-security/"
	;;
*" update"*) ;;
*policy*)
	for f in "$ARCHIVE"/"$2"=*; do echo "  Candidate: ${f##*=}"; done
	;;
*download*)
	for a; do
		case $a in
		*=*)
			if [ ! -f "$ARCHIVE/$a" ]; then
				echo "E: Version '${a#*=}' for '${a%%=*}' was not found" >&2
				exit 100
			fi
			;;
		esac
	done
	for a; do
		case $a in *=*) cp "$ARCHIVE/$a" "./${a%%=*}_$(echo "${a#*=}" | sed 's/:/%3a/')_amd64.deb" ;; esac
	done
	;;
*) echo "unexpected apt call: $*" >&2; exit 1 ;;
esac
`

type fetcher struct {
	t        *testing.T
	dir      string
	archive  string
	cache    string
	lockPath string
	kpimage  string
}

func newFetcher(t *testing.T, kpimage string) *fetcher {
	dir := t.TempDir()
	f := &fetcher{t: t, dir: dir, archive: filepath.Join(dir, "archive"), cache: filepath.Join(dir, "cache"), kpimage: kpimage}
	os.MkdirAll(f.archive, 0o755)
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	for _, n := range []string{"apt-get", "apt-cache"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(fakeApt), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "keyring.gpg"), []byte("key"), 0o644)
	return f
}

// publish puts NAME=VERSION in the fake archive and returns its lock entry.
func (f *fetcher) publish(name, version, content string) lockfile.Entry {
	os.WriteFile(filepath.Join(f.archive, name+"="+version), []byte(content), 0o644)
	sum := sha256.Sum256([]byte(content))
	return lockfile.Entry{Name: name, Version: version, Arch: "amd64", SHA256: hex.EncodeToString(sum[:])}
}

func (f *fetcher) lock(entries ...lockfile.Entry) {
	l := &lockfile.Lock{Input: lockfile.SpecDigest(nil), Suite: "bookworm", Arches: []string{"amd64"}, Entries: entries}
	f.lockPath = filepath.Join(f.dir, "packages.lock")
	if err := os.WriteFile(f.lockPath, l.Format(nil), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fetcher) run() (string, error) {
	c := exec.Command(filepath.Join(repoRoot(f.t), "build/image/debs.sh"), f.kpimage, f.lockPath, f.cache, filepath.Join(f.dir, "apt"))
	c.Env = append(os.Environ(), "PATH="+filepath.Join(f.dir, "bin")+":"+os.Getenv("PATH"), "ARCHIVE="+f.archive,
		"APT_KEYRING="+filepath.Join(f.dir, "keyring.gpg"))
	out, err := c.CombinedOutput()
	return string(out), err
}

func (f *fetcher) aptCalls() int {
	b, _ := os.ReadFile(filepath.Join(f.archive, "apt-calls"))
	return strings.Count(string(b), "\n")
}

func buildKpimage(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "kpimage")
	c := exec.Command("go", "build", "-o", out, "./build/image/cmd/kpimage")
	c.Dir = repoRoot(t)
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build kpimage: %v: %s", err, b)
	}
	return out
}

func TestDebsFetchVerifyAndStaleVersions(t *testing.T) {
	kp := buildKpimage(t)

	t.Run("fetch, verify, then offline", func(t *testing.T) {
		f := newFetcher(t, kp)
		a := f.publish("libc6", "2.36-9+deb12u14", "libc deb")
		b := f.publish("conntrack", "1:1.4.7-1+b2", "conntrack deb")
		f.lock(b, a)
		if out, err := f.run(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, e := range []lockfile.Entry{a, b} {
			if _, err := os.Stat(filepath.Join(f.cache, e.DebFileName())); err != nil {
				t.Errorf("%s not cached: %v", e.Name, err)
			}
		}
		// A warm cache needs no apt at all.
		calls := f.aptCalls()
		os.RemoveAll(filepath.Join(f.dir, "bin"))
		if out, err := f.run(); err != nil {
			t.Fatalf("warm cache: %v: %s", err, out)
		}
		if f.aptCalls() != calls {
			t.Error("a warm cache called apt")
		}
	})

	t.Run("a corrupted cache entry is fetched again", func(t *testing.T) {
		f := newFetcher(t, kp)
		a := f.publish("libc6", "2.36-9+deb12u14", "libc deb")
		f.lock(a)
		os.MkdirAll(f.cache, 0o755)
		os.WriteFile(filepath.Join(f.cache, a.DebFileName()), []byte("corrupt"), 0o644)
		if out, err := f.run(); err != nil || !strings.Contains(out, "does not match") {
			t.Fatalf("%v: %s", err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(f.cache, a.DebFileName())); string(b) != "libc deb" {
			t.Errorf("cache holds %q", b)
		}
	})

	t.Run("the archive's file differs from the lock", func(t *testing.T) {
		f := newFetcher(t, kp)
		a := f.publish("libc6", "2.36-9+deb12u14", "libc deb")
		a.SHA256 = strings.Repeat("0", 64)
		f.lock(a)
		out, err := f.run()
		if err == nil || !strings.Contains(out, "differs from the recorded") {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := os.Stat(filepath.Join(f.cache, a.DebFileName())); err == nil {
			t.Error("an unverified .deb entered the cache")
		}
	})

	t.Run("a superseded version names itself and the refresh command", func(t *testing.T) {
		f := newFetcher(t, kp)
		a := f.publish("libc6", "2.36-9+deb12u15", "new libc")
		a.Version = "2.36-9+deb12u13" // recorded, but the archive has moved on
		b := f.publish("kmod", "30+20221128-1", "kmod deb")
		f.lock(b, a)
		out, err := f.run()
		if err == nil {
			t.Fatalf("succeeded: %s", out)
		}
		for _, want := range []string{
			"no longer has these recorded versions",
			"libc6 2.36-9+deb12u13",
			"the archive now has: 2.36-9+deb12u15",
			"    make image-lock",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "kmod 30") {
			t.Errorf("kmod is still in the archive but was named:\n%s", out)
		}
	})
}
