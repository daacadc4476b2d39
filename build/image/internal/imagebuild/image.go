// Package imagebuild assembles the kube-proxy image with go-containerregistry, without a
// container engine: one image per architecture (a base layer made from that architecture's
// recorded Debian packages, or a base image from a registry, and a kube-proxy layer with the
// binary, upstream's licenses and the SBOM), gathered in one OCI image index.
package imagebuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/layer"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/sbom"
)

const (
	// BinaryPath is where the image holds kube-proxy, as upstream's image does.
	BinaryPath = "/usr/local/bin/kube-proxy"
	// SBOMPath is where the image holds its SBOM.
	SBOMPath = "/usr/share/doc/kube-proxy/sbom.spdx.json"
	// DefaultPath is the image's PATH.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// LabelPrefix starts this project's own labels.
	LabelPrefix = "io.kube-proxy-overlay."
	// DebLabelPrefix starts the one label per Debian package: its value is the version.
	DebLabelPrefix = LabelPrefix + "deb."
)

// distros maps Debian suites to the purl distro qualifier.
var distros = map[string]string{"bullseye": "debian-11", "bookworm": "debian-12", "trixie": "debian-13"}

// Options says what to build and from what.
type Options struct {
	SpecPath    string            // images/packages.in
	LockPath    string            // images/packages.lock
	PackagesMD  string            // images/PACKAGES.md, which must match the lock
	DebCache    string            // directory of verified .debs
	Wrapper     string            // images/iptables-wrapper
	Binaries    map[string]string // architecture -> the kube-proxy binary built for it
	License     string            // upstream's LICENSE
	LicensesDir string            // upstream's LICENSES/
	Version     string            // kube-proxy's version, e.g. v1.36.3+overlay.2
	Upstream    string            // e.g. v1.36.3
	Commit      string            // this repo's commit, for the revision label (may be empty)
	Epoch       time.Time
	ImageName   string   // e.g. kube-proxy-overlay/kube-proxy
	Tag         string   // e.g. v1.36.3_overlay.2
	Base        string   // a registry reference; empty for the self-contained image
	Arches      []string // the platforms (linux/ARCH), in index order; default: the lock's
	OutDir      string   // receives oci/, digest, ref and linux-ARCH/ per platform
	Scratch     string   // a private scratch directory

	// RemoteOptions are passed to remote.Image for Base (tests point it at a local registry).
	RemoteOptions []remote.Option
}

// Platform is one architecture's image.
type Platform struct {
	Arch   string
	Digest string // sha256:HEX of its image manifest
	Image  v1.Image
	SBOM   []byte
}

// Result is what Build made.
type Result struct {
	Digest    string // sha256:HEX of the image index: the image digest
	Index     v1.ImageIndex
	Platforms []Platform // in index order
}

// CheckLock reads the spec, the lock and PACKAGES.md and checks that they agree: the lock was
// made from this spec, and PACKAGES.md is the lock's table.
func CheckLock(specPath, lockPath, mdPath string) (*lockfile.Spec, *lockfile.Lock, error) {
	specBytes, err := os.ReadFile(specPath)
	if err != nil {
		return nil, nil, err
	}
	spec, err := lockfile.ParseSpec(bytes.NewReader(specBytes))
	if err != nil {
		return nil, nil, err
	}
	lb, err := os.ReadFile(lockPath)
	if err != nil {
		return nil, nil, err
	}
	lock, err := lockfile.Parse(bytes.NewReader(lb))
	if err != nil {
		return nil, nil, err
	}
	if lock.Input != lockfile.SpecDigest(specBytes) {
		return nil, nil, fmt.Errorf("%s changed since %s was generated: run `make image-lock`", specPath, lockPath)
	}
	if lock.Suite != spec.Suite || strings.Join(lock.Arches, " ") != strings.Join(spec.Arches, " ") {
		return nil, nil, fmt.Errorf("%s is for %s/%s, %s asks for %s/%s: run `make image-lock`", lockPath, lock.Suite, strings.Join(lock.Arches, ","), specPath, spec.Suite, strings.Join(spec.Arches, ","))
	}
	if mdPath != "" {
		md, err := os.ReadFile(mdPath)
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(md, lockfile.Markdown(lock, spec)) {
			return nil, nil, fmt.Errorf("%s does not match %s: run `make image-lock`", mdPath, lockPath)
		}
	}
	return spec, lock, nil
}

