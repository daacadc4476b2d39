// Package imagebuild assembles the kube-proxy image with go-containerregistry, without a
// container engine: a base layer made from the recorded Debian packages (or a base image from a
// registry), and a kube-proxy layer with the binary, upstream's licenses and the SBOM.
package imagebuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	SpecPath    string // images/packages.in
	LockPath    string // images/packages.lock
	PackagesMD  string // images/PACKAGES.md, which must match the lock
	DebCache    string // directory of verified .debs
	Wrapper     string // images/iptables-wrapper
	Binary      string // the kube-proxy binary
	License     string // upstream's LICENSE
	LicensesDir string // upstream's LICENSES/
	Version     string // kube-proxy's version, e.g. v1.36.3+overlay.2
	Upstream    string // e.g. v1.36.3
	Commit      string // this repo's commit, for the revision label (may be empty)
	Epoch       time.Time
	ImageName   string // e.g. kube-proxy-overlay/kube-proxy
	Tag         string // e.g. v1.36.3_overlay.2
	Base        string // a registry reference; empty for the self-contained image
	Arch        string // the platform, for Base; the lock's otherwise
	OutDir      string // receives oci/, kube-proxy.tar, sbom.spdx.json, digest
	Scratch     string // a private scratch directory

	// RemoteOptions are passed to remote.Image for Base (tests point it at a local registry).
	RemoteOptions []remote.Option
}

// Result is what Build made.
type Result struct {
	Digest string // sha256:HEX of the image manifest
	Image  v1.Image
	SBOM   []byte
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
	if lock.Suite != spec.Suite || lock.Arch != spec.Arch {
		return nil, nil, fmt.Errorf("%s is for %s/%s, %s asks for %s/%s: run `make image-lock`", lockPath, lock.Suite, lock.Arch, specPath, spec.Suite, spec.Arch)
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

// Labels returns the image's labels.
func Labels(o Options, lock *lockfile.Lock, lockSHA string, baseDigest string) map[string]string {
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
	for _, e := range lock.Entries {
		m[DebLabelPrefix+e.Name] = e.Version
	}
	return m
}

// kubeProxyLayer holds the binary, upstream's LICENSE and LICENSES/, and the SBOM.
func kubeProxyLayer(o Options, sbomJSON []byte) (*layer.Layer, error) {
	l := layer.New()
	if err := l.AddFileFrom(BinaryPath, o.Binary, 0o755); err != nil {
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

// Build makes the image and writes it to o.OutDir.
func Build(o Options) (*Result, error) {
	_, lock, err := CheckLock(o.SpecPath, o.LockPath, o.PackagesMD)
	if err != nil {
		return nil, err
	}
	lockSHA, err := sha256File(o.LockPath)
	if err != nil {
		return nil, err
	}
	binSHA, err := sha256File(o.Binary)
	if err != nil {
		return nil, err
	}
	arch := o.Arch
	if arch == "" {
		arch = lock.Arch
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
		for _, e := range lock.Entries {
			sb.Debs = append(sb.Debs, sbom.Deb{Name: e.Name, Version: e.Version, Arch: e.Arch, SHA256: e.SHA256})
		}
		bl, err := BaseLayer(lock, o.DebCache, o.Wrapper, o.Scratch)
		if err != nil {
			return nil, err
		}
		blob, err := bl.Build(o.Epoch)
		if err != nil {
			return nil, err
		}
		lay, err := blobLayer(blob, types.OCILayer)
		if err != nil {
			return nil, err
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
			return nil, err
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		base, err = mutate.Append(img, mutate.Addendum{
			Layer:   lay,
			History: history(fmt.Sprintf("Debian %s packages of images/packages.lock (sha256:%s), %d packages; iptables wrapper", lock.Suite, lockSHA, len(lock.Entries))),
		})
		if err != nil {
			return nil, err
		}
	} else {
		ref, err := name.ParseReference(o.Base)
		if err != nil {
			return nil, fmt.Errorf("BASE=%s: %w", o.Base, err)
		}
		opts := append([]remote.Option{
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
			remote.WithAuthFromKeychain(authn.DefaultKeychain),
		}, o.RemoteOptions...)
		base, err = remote.Image(ref, opts...)
		if err != nil {
			return nil, fmt.Errorf("fetching the base image %s: %w", o.Base, err)
		}
		d, err := base.Digest()
		if err != nil {
			return nil, err
		}
		baseDigest = d.String()
		sb.BaseImage, sb.BaseImageDigest = o.Base, baseDigest
		if mt, err := base.MediaType(); err == nil && mt == types.DockerManifestSchema2 {
			layerType = types.DockerLayer
		}
	}

	sbomJSON, err := sbom.Build(sb)
	if err != nil {
		return nil, err
	}
	kl, err := kubeProxyLayer(o, sbomJSON)
	if err != nil {
		return nil, err
	}
	kblob, err := kl.Build(o.Epoch)
	if err != nil {
		return nil, err
	}
	klay, err := blobLayer(kblob, layerType)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   klay,
		History: history(fmt.Sprintf("%s %s (sha256:%s), upstream LICENSE and LICENSES/, SBOM", BinaryPath, o.Version, binSHA)),
	})
	if err != nil {
		return nil, err
	}

	// The final configuration: upstream's binary path as the entrypoint, the labels, fixed times.
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	cfg.Created = v1.Time{Time: o.Epoch}
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Cmd = nil
	if !hasPath(cfg.Config.Env) {
		cfg.Config.Env = append(cfg.Config.Env, "PATH="+DefaultPath)
	}
	labels := Labels(o, lock, lockSHA, baseDigest)
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	for k, v := range labels {
		cfg.Config.Labels[k] = v
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}

	dig, err := img.Digest()
	if err != nil {
		return nil, err
	}
	if err := writeOutputs(o, img, sbomJSON, dig.String()); err != nil {
		return nil, err
	}
	return &Result{Digest: dig.String(), Image: img, SBOM: sbomJSON}, nil
}

func hasPath(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return true
		}
	}
	return false
}

// writeOutputs writes the OCI layout, the docker-load tarball, the SBOM and the digest into a
// fresh directory, then moves it into place.
func writeOutputs(o Options, img v1.Image, sbomJSON []byte, digest string) error {
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
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Tag,
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return err
	}
	if err := tarball.WriteToFile(filepath.Join(tmp, "kube-proxy.tar"), tag, img); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "sbom.spdx.json"), sbomJSON, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "digest"), []byte(digest+"\n"), 0o644); err != nil {
		return err
	}
	cf, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, cf, "", "  "); err != nil {
		return err
	}
	pretty.WriteByte('\n')
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), pretty.Bytes(), 0o644); err != nil {
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
