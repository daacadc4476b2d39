package deploytest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "../../.."))
}

// upstreamTag reads the pinned k8s.io/kubernetes version from go.mod.
func upstreamTag(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod pins no k8s.io/kubernetes")
	}
	return string(m[1])
}

// runCheck runs build/image/_manifestcheck inside the patched tree on dir.
func runCheck(t *testing.T, dir string) (string, string, error) {
	t.Helper()
	root := repoRoot(t)
	tree := filepath.Join(root, "_output/src", upstreamTag(t, root), "patched")
	if _, err := os.Stat(filepath.Join(tree, ".upstream-tag")); err != nil {
		t.Skipf("no patched tree at %s (make tree builds it; make test does)", tree)
	}
	out := t.TempDir()
	openapi := filepath.Join(root, "_output/src", upstreamTag(t, root), "pristine/api/openapi-spec/swagger.json")
	// Same flags as build/build.sh, so the build cache of `make build` serves (and go run's
	// cache of the linked checker).
	c := exec.Command("go", "run", "-trimpath", filepath.Join(root, "build/image/_manifestcheck/main.go"), "-dir", dir, "-out", out,
		"-openapi", openapi, "-digest", imageDigest(t, root))
	c.Dir = tree
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	b, err := c.CombinedOutput()
	return string(b), out, err
}

// imageDigest is the digest the operator puts in place of the manifests' placeholder: the one
// `make image` last printed (_output/image/digest) when there is one, else a digest of the same
// form (the SHA-256 of images/packages.lock) so that the pinning check still runs.
func imageDigest(t *testing.T, root string) string {
	if b, err := os.ReadFile(filepath.Join(root, "_output/image/digest")); err == nil {
		return strings.TrimSpace(string(b))
	}
	b, err := os.ReadFile(filepath.Join(root, "images/packages.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

func TestManifestsAgainstTheAPI(t *testing.T) {
	root := repoRoot(t)
	report, configs, err := runCheck(t, filepath.Join(root, "images/deploy"))
	t.Log("\n" + report)
	if err != nil {
		t.Fatalf("manifest check failed: %v", err)
	}
	for _, want := range []string{"ConfigMap kube-proxy-config: config is a valid KubeProxyConfiguration",
		"kustomize/daemonset-patch.yaml#0 DaemonSet kube-proxy", "kustomize/kustomization.yaml#0 Kustomization",
		"eks/daemonset-image-patch.yaml#0 DaemonSet kube-proxy (OpenAPI schema and strict decoding)",
		"eks/daemonset-image-patch.yaml#0 container kube-proxy: image pinned by digest sha256:",
		"kustomize/daemonset-patch.yaml#0 container kube-proxy: image kube-proxy-overlay/kube-proxy pinned by digest sha256:"} {
		if !strings.Contains(report, want) {
			t.Errorf("the check did not report %q", want)
		}
	}

	// The configuration must load and validate in the patched binary, and, for the rollback,
	// in upstream's binary too.
	found, _ := filepath.Glob(filepath.Join(configs, "*.yaml"))
	if len(found) == 0 {
		t.Fatal("no KubeProxyConfiguration found in the manifests")
	}
	tag := upstreamTag(t, root)
	for _, bin := range []struct{ name, path string }{
		{"patched", filepath.Join(root, "_output/bin/kube-proxy")},
		{"upstream", filepath.Join(root, "_output/upstream", tag, "bin/kube-proxy")},
	} {
		t.Run(bin.name, func(t *testing.T) {
			if _, err := os.Stat(bin.path); err != nil {
				t.Skipf("%s is not built (make build / make build-upstream)", bin.path)
			}
			for _, cfg := range found {
				written := filepath.Join(t.TempDir(), "written.yaml")
				out, err := exec.Command(bin.path, "--config="+cfg, "--write-config-to="+written).CombinedOutput()
				if err != nil {
					t.Errorf("%s --config=%s: %v\n%s", bin.name, filepath.Base(cfg), err, out)
					continue
				}
				w, _ := os.ReadFile(written)
				if !strings.Contains(string(w), "mode: nftables") {
					t.Errorf("%s did not keep nftables mode:\n%s", bin.name, w)
				}
				if bin.name == "patched" && !strings.Contains(string(w), "syncSplay: 1h0m0s") {
					t.Errorf("the patched binary did not read ruleSync:\n%s", w)
				}
			}
		})
	}
}

// TestManifestCheckCatchesMistakes makes sure the check is not vacuous: a misspelled field in a
// DaemonSet, in the ruleSync section, and an out-of-range value each fail it.
func TestManifestCheckCatchesMistakes(t *testing.T) {
	root := repoRoot(t)
	good, err := os.ReadFile(filepath.Join(root, "images/deploy/kube-proxy-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := os.ReadFile(filepath.Join(root, "images/deploy/kustomize/daemonset-patch.yaml"))
	eks, _ := os.ReadFile(filepath.Join(root, "images/deploy/eks/daemonset-image-patch.yaml"))
	cases := map[string][]byte{
		"ds-typo.yaml":       []byte(strings.Replace(string(patch), "updateStrategy:", "updateStrategey:", 1)),
		"rulesync-typo.yaml": []byte(strings.Replace(string(good), "syncSplay: 1h", "syncSplai: 1h", 1)),
		"jitter-range.yaml":  []byte(strings.Replace(string(good), "fullSyncJitterPercent: 0\n", "fullSyncJitterPercent: 200\n", 1)),
		"config-typo.yaml":   []byte(strings.Replace(string(good), "metricsBindAddress:", "metricBindAddress:", 1)),
		"ds-type.yaml":       []byte(strings.Replace(string(patch), "maxUnavailable: 10%", "maxUnavailable: [10]", 1)),
		"ds-tag.yaml":        []byte(strings.Replace(string(eks), "@sha256:IMAGE_DIGEST_FROM_make_image", ":v1.36.3", 1)),
		"ds-short-digest.yaml": []byte(string(eks) +
			"      - name: sidecar\n        image: busybox@sha256:1234\n"),
	}
	// One run over all the broken files (each check reports every file): every file must get a
	// FAIL line of its own, with the reason where the case names one.
	dir := t.TempDir()
	for name, body := range cases {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	report, _, err := runCheck(t, dir)
	if err == nil {
		t.Errorf("broken manifests passed:\n%s", report)
	}
	reasons := map[string]string{"ds-type.yaml": "against the OpenAPI schema", "ds-typo.yaml": "against the OpenAPI schema",
		"ds-tag.yaml": "is not pinned by a digest", "ds-short-digest.yaml": "is not pinned by a digest"}
	for name := range cases {
		found := false
		for _, line := range strings.Split(report, "\n") {
			if strings.HasPrefix(line, "FAIL "+name+"#") && strings.Contains(line, reasons[name]) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no FAIL line saying %q:\n%s", name, reasons[name], report)
		}
	}
}
