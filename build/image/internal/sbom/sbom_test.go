package sbom

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func input() Input {
	return Input{
		ImageName:        "kube-proxy-overlay/kube-proxy",
		Version:          "v1.36.3+overlay.2",
		Upstream:         "v1.36.3",
		BinarySHA256:     strings.Repeat("ab", 32),
		Created:          time.Unix(1784743658, 0),
		Distro:           "debian-12",
		ToolName:         "test",
		NamespacePrefix:  "https://example.invalid/spdx",
		BinaryPathInside: "/usr/local/bin/kube-proxy",
		Debs: []Deb{
			{"conntrack", "1:1.4.7-1+b2", "amd64", strings.Repeat("01", 32)},
			{"libc6", "2.36-9+deb12u14", "amd64", strings.Repeat("02", 32)},
		},
	}
}

func TestBuild(t *testing.T) {
	out, err := Build(input())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if doc["spdxVersion"] != "SPDX-2.3" || doc["dataLicense"] != "CC0-1.0" || doc["SPDXID"] != "SPDXRef-DOCUMENT" {
		t.Errorf("document header: %v", doc)
	}
	if ci := doc["creationInfo"].(map[string]any); ci["created"] != "2026-07-22T18:07:38Z" {
		t.Errorf("created = %v", ci["created"])
	}
	pkgs := doc["packages"].([]any)
	if len(pkgs) != 4 {
		t.Fatalf("%d packages, want 4 (image, kube-proxy, 2 debs)", len(pkgs))
	}
	ids := map[string]bool{}
	for _, p := range pkgs {
		ids[p.(map[string]any)["SPDXID"].(string)] = true
	}
	kp := pkgs[1].(map[string]any)
	if kp["name"] != "kube-proxy" || kp["versionInfo"] != "v1.36.3+overlay.2" ||
		kp["checksums"].([]any)[0].(map[string]any)["checksumValue"] != strings.Repeat("ab", 32) {
		t.Errorf("kube-proxy package: %v", kp)
	}
	ct := pkgs[2].(map[string]any)
	purl := ct["externalRefs"].([]any)[0].(map[string]any)["referenceLocator"]
	if purl != "pkg:deb/debian/conntrack@1%3A1.4.7-1%2Bb2?arch=amd64&distro=debian-12" {
		t.Errorf("purl = %v", purl)
	}
	// Every relationship points at elements that exist.
	rels := doc["relationships"].([]any)
	if len(rels) != 4 {
		t.Errorf("%d relationships", len(rels))
	}
	for _, r := range rels {
		m := r.(map[string]any)
		for _, k := range []string{"spdxElementId", "relatedSpdxElement"} {
			if id := m[k].(string); id != "SPDXRef-DOCUMENT" && !ids[id] {
				t.Errorf("relationship to unknown %s", id)
			}
		}
	}
	if !strings.HasSuffix(string(out), "}\n") || strings.Contains(string(out), `\u0026`) {
		t.Error("output is not plain indented JSON with a final newline")
	}
}

func TestDeterministicNamespace(t *testing.T) {
	a, _ := Build(input())
	b, _ := Build(input())
	if !bytes.Equal(a, b) {
		t.Fatal("the same input gives different documents")
	}
	in := input()
	in.Debs[1].Version = "2.36-9+deb12u15"
	c, _ := Build(in)
	ns := func(b []byte) string {
		var d Document
		json.Unmarshal(b, &d)
		return d.DocumentNamespace
	}
	if ns(a) == ns(c) {
		t.Error("different content, same namespace")
	}
	if !strings.HasPrefix(ns(a), "https://example.invalid/spdx/v1.36.3%2Boverlay.2-") {
		t.Errorf("namespace %s", ns(a))
	}
}

func TestBaseImageAndErrors(t *testing.T) {
	in := input()
	in.Debs = nil
	in.BaseImage = "registry.example/base:1"
	in.BaseImageDigest = "sha256:" + strings.Repeat("cd", 32)
	out, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"DESCENDANT_OF"`) || !strings.Contains(string(out), in.BaseImageDigest) {
		t.Errorf("no base image relationship:\n%s", out)
	}
	in.BinarySHA256 = ""
	if _, err := Build(in); err == nil {
		t.Error("built without the binary's digest")
	}
	in = input()
	in.Debs = append(in.Debs, Deb{"lib+c", "1", "amd64", "x"}, Deb{"lib-c", "1", "amd64", "y"})
	if _, err := Build(in); err == nil {
		t.Error("two packages with the same SPDX id were accepted")
	}
}
