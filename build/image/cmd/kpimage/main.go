// Command kpimage builds the kube-proxy container image without a container engine.
//
//	kpimage lock -spec images/packages.in -lock images/packages.lock -md images/PACKAGES.md \
//	        -apt amd64=DIR/amd64/apt.conf -apt arm64=DIR/arm64/apt.conf
//	    resolve the spec's Debian dependency closure for each architecture with apt-cache (with
//	    that architecture's apt configuration) and write the lock file and the package table
//	kpimage check-lock -spec ... -lock ... -md ...
//	    fail unless the lock was made from the spec and the table matches the lock
//	kpimage lock-entries -lock images/packages.lock [-field suite|arch]
//	    print "NAME VERSION ARCH SHA256 DEBFILE" per package (or one header field; arch prints
//	    the architectures, space-separated), for scripts
//	kpimage build -out _output/image -binary amd64=PATH -binary arm64=PATH ... (see -h)
//	    assemble one image per architecture and their index; print the index digest
//	kpimage flatten -oci _output/image/oci [-platform linux/arm64]
//	    write the image's flattened filesystem to standard output as a tar stream
//	kpimage push -oci _output/image/oci -digest-file _output/image/digest -image REGISTRY/REPO[:TAG]
//	    push the layout's image byte for byte; print the registry's digest; fail if it is not
//	    the one in the digest file
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/debian"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/imagebuild"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
)

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "kpimage: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: kpimage lock|check-lock|lock-entries|build|flatten|push [flags]")
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "lock":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		spec := fs.String("spec", "images/packages.in", "the package spec")
		lock := fs.String("lock", "images/packages.lock", "the lock file to write")
		md := fs.String("md", "images/PACKAGES.md", "the Markdown table to write")
		apt := archPaths{}
		fs.Var(apt, "apt", "ARCH=APT_CONFIG, the apt configuration of ARCH's index (repeat per architecture)")
		fs.Parse(args)
		lookups := map[string]debian.Lookup{}
		for a, c := range apt {
			lookups[a] = imagebuild.AptLookup(c)
		}
		l, err := imagebuild.GenerateLock(*spec, *lock, *md, lookups)
		if err != nil {
			die("%v", err)
		}
		fmt.Fprintf(os.Stderr, "recorded %d packages in %s and %s\n", len(l.Entries), *lock, *md)
	case "check-lock":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		spec := fs.String("spec", "images/packages.in", "the package spec")
		lock := fs.String("lock", "images/packages.lock", "the lock file")
		md := fs.String("md", "images/PACKAGES.md", "the Markdown table")
		fs.Parse(args)
		if _, _, err := imagebuild.CheckLock(*spec, *lock, *md); err != nil {
			die("%v", err)
		}
	case "lock-entries":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		lock := fs.String("lock", "images/packages.lock", "the lock file")
		field := fs.String("field", "", "print only this header field (suite, arch)")
		fs.Parse(args)
		f, err := os.Open(*lock)
		if err != nil {
			die("%v", err)
		}
		l, err := lockfile.Parse(f)
		f.Close()
		if err != nil {
			die("%v", err)
		}
		switch *field {
		case "":
			for _, e := range l.Entries {
				fmt.Printf("%s %s %s %s %s\n", e.Name, e.Version, e.Arch, e.SHA256, e.DebFileName())
			}
		case "suite":
			fmt.Println(l.Suite)
		case "arch":
			fmt.Println(strings.Join(l.Arches, " "))
		default:
			die("unknown field %q", *field)
		}
	case "push":
		if err := pushCmd(args); err != nil {
			die("%v", err)
		}
	case "build":
		if err := build(args); err != nil {
			die("%v", err)
		}
	case "flatten":
		fs := flag.NewFlagSet(cmd, flag.ExitOnError)
		oci := fs.String("oci", "_output/image/oci", "the OCI image layout")
		platform := fs.String("platform", "linux/amd64", "which image of the index")
		fs.Parse(args)
		img, err := platformImage(*oci, *platform)
		if err != nil {
			die("%v", err)
		}
		rc := mutate.Extract(img)
		defer rc.Close()
		if _, err := io.Copy(os.Stdout, rc); err != nil {
			die("flatten: %v", err)
		}
	default:
		die("unknown command %q", cmd)
	}
}

