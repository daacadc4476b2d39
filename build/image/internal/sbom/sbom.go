// Package sbom writes the image's software bill of materials as an SPDX 2.3 JSON document.
//
// The document is a pure function of its inputs: its creation time is the build's
// SOURCE_DATE_EPOCH, its namespace is derived from a hash of its content, and packages are listed
// in a fixed order (the image first, then kube-proxy, then the Debian packages by name).
package sbom

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Deb is one Debian package of the base layer.
type Deb struct {
	Name    string
	Version string
	Arch    string
	SHA256  string // of the .deb
}

// Input is what the SBOM describes.
type Input struct {
	ImageName        string // e.g. kube-proxy-overlay/kube-proxy
	Version          string // kube-proxy's version, e.g. v1.36.3+overlay.2
	Upstream         string // the upstream tag, e.g. v1.36.3
	BinarySHA256     string // of /usr/local/bin/kube-proxy
	Created          time.Time
	Distro           string // purl distro qualifier, e.g. debian-12
	Debs             []Deb  // base layer packages (self-contained image)
	BaseImage        string // base image reference (BASE= builds); empty otherwise
	BaseImageDigest  string // sha256:HEX of the base image manifest
	ToolName         string // creator tool, e.g. kube-proxy-overlay-kpimage
	NamespacePrefix  string // e.g. https://kube-proxy-overlay.invalid/spdx
	BinaryPathInside string // where the image holds kube-proxy
}

type checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type externalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type pkg struct {
	Name                  string        `json:"name"`
	SPDXID                string        `json:"SPDXID"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	Supplier              string        `json:"supplier,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []checksum    `json:"checksums,omitempty"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	Comment               string        `json:"comment,omitempty"`
	ExternalRefs          []externalRef `json:"externalRefs,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
}

type relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

// Document is the subset of SPDX 2.3 that this package writes.
type Document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// spdxID makes an SPDX element ID from parts: letters, digits, "." and "-" only.
func spdxID(parts ...string) string {
	return "SPDXRef-" + idUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// purlEscape percent-encodes everything outside the unreserved set, as the purl spec asks
// for versions ("+" becomes %2B, ":" becomes %3A).
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// DebPURL is the package URL of a Debian binary package.
func DebPURL(d Deb, distro string) string {
	q := "arch=" + purlEscape(d.Arch)
	if distro != "" {
		q += "&distro=" + purlEscape(distro)
	}
	return fmt.Sprintf("pkg:deb/debian/%s@%s?%s", purlEscape(d.Name), purlEscape(d.Version), q)
}

// Build returns the SPDX JSON document, indented, with a trailing newline.
func Build(in Input) ([]byte, error) {
	if in.Version == "" || in.BinarySHA256 == "" {
		return nil, fmt.Errorf("sbom: the kube-proxy version and binary digest are required")
	}
	imageID := spdxID("Image")
	kpID := spdxID("Package", "kube-proxy")
	doc := Document{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        fmt.Sprintf("%s %s", in.ImageName, in.Version),
		CreationInfo: creationInfo{
			Created:  in.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: " + in.ToolName},
		},
	}
	doc.Packages = append(doc.Packages, pkg{
		Name:                  in.ImageName,
		SPDXID:                imageID,
		VersionInfo:           in.Version,
		DownloadLocation:      "NOASSERTION",
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "NOASSERTION",
		CopyrightText:         "NOASSERTION",
		Comment:               "The container image; its own digest cannot be part of its content.",
		PrimaryPackagePurpose: "CONTAINER",
	}, pkg{
		Name:             "kube-proxy",
		SPDXID:           kpID,
		VersionInfo:      in.Version,
		DownloadLocation: "NOASSERTION",
		Checksums:        []checksum{{"SHA256", in.BinarySHA256}},
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  "Apache-2.0",
		CopyrightText:    "NOASSERTION",
		Comment: fmt.Sprintf("Kubernetes %s with this project's patches, at %s; upstream's LICENSE and LICENSES/ are at /LICENSE and /LICENSES.",
			in.Upstream, in.BinaryPathInside),
		ExternalRefs: []externalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:golang/k8s.io/kubernetes@" + purlEscape(in.Upstream) + "#cmd/kube-proxy",
		}},
		PrimaryPackagePurpose: "APPLICATION",
	})
	rels := []relationship{
		{"SPDXRef-DOCUMENT", "DESCRIBES", imageID},
		{imageID, "CONTAINS", kpID},
	}
	if in.BaseImage != "" {
		baseID := spdxID("Image", "base")
		doc.Packages = append(doc.Packages, pkg{
			Name:             in.BaseImage,
			SPDXID:           baseID,
			VersionInfo:      in.BaseImageDigest,
			DownloadLocation: "NOASSERTION",
			LicenseConcluded: "NOASSERTION",
			LicenseDeclared:  "NOASSERTION",
			CopyrightText:    "NOASSERTION",
			Comment:          "The base image; its contents are described by its own SBOM, if it has one.",
		})
		rels = append(rels, relationship{imageID, "DESCENDANT_OF", baseID})
	}
	seen := map[string]bool{}
	for _, d := range in.Debs {
		id := spdxID("Package", "deb", d.Name)
		if seen[id] {
			return nil, fmt.Errorf("sbom: two packages map to the id %s", id)
		}
		seen[id] = true
		doc.Packages = append(doc.Packages, pkg{
			Name:             d.Name,
			SPDXID:           id,
			VersionInfo:      d.Version,
			Supplier:         "Organization: Debian",
			DownloadLocation: "NOASSERTION",
			Checksums:        []checksum{{"SHA256", d.SHA256}},
			LicenseConcluded: "NOASSERTION",
			LicenseDeclared:  "NOASSERTION",
			CopyrightText:    "NOASSERTION",
			Comment:          fmt.Sprintf("The checksum is the .deb's; its copyright file is at /usr/share/doc/%s/copyright.", d.Name),
			ExternalRefs: []externalRef{{
				ReferenceCategory: "PACKAGE-MANAGER",
				ReferenceType:     "purl",
				ReferenceLocator:  DebPURL(d, in.Distro),
			}},
		})
		rels = append(rels, relationship{imageID, "CONTAINS", id})
	}
	doc.Relationships = rels

	// The namespace must be unique per document: derive it from everything else.
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = fmt.Sprintf("%s/%s-%s", strings.TrimSuffix(in.NamespacePrefix, "/"),
		purlEscape(in.Version), hex.EncodeToString(sum[:16]))

	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
