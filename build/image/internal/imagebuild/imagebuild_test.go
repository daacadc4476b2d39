package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/layer"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
)

var epoch = time.Unix(1784743658, 0).UTC()

// fixture is a repo-like directory: a spec, lock and table for two tiny .debs made with
// dpkg-deb, a wrapper, a "binary" and upstream license files.
type fixture struct {
	dir  string
	opts Options
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// fakeELF is a 64-bit little-endian ELF header for machine, followed by payload: enough for
// debug/elf to read the machine, not a program.
func fakeELF(machine elf.Machine, payload string) string {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64)
	return string(h) + payload
}

// makeDeb builds NAME_VERSION_ARCH.deb from files (path -> content; "->target" makes a symlink).
func makeDeb(t *testing.T, out, pkg, version, arch string, files map[string]string) lockfile.Entry {
	t.Helper()
	src := filepath.Join(t.TempDir(), pkg+"-"+arch)
	write(t, filepath.Join(src, "DEBIAN/control"), "Package: "+pkg+"\nVersion: "+version+
		"\nArchitecture: "+arch+"\nMaintainer: test <t@example.invalid>\nDescription: test package\n", 0o644)
	for p, c := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if strings.Contains(p, "sbin/") {
			mode = 0o755
		}
		write(t, full, c, mode)
	}
	e := lockfile.Entry{Name: pkg, Version: version, Arch: arch}
	deb := filepath.Join(out, e.DebFileName())
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-b", src, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v: %s", err, b)
	}
	data, _ := os.ReadFile(deb)
	sum := sha256.Sum256(data)
	e.SHA256 = hex.EncodeToString(sum[:])
	return e
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed")
	}
	dir := t.TempDir()
	cache := filepath.Join(dir, "debs")
	os.MkdirAll(cache, 0o755)
	sbin := map[string]string{
		"usr/sbin/xtables-nft-multi":                   "nft-multi",
		"usr/sbin/xtables-legacy-multi":                "legacy-multi",
		"usr/sbin/nft":                                 "nft",
		"usr/share/doc/fake-iptables/copyright":        "copyright text",
		"usr/share/doc/fake-iptables/changelog.Debian": "dropped",
		"usr/share/man/man8/iptables.8":                "dropped",
		"etc/init.d/fake":                              "dropped",
	}
	for _, m := range []string{"nft", "legacy"} {
		for _, c := range []string{"iptables", "ip6tables"} {
			for _, s := range []string{"", "-save", "-restore"} {
				sbin["usr/sbin/"+c+"-"+m+s] = "->xtables-" + m + "-multi"
			}
		}
	}
	var entries []lockfile.Entry
	for arch, triplet := range map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"} {
		entries = append(entries, makeDeb(t, cache, "fake-iptables", "1:1.8.9-2", arch, sbin),
			makeDeb(t, cache, "fake-libc", "2.36-9+deb12u14", arch, map[string]string{
				"lib/" + triplet + "/libc.so.6":     "libc " + arch,
				"usr/share/doc/fake-libc/copyright": "libc copyright",
				"var/run/":                          "",
			}))
	}
	entries = append(entries, makeDeb(t, cache, "fake-netbase", "6.4", "all", map[string]string{"etc/protocols": "ip 0 IP"}))
	specText := "suite bookworm\narch amd64 arm64\nroot fake-iptables # the tools\nroot fake-libc\nroot fake-netbase\n"
	write(t, filepath.Join(dir, "packages.in"), specText, 0o644)
	spec, _ := lockfile.ParseSpec(strings.NewReader(specText))
	lock := &lockfile.Lock{Input: lockfile.SpecDigest([]byte(specText)), Suite: "bookworm", Arches: []string{"amd64", "arm64"},
		Entries: entries}
	write(t, filepath.Join(dir, "packages.lock"), string(lock.Format([]string{"test"})), 0o644)
	parsed, err := lockfile.Parse(strings.NewReader(string(lock.Format([]string{"test"}))))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "PACKAGES.md"), string(lockfile.Markdown(parsed, spec)), 0o644)
	write(t, filepath.Join(dir, "wrapper"), "#!/bin/sh\necho wrapper\n", 0o755)
	write(t, filepath.Join(dir, "kube-proxy-amd64"), fakeELF(elf.EM_X86_64, "kube-proxy amd64"), 0o700)
	write(t, filepath.Join(dir, "kube-proxy-arm64"), fakeELF(elf.EM_AARCH64, "kube-proxy arm64"), 0o700)
	write(t, filepath.Join(dir, "up/LICENSE"), "Apache License", 0o600)
	write(t, filepath.Join(dir, "up/LICENSES/third_party/x/LICENSE"), "x license", 0o600)
	return &fixture{dir: dir, opts: Options{
		SpecPath: filepath.Join(dir, "packages.in"), LockPath: filepath.Join(dir, "packages.lock"),
		PackagesMD: filepath.Join(dir, "PACKAGES.md"), DebCache: cache, Wrapper: filepath.Join(dir, "wrapper"),
		Binaries:    map[string]string{"amd64": filepath.Join(dir, "kube-proxy-amd64"), "arm64": filepath.Join(dir, "kube-proxy-arm64")},
		License:     filepath.Join(dir, "up/LICENSE"),
		LicensesDir: filepath.Join(dir, "up/LICENSES"), Version: "v1.36.3+overlay.2", Upstream: "v1.36.3",
		Commit: "abc123", Epoch: epoch, ImageName: "kube-proxy-overlay/kube-proxy", Tag: "v1.36.3_overlay.2",
		OutDir: filepath.Join(dir, "out"), Scratch: t.TempDir(),
	}}
}