// Labels returns the labels of arch's image.
func Labels(o Options, arch string, lock *lockfile.Lock, lockSHA string, baseDigest string) map[string]string {
	m := map[string]string{
		"org.opencontainers.image.title":       "kube-proxy",
		"org.opencontainers.image.description": fmt.Sprintf("kube-proxy %s with the kube-proxy-overlay patches", o.Upstream),
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     o.Epoch.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		LabelPrefix + "upstream":               o.Upstream,
		LabelPrefix + "sbom":                   SBOMPath,
	}
	if o.Commit != "" {
		m["org.opencontainers.image.revision"] = o.Commit
	}
	if o.Base != "" {
		m["org.opencontainers.image.base.name"] = o.Base
		m["org.opencontainers.image.base.digest"] = baseDigest
		return m
	}
	m[LabelPrefix+"debian.suite"] = lock.Suite
	m[LabelPrefix+"debian.lock"] = "sha256:" + lockSHA
	for _, e := range lock.ForArch(arch) {
		m[DebLabelPrefix+e.Name] = e.Version
	}
	return m
}

// kubeProxyLayer holds the binary, upstream's LICENSE and LICENSES/, and the SBOM.
func kubeProxyLayer(o Options, binary string, sbomJSON []byte) (*layer.Layer, error) {
	l := layer.New()
	if err := l.AddFileFrom(BinaryPath, binary, 0o755); err != nil {
		return nil, err
	}
	if err := l.AddFileFrom("LICENSE", o.License, 0o644); err != nil {
		return nil, err
	}
	if err := l.AddTree(o.LicensesDir, "LICENSES", nil); err != nil {
		return nil, err
	}
	l.SetModes("LICENSES", 0o755, 0o644)
	if err := l.AddFile(SBOMPath, sbomJSON, 0o644); err != nil {
		return nil, err
	}
	return l, nil
}

func blobLayer(b *layer.Blob, mt types.MediaType) (v1.Layer, error) {
	data := b.Compressed
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(mt))
}

