// Package push copies the image that `make image` wrote, as an OCI image layout, to a registry
// byte for byte, so that the registry's digest is the one the build printed.
//
// A layout's index.json is not itself content-addressed: it names the image by a descriptor.
// The image is that descriptor's blob, an OCI image index (the multi-arch image) or a single
// image manifest, and its digest is the image digest. Push sends that blob and everything it
// references unchanged (go-containerregistry's remote.WriteIndex or remote.Write, which upload
// the layout's raw bytes), then reads the manifest back from the registry and compares bytes.
package push

import (
	"bytes"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Root returns the descriptor of the one image (index or manifest) that the layout at dir
// names, and the raw bytes of its manifest. It fails unless index.json names exactly one.
func Root(dir string) (v1.Descriptor, []byte, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("%s is not an OCI image layout (run make image): %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("%s/index.json: %w", dir, err)
	}
	if len(im.Manifests) != 1 {
		return v1.Descriptor{}, nil, fmt.Errorf("%s/index.json names %d images, want 1", dir, len(im.Manifests))
	}
	d := im.Manifests[0]
	raw, err := p.Bytes(d.Digest)
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("the layout lacks its image's manifest blob: %w", err)
	}
	return d, raw, nil
}

// Result is what a push did.
type Result struct {
	Ref    name.Reference // the reference pushed to, as given
	Digest v1.Hash        // the digest the registry reports for Ref after the push
	Pinned name.Digest    // Ref's repository @ Digest
}

// Push writes the layout's image to ref and returns the digest the registry then reports for
// ref. It fails when that digest differs from want (unless want is empty), or from the layout's
// own digest, or when the manifest the registry serves by digest is not byte-identical to the
// layout's.
func Push(dir string, ref name.Reference, want string, opts ...remote.Option) (*Result, error) {
	d, raw, err := Root(dir)
	if err != nil {
		return nil, err
	}
	if want != "" && d.Digest.String() != want {
		return nil, fmt.Errorf("the layout's image is %s, but the digest file says %s: run make image again", d.Digest, want)
	}
	p, _ := layout.FromPath(dir)
	switch {
	case d.MediaType.IsIndex():
		ii, err := p.ImageIndex()
		if err == nil {
			ii, err = ii.ImageIndex(d.Digest)
		}
		if err != nil {
			return nil, err
		}
		if err := remote.WriteIndex(ref, ii, opts...); err != nil {
			return nil, fmt.Errorf("pushing the index to %s: %w", ref, err)
		}
	case d.MediaType.IsImage():
		ii, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return nil, fmt.Errorf("pushing the image to %s: %w", ref, err)
		}
	default:
		return nil, fmt.Errorf("the layout's image has media type %q, neither an index nor a manifest", d.MediaType)
	}

	head, err := remote.Head(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("asking %s for the pushed digest: %w", ref, err)
	}
	res := &Result{Ref: ref, Digest: head.Digest, Pinned: ref.Context().Digest(head.Digest.String())}
	if head.Digest != d.Digest {
		return res, fmt.Errorf("the registry reports %s for %s, but the image is %s", head.Digest, ref, d.Digest)
	}
	got, err := remote.Get(res.Pinned, opts...)
	if err != nil {
		return res, fmt.Errorf("pulling %s back: %w", res.Pinned, err)
	}
	if !bytes.Equal(got.Manifest, raw) {
		return res, fmt.Errorf("the registry serves %s with other bytes than the layout holds", res.Pinned)
	}
	return res, nil
}
