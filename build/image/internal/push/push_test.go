package push

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ociImage is a small OCI image (OCI manifest, config and layer media types) for arch.
func ociImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	l, err := random.Layer(2048, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: arch, RootFS: v1.RootFS{Type: "layers"}})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, l); err != nil {
		t.Fatal(err)
	}
	return img
}

// multiArchLayout writes an OCI layout whose index.json names one OCI image index of a
// linux/amd64 and a linux/arm64 image, as `make image` writes it.
func multiArchLayout(t *testing.T) (string, v1.ImageIndex) {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        ociImage(t, arch),
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	dir := filepath.Join(t.TempDir(), "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
		t.Fatal(err)
	}
	return dir, idx
}

func startRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPushKeepsTheDigest pushes a multi-arch layout to a registry on loopback under two tags,
// pulls the index and both images back by digest and compares them with the layout, byte for
// byte.
func TestPushKeepsTheDigest(t *testing.T) {
	host := startRegistry(t)
	dir, idx := multiArchLayout(t)
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rootDesc, raw, err := Root(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rootDesc.Digest != want || !rootDesc.MediaType.IsIndex() {
		t.Fatalf("the layout names %s (%s), want the index %s", rootDesc.Digest, rootDesc.MediaType, want)
	}

	for _, tag := range []string{"v1", "v1-again"} {
		r := ref(t, host+"/kube-proxy-overlay/kube-proxy:"+tag)
		res, err := Push(dir, r, want.String())
		if err != nil {
			t.Fatalf("push %s: %v", tag, err)
		}
		if res.Digest != want {
			t.Fatalf("push %s: the registry reports %s, want %s", tag, res.Digest, want)
		}
		// Pull back by digest, independently of Push's own check.
		pulled, err := remote.Index(res.Pinned)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := pulled.RawManifest()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pr, raw) {
			t.Fatalf("the pulled index differs from the layout's:\n%s\n%s", pr, raw)
		}
		im, err := pulled.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 {
			t.Fatalf("the pulled index holds %d manifests, want 2", len(im.Manifests))
		}
		p, _ := layout.FromPath(dir)
		for _, m := range im.Manifests {
			img, err := remote.Image(r.Context().Digest(m.Digest.String()))
			if err != nil {
				t.Fatalf("%s %s: %v", m.Platform, m.Digest, err)
			}
			got, _ := img.RawManifest()
			local, err := p.Bytes(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, local) {
				t.Errorf("%s: the pulled manifest differs from the layout's", m.Platform)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != m.Platform.Architecture {
				t.Errorf("%s: the pulled config says %s", m.Platform, cf.Architecture)
			}
			ls, _ := img.Layers()
			for _, l := range ls {
				ld, _ := l.Digest()
				rc, err := l.Compressed()
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				lb, err := p.Bytes(ld)
				if err != nil || !bytes.Equal(b, lb) {
					t.Errorf("%s: layer %s differs from the layout's (%v)", m.Platform, ld, err)
				}
			}
		}
		// The tag itself resolves to the same digest.
		head, err := remote.Head(r)
		if err != nil || head.Digest != want {
			t.Fatalf("tag %s resolves to %v (%v), want %s", tag, head, err, want)
		}
	}
}

// TestPushRefusesAStaleDigest: when the digest `make image` printed is not the layout's, the
// push fails before anything is sent.
func TestPushRefusesAStaleDigest(t *testing.T) {
	host := startRegistry(t)
	dir, _ := multiArchLayout(t)
	r := ref(t, host+"/kp:stale")
	_, err := Push(dir, r, "sha256:"+strings.Repeat("0", 64))
	if err == nil || !strings.Contains(err.Error(), "make image") {
		t.Fatalf("want a stale-digest error, got %v", err)
	}
	if _, err := remote.Head(r); err == nil {
		t.Fatal("the stale image was pushed anyway")
	}
}

// TestPushSingleManifest: a layout that names one image manifest (BASE= builds of one
// platform) is pushed with the same guarantees.
func TestPushSingleManifest(t *testing.T) {
	host := startRegistry(t)
	img := ociImage(t, "amd64")
	dir := filepath.Join(t.TempDir(), "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	res, err := Push(dir, ref(t, host+"/kp:one"), want.String())
	if err != nil || res.Digest != want {
		t.Fatalf("push: %v, digest %v, want %s", err, res, want)
	}
}

// TestPushErrors: a directory that is no layout, or one that names two images, is refused with
// a clear error.
func TestPushErrors(t *testing.T) {
	host := startRegistry(t)
	if _, err := Push(t.TempDir(), ref(t, host+"/kp:x"), ""); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("an empty directory: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	p, _ := layout.Write(dir, empty.Index)
	p.AppendImage(ociImage(t, "amd64"))
	p.AppendImage(ociImage(t, "arm64"))
	if _, err := Push(dir, ref(t, host+"/kp:x"), ""); err == nil || !strings.Contains(err.Error(), "names 2 images") {
		t.Errorf("a layout of two images: %v", err)
	}
}

// TestDockerTarballPushChangesTheDigest records why the project pushes the OCI layout and not
// the docker-load tarball: the tarball holds no manifest, so a push of it (what `crane push
// kube-proxy.tar` does: tarball.ImageFromPath, then remote.Write) sends a newly made Docker v2
// manifest, whose digest is not the OCI manifest's that `make image` printed.
func TestDockerTarballPushChangesTheDigest(t *testing.T) {
	host := startRegistry(t)
	img := ociImage(t, "amd64")
	want, _ := img.Digest()
	tag, _ := name.NewTag("kube-proxy-overlay/kube-proxy:v1")
	tb := filepath.Join(t.TempDir(), "kube-proxy.tar")
	if err := tarball.WriteToFile(tb, tag, img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := ref(t, host+"/kp:from-tarball")
	if err := remote.Write(r, loaded); err != nil {
		t.Fatal(err)
	}
	head, err := remote.Head(r)
	if err != nil {
		t.Fatal(err)
	}
	if head.Digest == want {
		t.Fatalf("the tarball push kept the digest %s; the docs' warning against it would be wrong", want)
	}
	if head.MediaType != types.DockerManifestSchema2 {
		t.Errorf("the tarball push sent %s, expected a Docker v2 manifest", head.MediaType)
	}
	t.Logf("OCI manifest %s; pushed from the docker tarball: %s (%s)", want, head.Digest, head.MediaType)
}

// TestPushTheBuiltImage pushes the layout that `make image` last wrote, when there is one, and
// checks the registry's digest against _output/image/digest.
func TestPushTheBuiltImage(t *testing.T) {
	out, _ := filepath.Abs("../../../../_output/image")
	want, err := os.ReadFile(filepath.Join(out, "digest"))
	if err != nil {
		t.Skip("no image built (make image writes _output/image)")
	}
	host := startRegistry(t)
	res, err := Push(filepath.Join(out, "oci"), ref(t, host+"/kube-proxy-overlay/kube-proxy:built"), strings.TrimSpace(string(want)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s", res.Pinned)
}