// Build makes one image per architecture, gathers them in an OCI image index and writes
// everything to o.OutDir. The index digest is the image digest.
func Build(o Options) (*Result, error) {
	_, lock, err := CheckLock(o.SpecPath, o.LockPath, o.PackagesMD)
	if err != nil {
		return nil, err
	}
	lockSHA, err := sha256File(o.LockPath)
	if err != nil {
		return nil, err
	}
	arches := o.Arches
	if len(arches) == 0 {
		arches = lock.Arches
	}
	res := &Result{}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		if o.Base == "" && !slices.Contains(lock.Arches, arch) {
			return nil, fmt.Errorf("%s records no packages for %s (it has %s)", o.LockPath, arch, strings.Join(lock.Arches, ", "))
		}
		bin := o.Binaries[arch]
		if bin == "" {
			return nil, fmt.Errorf("no kube-proxy binary for %s", arch)
		}
		img, sbomJSON, err := buildOne(o, arch, bin, lock, lockSHA)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", arch, err)
		}
		dig, err := img.Digest()
		if err != nil {
			return nil, err
		}
		res.Platforms = append(res.Platforms, Platform{Arch: arch, Digest: dig.String(), Image: img, SBOM: sbomJSON})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	dig, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	res.Digest, res.Index = dig.String(), idx
	if err := writeOutputs(o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// buildOne makes arch's image from binary: the base (arch's recorded packages, or o.Base's
// image for linux/arch) and the kube-proxy layer. It returns the image and its SBOM.
func buildOne(o Options, arch, binary string, lock *lockfile.Lock, lockSHA string) (v1.Image, []byte, error) {
	binSHA, err := sha256File(binary)
	if err != nil {
		return nil, nil, err
	}
	if err := checkELFArch(binary, arch); err != nil {
		return nil, nil, err
	}
	var base v1.Image
	var baseDigest string
	layerType := types.OCILayer
	history := func(by string) v1.History {
		return v1.History{Created: v1.Time{Time: o.Epoch}, CreatedBy: by, Author: "kube-proxy-overlay"}
	}
	sb := sbom.Input{
		ImageName:        o.ImageName,
		Version:          o.Version,
		Upstream:         o.Upstream,
		BinarySHA256:     binSHA,
		Created:          o.Epoch,
		ToolName:         "kube-proxy-overlay build/image/cmd/kpimage",
		NamespacePrefix:  "https://kube-proxy-overlay.invalid/spdx",
		BinaryPathInside: BinaryPath,
	}

	if o.Base == "" {
		sb.Distro = distros[lock.Suite]
		for _, e := range lock.ForArch(arch) {
			sb.Debs = append(sb.Debs, sbom.Deb{Name: e.Name, Version: e.Version, Arch: e.Arch, SHA256: e.SHA256})
		}
		bl, err := BaseLayer(lock.ForArch(arch), o.DebCache, o.Wrapper, filepath.Join(o.Scratch, arch))
		if err != nil {
			return nil, nil, err
		}
		blob, err := bl.Build(o.Epoch)
		if err != nil {
			return nil, nil, err
		}
		lay, err := blobLayer(blob, types.OCILayer)
		if err != nil {
			return nil, nil, err
		}
		cfg := &v1.ConfigFile{
			Architecture: arch,
			OS:           "linux",
			Created:      v1.Time{Time: o.Epoch},
			RootFS:       v1.RootFS{Type: "layers"},
			Config:       v1.Config{Env: []string{"PATH=" + DefaultPath}},
		}
		img, err := mutate.ConfigFile(empty.Image, cfg)
		if err != nil {
			return nil, nil, err
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		base, err = mutate.Append(img, mutate.Addendum{
			Layer:   lay,
			History: history(fmt.Sprintf("Debian %s packages of images/packages.lock (sha256:%s), %d packages; iptables wrapper", lock.Suite, lockSHA, len(lock.ForArch(arch)))),
		})
		if err != nil {
			return nil, nil, err
		}
	} else {
		ref, err := name.ParseReference(o.Base)
		if err != nil {
			return nil, nil, fmt.Errorf("BASE=%s: %w", o.Base, err)
		}
		opts := append([]remote.Option{
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
			remote.WithAuthFromKeychain(authn.DefaultKeychain),
		}, o.RemoteOptions...)
		base, err = remote.Image(ref, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("fetching the base image %s: %w", o.Base, err)
		}
		d, err := base.Digest()
		if err != nil {
			return nil, nil, err
		}
		baseDigest = d.String()
		sb.BaseImage, sb.BaseImageDigest = o.Base, baseDigest
		if mt, err := base.MediaType(); err == nil && mt == types.DockerManifestSchema2 {
			layerType = types.DockerLayer
		}
	}

	sbomJSON, err := sbom.Build(sb)
	if err != nil {
		return nil, nil, err
	}
	kl, err := kubeProxyLayer(o, binary, sbomJSON)
	if err != nil {
		return nil, nil, err
	}
	kblob, err := kl.Build(o.Epoch)
	if err != nil {
		return nil, nil, err
	}
	klay, err := blobLayer(kblob, layerType)
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   klay,
		History: history(fmt.Sprintf("%s %s (sha256:%s), upstream LICENSE and LICENSES/, SBOM", BinaryPath, o.Version, binSHA)),
	})
	if err != nil {
		return nil, nil, err
	}

	// The final configuration: upstream's binary path as the entrypoint, the labels, fixed times.
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg := cf.DeepCopy()
	cfg.Created = v1.Time{Time: o.Epoch}
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Cmd = nil
	if !hasPath(cfg.Config.Env) {
		cfg.Config.Env = append(cfg.Config.Env, "PATH="+DefaultPath)
	}
	labels := Labels(o, arch, lock, lockSHA, baseDigest)
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	for k, v := range labels {
		cfg.Config.Labels[k] = v
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, nil, err
	}

	return img, sbomJSON, nil
}

func hasPath(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return true
		}
	}
	return false
}

// writeOutputs writes, into a fresh directory that then replaces o.OutDir: the OCI layout of
// the index (oci/), the index digest (digest), the name:tag (ref), and per platform, under
// linux-ARCH/, its docker-load tarball (kube-proxy.tar), SBOM, pretty configuration and digest.
func writeOutputs(o Options, res *Result) error {
	tmp := o.OutDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	tag, err := name.NewTag(o.ImageName + ":" + o.Tag)
	if err != nil {
		return fmt.Errorf("image name %s:%s: %w", o.ImageName, o.Tag, err)
	}
	p, err := layout.Write(filepath.Join(tmp, "oci"), empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(res.Index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Tag,
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return err
	}
	for _, pl := range res.Platforms {
		dir := filepath.Join(tmp, "linux-"+pl.Arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(filepath.Join(dir, "kube-proxy.tar"), tag, pl.Image); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "sbom.spdx.json"), pl.SBOM, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "digest"), []byte(pl.Digest+"\n"), 0o644); err != nil {
			return err
		}
		cf, err := pl.Image.RawConfigFile()
		if err != nil {
			return err
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, cf, "", "  "); err != nil {
			return err
		}
		pretty.WriteByte('\n')
		if err := os.WriteFile(filepath.Join(dir, "config.json"), pretty.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "digest"), []byte(res.Digest+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "ref"), []byte(tag.Name()+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(o.OutDir); err != nil {
		return err
	}
	return os.Rename(tmp, o.OutDir)
}

// SortedLabelKeys lists label keys in order, for printing.
func SortedLabelKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
