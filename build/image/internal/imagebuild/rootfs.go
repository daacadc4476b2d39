package imagebuild

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/debian"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/layer"
	"github.com/kube-proxy-overlay/kube-proxy-overlay/build/image/internal/lockfile"
)

// WrappedCommands are the iptables commands that point at /usr/sbin/iptables-wrapper until the
// wrapper has picked a backend.
var WrappedCommands = []string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
}

// nftOnlyLinks are the alternatives that Debian's iptables postinst would set up for the tools
// that have only an nft variant.
var nftOnlyLinks = map[string]string{
	"usr/sbin/arptables":         "arptables-nft",
	"usr/sbin/arptables-save":    "arptables-nft-save",
	"usr/sbin/arptables-restore": "arptables-nft-restore",
	"usr/sbin/ebtables":          "ebtables-nft",
	"usr/sbin/ebtables-save":     "ebtables-nft-save",
	"usr/sbin/ebtables-restore":  "ebtables-nft-restore",
}

// keepPath decides which unpacked package files go into the image. Documentation other than
// copyright files, manual pages, info pages, translations, lintian overrides, menu entries and
// init scripts are dropped, as distroless images do; everything else stays.
func keepPath(rel string, d fs.DirEntry) bool {
	for _, drop := range []string{
		"usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian",
		"usr/share/menu", "usr/share/bug", "usr/share/doc-base", "etc/init.d",
		"etc/update-motd.d",
	} {
		if rel == drop || strings.HasPrefix(rel, drop+"/") {
			return false
		}
	}
	if strings.HasPrefix(rel, "usr/share/doc/") {
		parts := strings.Split(rel, "/")
		switch len(parts) {
		case 4: // usr/share/doc/PKG: the directory (or a symlink to another package's)
			return true
		case 5:
			return parts[4] == "copyright"
		default:
			return false
		}
	}
	return true
}

// systemFiles are the files that maintainer scripts or base-passwd would have made.
var systemFiles = map[string]string{
	"etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"etc/group": "root:x:0:\nnogroup:x:65534:\n",
	"etc/nsswitch.conf": "passwd:    files\ngroup:     files\nshadow:    files\n" +
		"hosts:     files dns\nnetworks:  files\nprotocols: files\nservices:  files\n",
}