// files lists a layer's entries: path -> "type mode linkname".
func files(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

func TestBuildSelfContained(t *testing.T) {
	f := newFixture(t)
	res, err := Build(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	// A second build, elsewhere, from copies, gives the same digest.
	o2 := f.opts
	o2.OutDir = filepath.Join(t.TempDir(), "out2")
	o2.Scratch = t.TempDir()
	res2, err := Build(o2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != res2.Digest {
		t.Fatalf("two builds: %s and %s", res.Digest, res2.Digest)
	}
	for _, p := range []string{"oci/index.json", "oci/oci-layout", "digest", "ref", "linux-amd64/kube-proxy.tar", "linux-amd64/sbom.spdx.json",
		"linux-amd64/digest", "linux-amd64/config.json", "linux-arm64/kube-proxy.tar", "linux-arm64/sbom.spdx.json"} {
		if _, err := os.Stat(filepath.Join(f.opts.OutDir, p)); err != nil {
			t.Errorf("output %s: %v", p, err)
		}
	}
	if d, _ := os.ReadFile(filepath.Join(f.opts.OutDir, "digest")); strings.TrimSpace(string(d)) != res.Digest {
		t.Errorf("digest file %q, want %s", d, res.Digest)
	}
	// The layout names one OCI index of linux/amd64 and linux/arm64, whose digest is the image's.
	lay, err := layout.ImageIndexFromPath(filepath.Join(f.opts.OutDir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := lay.IndexManifest()
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest.String() != res.Digest || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json: %+v, want one OCI index %s", tm.Manifests, res.Digest)
	}
	idx, _ := lay.ImageIndex(tm.Manifests[0].Digest)
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.String() != "linux/amd64" || im.Manifests[1].Platform.String() != "linux/arm64" {
		t.Fatalf("the index holds %+v", im.Manifests)
	}
	if len(res.Platforms) != 2 || im.Manifests[1].Digest.String() != res.Platforms[1].Digest {
		t.Fatalf("platforms %+v", res.Platforms)
	}
	img := res.Platforms[0].Image
	// The docker-load tarball holds the same image.
	tag, _ := name.NewTag("kube-proxy-overlay/kube-proxy:v1.36.3_overlay.2")
	ti, err := tarball.ImageFromPath(filepath.Join(f.opts.OutDir, "linux-amd64/kube-proxy.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := ti.ConfigName()
	rc, _ := img.ConfigName()
	if tc != rc {
		t.Errorf("tarball config %s, image config %s", tc, rc)
	}

	// The arm64 image holds the arm64 packages and binary, and the "all" package.
	arm := res.Platforms[1].Image
	acf, _ := arm.ConfigFile()
	if acf.Architecture != "arm64" || acf.OS != "linux" {
		t.Errorf("arm64 config: %s/%s", acf.OS, acf.Architecture)
	}
	al, _ := arm.Layers()
	abase, atop := files(t, al[0]), files(t, al[1])
	if abase["lib/aarch64-linux-gnu/libc.so.6"] == nil || abase["lib/x86_64-linux-gnu/libc.so.6"] != nil || abase["etc/protocols"] == nil {
		t.Error("the arm64 base layer does not hold exactly the arm64 and all packages")
	}
	if h := atop["usr/local/bin/kube-proxy"]; h == nil || h.Size != int64(len(fakeELF(elf.EM_AARCH64, "kube-proxy arm64"))) {
		t.Errorf("the arm64 image's kube-proxy: %+v", h)
	}
	if !strings.Contains(string(res.Platforms[1].SBOM), "pkg:deb/debian/fake-libc@2.36-9%2Bdeb12u14?arch=arm64") ||
		strings.Contains(string(res.Platforms[1].SBOM), "arch=amd64") {
		t.Error("the arm64 SBOM does not list exactly the arm64 packages")
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != BinaryPath || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %v cmd %v", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if !cf.Created.Time.Equal(epoch) || cf.Architecture != "amd64" || cf.OS != "linux" {
		t.Errorf("created %v platform %s/%s", cf.Created, cf.OS, cf.Architecture)
	}
	for k, v := range map[string]string{
		DebLabelPrefix + "fake-iptables":    "1:1.8.9-2",
		DebLabelPrefix + "fake-libc":        "2.36-9+deb12u14",
		"org.opencontainers.image.version":  "v1.36.3+overlay.2",
		"org.opencontainers.image.revision": "abc123",
		LabelPrefix + "debian.suite":        "bookworm",
	} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	layers, _ := img.Layers()
	if len(layers) != 2 || len(cf.History) != 2 {
		t.Fatalf("%d layers, %d history entries", len(layers), len(cf.History))
	}
	base, top := files(t, layers[0]), files(t, layers[1])
	for _, p := range []string{"usr/sbin/iptables-wrapper", "usr/share/doc/fake-iptables/copyright",
		"var/lib/dpkg/status.d/fake-libc", "etc/passwd", "etc/nsswitch.conf", "lib/x86_64-linux-gnu/libc.so.6", "etc/protocols"} {
		if base[p] == nil {
			t.Errorf("base layer lacks %s", p)
		}
	}
	for _, p := range []string{"usr/share/man/man8/iptables.8", "usr/share/doc/fake-iptables/changelog.Debian", "etc/init.d/fake"} {
		if base[p] != nil {
			t.Errorf("base layer keeps %s", p)
		}
	}
	for _, c := range WrappedCommands {
		if h := base["usr/sbin/"+c]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "iptables-wrapper" {
			t.Errorf("usr/sbin/%s: %+v", c, h)
		}
	}
	if h := base["var/run"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/run" {
		t.Errorf("var/run: %+v", h)
	}
	if h := base["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp: %+v", h)
	}
	if h := base["usr/sbin/iptables-wrapper"]; h.Mode != 0o755 {
		t.Errorf("wrapper mode %o", h.Mode)
	}
	for p, mode := range map[string]int64{"usr/local/bin/kube-proxy": 0o755, "LICENSE": 0o644,
		"LICENSES/third_party/x/LICENSE": 0o644, "LICENSES/third_party": 0o755, "usr/share/doc/kube-proxy/sbom.spdx.json": 0o644} {
		if h := top[p]; h == nil || h.Mode != mode {
			t.Errorf("kube-proxy layer %s: %+v, want mode %o", p, h, mode)
		}
	}
	if h := base["var/lib/dpkg/status.d/fake-libc"]; h.Size == 0 {
		t.Error("empty dpkg status entry")
	}
	if base["lib/aarch64-linux-gnu/libc.so.6"] != nil {
		t.Error("the amd64 base layer holds an arm64 file")
	}
	if !strings.Contains(string(res.Platforms[0].SBOM), "pkg:deb/debian/fake-iptables@1%3A1.8.9-2?arch=amd64&distro=debian-12") {
		t.Error("SBOM lacks the package URL")
	}
	// A changed arm64 binary changes the index digest and the arm64 image, not the amd64 one.
	write(t, f.opts.Binaries["arm64"], fakeELF(elf.EM_AARCH64, "another"), 0o755)
	res3, err := Build(o2)
	if err != nil {
		t.Fatal(err)
	}
	if res3.Digest == res.Digest || res3.Platforms[1].Digest == res.Platforms[1].Digest {
		t.Error("a different arm64 binary gave the same digest")
	}
	if res3.Platforms[0].Digest != res.Platforms[0].Digest {
		t.Error("a different arm64 binary changed the amd64 image")
	}
	// A binary of the wrong architecture is refused.
	o2.Binaries = map[string]string{"amd64": f.opts.Binaries["arm64"], "arm64": f.opts.Binaries["arm64"]}
	if _, err := Build(o2); err == nil || !strings.Contains(err.Error(), "linux/amd64 image needs") {
		t.Errorf("an arm64 binary for the amd64 image: %v", err)
	}
}

func TestBuildRejectsStaleOrTamperedInputs(t *testing.T) {
	f := newFixture(t)
	spec, _ := os.ReadFile(f.opts.SpecPath)
	write(t, f.opts.SpecPath, string(spec)+"root extra\n", 0o644)
	if _, err := Build(f.opts); err == nil || !strings.Contains(err.Error(), "make image-lock") {
		t.Errorf("a changed spec: %v", err)
	}
	write(t, f.opts.SpecPath, string(spec), 0o644)
	write(t, f.opts.PackagesMD, "stale\n", 0o644)
	if _, err := Build(f.opts); err == nil || !strings.Contains(err.Error(), "make image-lock") {
		t.Errorf("a stale PACKAGES.md: %v", err)
	}
	f = newFixture(t)
	lock, _ := os.ReadFile(f.opts.LockPath)
	l, _ := lockfile.Parse(strings.NewReader(string(lock)))
	deb := filepath.Join(f.opts.DebCache, l.Entries[0].DebFileName())
	os.WriteFile(deb, []byte("not the recorded file"), 0o644)
	if _, err := Build(f.opts); err == nil || !strings.Contains(err.Error(), "differs from the recorded") {
		t.Errorf("a tampered .deb: %v", err)
	}
}

// TestBuildOnBase covers BASE=: the kube-proxy layer goes on top of an image from a registry
// (here one that go-containerregistry runs in-process on the loopback).
func TestBuildOnBase(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/distroless-iptables:v0"

	bl := layer.New()
	bl.AddFile("usr/sbin/iptables-wrapper", []byte("base wrapper"), 0o755)
	blob, err := bl.Build(epoch)
	if err != nil {
		t.Fatal(err)
	}
	lay, _ := blobLayer(blob, "application/vnd.docker.image.rootfs.diff.tar.gzip")
	baseImg, _ := mutate.AppendLayers(empty.Image, lay)
	cf, _ := baseImg.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Env = []string{"PATH=/usr/sbin:/usr/bin", "FROM_BASE=1"}
	cf.Config.Entrypoint = []string{"/go-runner"}
	cf.Config.Labels = map[string]string{"base.label": "kept"}
	baseImg, _ = mutate.ConfigFile(baseImg, cf)
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, baseImg); err != nil {
		t.Fatal(err)
	}
	baseDigest, _ := baseImg.Digest()

	o := f.opts
	o.Base = ref
	o.Arches = []string{"amd64"}
	res, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := res.Platforms[0].Image.Layers()
	if len(layers) != 2 {
		t.Fatalf("%d layers, want the base's 1 + kube-proxy's", len(layers))
	}
	if d, _ := layers[0].Digest(); d.String() == "" {
		t.Error("no base layer")
	}
	top := files(t, layers[1])
	if top["usr/local/bin/kube-proxy"] == nil || top["usr/sbin/iptables-wrapper"] != nil {
		t.Error("the kube-proxy layer should hold kube-proxy and nothing of the Debian base")
	}
	got, _ := res.Platforms[0].Image.ConfigFile()
	if strings.Join(got.Config.Entrypoint, " ") != BinaryPath {
		t.Errorf("entrypoint %v", got.Config.Entrypoint)
	}
	if got.Config.Labels["base.label"] != "kept" || got.Config.Labels["org.opencontainers.image.base.digest"] != baseDigest.String() ||
		got.Config.Labels["org.opencontainers.image.base.name"] != ref {
		t.Errorf("labels %v", got.Config.Labels)
	}
	if strings.Join(got.Config.Env, " ") != "PATH=/usr/sbin:/usr/bin FROM_BASE=1" {
		t.Errorf("env %v", got.Config.Env)
	}
	for k := range got.Config.Labels {
		if strings.HasPrefix(k, DebLabelPrefix) {
			t.Errorf("a BASE build records Debian label %s", k)
		}
	}
	if mt, _ := layers[1].MediaType(); mt != "application/vnd.docker.image.rootfs.diff.tar.gzip" {
		t.Errorf("on a Docker base, the new layer is %s", mt)
	}
	if !strings.Contains(string(res.Platforms[0].SBOM), baseDigest.String()) {
		t.Error("the SBOM does not name the base image digest")
	}
}
