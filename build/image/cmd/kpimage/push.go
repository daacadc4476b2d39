package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/push"
)

// pushCmd pushes the OCI layout to -image with the credentials of the Docker config
// (~/.docker/config.json, as `docker login` or `crane auth login` wrote them) and prints the
// digest the registry reports, then the pinned reference.
func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	oci := fs.String("oci", "_output/image/oci", "the OCI image layout")
	digestFile := fs.String("digest-file", "_output/image/digest", "the digest `make image` printed")
	image := fs.String("image", "", "where to push: REGISTRY/REPO[:TAG] (default tag: latest)")
	fs.Parse(args)
	if *image == "" {
		return fmt.Errorf("push needs -image REGISTRY/REPO[:TAG] (make push IMAGE=...)")
	}
	if strings.Contains(*image, "@") {
		return fmt.Errorf("-image %s: push to a tag, not a digest; the digest is the image's own", *image)
	}
	ref, err := name.ParseReference(*image)
	if err != nil {
		return fmt.Errorf("-image %s: %w", *image, err)
	}
	b, err := os.ReadFile(*digestFile)
	if err != nil {
		return fmt.Errorf("%w (run make image)", err)
	}
	want := strings.TrimSpace(string(b))
	res, err := push.Push(*oci, ref, want, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if res != nil {
		fmt.Printf("registry digest: %s\n", res.Digest)
	}
	if err != nil {
		return err
	}
	fmt.Printf("pushed: %s\n", res.Pinned)
	return nil
}