// sha256File returns the hex SHA-256 of a file.
func sha256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BaseLayer unpacks every package of entries (one architecture's, from the lock; each from
// cache, verified against the lock)
// into a scratch directory with dpkg-deb -x, in lock order, and returns the base layer: the
// unpacked files (filtered by keepPath), a dpkg status entry per package under
// /var/lib/dpkg/status.d (as distroless images have, so that scanners see the packages), the
// links that maintainer scripts would have made, the iptables wrapper, and minimal passwd,
// group and nsswitch files.
func BaseLayer(entries []lockfile.Entry, cache, wrapper, scratch string) (*layer.Layer, error) {
	root := filepath.Join(scratch, "rootfs")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	status := map[string][]byte{}
	for _, e := range entries {
		deb := filepath.Join(cache, e.DebFileName())
		sum, err := sha256File(deb)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (run the image build, which fetches the recorded packages)", e.Name, err)
		}
		if sum != e.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %s differs from the recorded %s", deb, sum, e.SHA256)
		}
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, out)
		}
		ctl, err := exec.Command("dpkg-deb", "-f", deb).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb -f %s: %v", deb, err)
		}
		paras, err := debian.ParseParagraphs(bytes.NewReader(ctl))
		if err != nil || len(paras) != 1 {
			return nil, fmt.Errorf("%s: cannot read its control file: %v", deb, err)
		}
		p := paras[0]
		if p.Get("Package") != e.Name || p.Get("Version") != e.Version || p.Get("Architecture") != e.Arch {
			return nil, fmt.Errorf("%s: control says %s %s %s, the lock says %s %s %s", deb,
				p.Get("Package"), p.Get("Version"), p.Get("Architecture"), e.Name, e.Version, e.Arch)
		}
		status[e.Name] = []byte(statusEntry(p))
	}

	l := layer.New()
	if err := l.AddTree(root, "", keepPath); err != nil {
		return nil, err
	}
	// Directories and links that base-files' and dash's maintainer scripts would have set up.
	for _, d := range []struct {
		p    string
		mode fs.FileMode
	}{{"tmp", 0o1777}, {"var/tmp", 0o1777}, {"root", 0o700}, {"run", 0o755}, {"run/lock", 0o1777},
		{"proc", 0o755}, {"sys", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"var/lib/dpkg/status.d", 0o755},
		{"usr/local/bin", 0o755}, {"usr/local/sbin", 0o755}} {
		if err := l.AddDir(d.p, d.mode); err != nil {
			return nil, err
		}
	}
	l.Remove("var/run")
	l.Remove("var/lock")
	if err := l.AddSymlink("var/run", "/run"); err != nil {
		return nil, err
	}
	if err := l.AddSymlink("var/lock", "/run/lock"); err != nil {
		return nil, err
	}
	// /bin/sh: dash's own link on a merged-/usr system (trixie's base-files makes bin a link to
	// usr/bin, and dash ships usr/bin/sh); the link dash's postinst would make otherwise.
	if e := l.Get("bin"); e != nil && e.Kind == layer.Symlink {
		if e := l.Get("usr/bin/sh"); e == nil {
			return nil, fmt.Errorf("/bin is a link to usr/bin but the packages have no /usr/bin/sh")
		}
	} else if e := l.Get("bin/sh"); e == nil || e.Kind != layer.Symlink {
		if err := l.AddSymlink("bin/sh", "dash"); err != nil {
			return nil, err
		}
	}
	for p, content := range systemFiles {
		if err := l.AddFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	for name, s := range status {
		if err := l.AddFile(path.Join("var/lib/dpkg/status.d", name), s, 0o644); err != nil {
			return nil, err
		}
	}
	// The iptables wrapper and the links that lead to it.
	w, err := os.ReadFile(wrapper)
	if err != nil {
		return nil, err
	}
	if err := l.AddFile("usr/sbin/iptables-wrapper", w, 0o755); err != nil {
		return nil, err
	}
	for _, c := range WrappedCommands {
		if err := l.AddSymlink("usr/sbin/"+c, "iptables-wrapper"); err != nil {
			return nil, err
		}
	}
	for p, t := range nftOnlyLinks {
		if err := l.AddSymlink(p, t); err != nil {
			return nil, err
		}
	}
	// Every backend binary the wrapper can pick must be there.
	for _, c := range WrappedCommands {
		for _, mode := range []string{"nft", "legacy"} {
			target := strings.Replace(c, "tables", "tables-"+mode, 1)
			if !l.Has("usr/sbin/" + target) {
				return nil, fmt.Errorf("the packages have no /usr/sbin/%s, which the iptables wrapper needs", target)
			}
		}
	}
	if !l.Has("usr/sbin/nft") {
		return nil, fmt.Errorf("the packages have no /usr/sbin/nft")
	}
	return l, nil
}

// statusEntry turns a package's control paragraph into a dpkg status entry.
func statusEntry(p debian.Paragraph) string {
	out := debian.Paragraph{Values: map[string]string{}}
	for _, k := range p.Keys {
		out.Keys = append(out.Keys, k)
		out.Values[k] = p.Values[k]
		if k == "Package" {
			out.Keys = append(out.Keys, "Status")
			out.Values["Status"] = "install ok installed"
		}
	}
	return out.Format()
}

// elfMachines maps Debian architectures to the ELF machine of their binaries.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkELFArch fails unless binary is a 64-bit little-endian ELF file for arch, so that an image
// never carries a kube-proxy of another architecture.
func checkELFArch(binary, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("no ELF machine known for architecture %s (known: amd64, arm64)", arch)
	}
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", binary, err)
	}
	defer f.Close()
	if f.Machine != want || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return fmt.Errorf("%s is a %s %s binary, the linux/%s image needs %s", binary, f.Class, f.Machine, arch, want)
	}
	return nil
}