// platformImage returns the image for platform ("linux/ARCH") of the OCI layout's index.
func platformImage(dir, platform string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(tm.Manifests) != 1 || !tm.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s does not name one image index", dir)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.String() == platform {
			return idx.Image(d.Digest)
		}
		have = append(have, d.Platform.String())
	}
	return nil, fmt.Errorf("%s has no %s image (it has %s)", dir, platform, strings.Join(have, ", "))
}

// archPaths is a repeatable ARCH=PATH flag.
type archPaths map[string]string

func (a archPaths) String() string { return fmt.Sprint(map[string]string(a)) }

func (a archPaths) Set(v string) error {
	k, p, ok := strings.Cut(v, "=")
	if !ok || k == "" || p == "" {
		return fmt.Errorf("want ARCH=PATH, got %q", v)
	}
	if _, dup := a[k]; dup {
		return fmt.Errorf("%s is given twice", k)
	}
	a[k] = p
	return nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var o imagebuild.Options
	fs.StringVar(&o.SpecPath, "spec", "images/packages.in", "the package spec")
	fs.StringVar(&o.LockPath, "lock", "images/packages.lock", "the recorded package set")
	fs.StringVar(&o.PackagesMD, "md", "images/PACKAGES.md", "the package table, which must match the lock")
	fs.StringVar(&o.DebCache, "debs", "_output/cache/debs", "the directory of fetched .debs")
	fs.StringVar(&o.Wrapper, "wrapper", "images/iptables-wrapper", "the iptables wrapper script")
	bins := archPaths{}
	fs.Var(bins, "binary", "ARCH=PATH, the kube-proxy binary built for ARCH (repeat per architecture)")
	fs.StringVar(&o.License, "license", "", "upstream's LICENSE")
	fs.StringVar(&o.LicensesDir, "licenses", "", "upstream's LICENSES directory")
	fs.StringVar(&o.Version, "version", "", "kube-proxy's version")
	fs.StringVar(&o.Upstream, "upstream", "", "the upstream tag")
	fs.StringVar(&o.Commit, "commit", "", "this repo's commit, for the revision label")
	fs.StringVar(&o.ImageName, "name", "kube-proxy-overlay/kube-proxy", "the image name in the tarball")
	fs.StringVar(&o.Tag, "tag", "", "the image tag in the tarball and the OCI layout")
	fs.StringVar(&o.Base, "base", "", "a base image reference; empty for the self-contained image")
	arches := fs.String("arch", "", "the architectures, comma-separated, in index order (default: the lock's)")
	fs.StringVar(&o.OutDir, "out", "_output/image", "the output directory")
	fs.StringVar(&o.Scratch, "scratch", "", "a scratch directory (default: a new one under TMPDIR)")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in Unix seconds")
	fs.Parse(args)
	o.Binaries = bins
	if *arches != "" {
		o.Arches = strings.Split(*arches, ",")
	}
	if o.License == "" || o.LicensesDir == "" || o.Version == "" || o.Upstream == "" || o.Tag == "" {
		return fmt.Errorf("build needs -license, -licenses, -version, -upstream and -tag")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-epoch (SOURCE_DATE_EPOCH) %q is not a number of seconds", *epoch)
	}
	o.Epoch = time.Unix(secs, 0).UTC()
	if o.Scratch == "" {
		d, err := os.MkdirTemp("", "kpimage-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.Scratch = d
	}
	res, err := imagebuild.Build(o)
	if err != nil {
		return err
	}
	fmt.Println(res.Digest)
	return nil
}
