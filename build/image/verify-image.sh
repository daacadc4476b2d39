#!/usr/bin/env bash
# verify-image.sh OUT FAKEAPISERVER KPIMAGE checks the image that `make image` wrote to OUT:
#
#   1. Reproducibility: `make image` again from a fresh copy of this repo at another path, with
#      its own empty GOCACHE and TMPDIR and umask 0027 (so kube-proxy, cross-compiled for every
#      platform, and the tools are rebuilt from scratch), sharing only the .deb cache (every
#      .deb is checked against images/packages.lock) and the Go module cache (checked against
#      go.sum). Both index digests must be equal.
#   2. Both images run: each platform's filesystem, unpacked from the OCI layout, runs its own
#      `kube-proxy --version`, `nft --version` (1.1 or newer), `iptables-nft --version` and
#      `conntrack --version` under chroot: linux/amd64 natively, linux/arm64 under
#      qemu-aarch64-static (Debian's qemu-user-static, copied into the scratch copy of the
#      arm64 filesystem and named explicitly, so no binfmt_misc registration is needed).
#      qemu-user emulates only the route, audit and uevent netlink protocols and refuses
#      netfilter's, and the arm64 nft, iptables-nft and conntrack open a netfilter socket
#      before anything else, so even their --version fails there; for those the script says
#      so, checks that the image's loader resolves all their libraries, and reads nft's version
#      from its package. Then the arm64 `nft` tries to program a table in a throwaway network
#      namespace; the script says why when qemu-user's netlink support is the reason it fails.
#   3. The iptables wrapper under the image's packages: in an empty network namespace it must
#      pick the nft backend.
#   4. kube-proxy works from inside the amd64 image: in a throwaway network namespace, a fake API server
#      (build/image/cmd/fakeapiserver) serves one Node and no Services, and the image's
#      kube-proxy, chrooted into the unpacked filesystem, runs with --proxy-mode=nftables until
#      `nft list table ip kube-proxy` in that namespace shows its base chains. Before it starts,
#      the namespace gets the legacy-iptables rules an old iptables-mode kube-proxy leaves
#      behind (when the kernel has legacy iptables): the image's iptables wrapper must pick the
#      legacy backend and kube-proxy's start-up cleanup must remove them.
#
# Network namespace, processes, mounts and scratch files are removed on success, failure and
# interrupt. Needs root, ip (iproute2), chroot, tar, qemu-aarch64-static, and the kernel's
# nf_tables. The last line is "image digest: sha256:HEX (linux/amd64, linux/arm64)".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
[ $# -eq 3 ] || die "usage: $0 OUT FAKEAPISERVER KPIMAGE"
root=$(cd "$here/../.." && pwd)
out=$(realpath "$1") fake=$(realpath "$2") kpimage=$(realpath "$3")
rel=${out#"$root"/}
[ "$(id -u)" -eq 0 ] || die "verify-image needs root (chroot, mounts, network namespaces)"
for c in ip chroot tar mount umount qemu-aarch64-static; do command -v "$c" >/dev/null || die "$c is missing (build/deps.sh image installs it)"; done

digest=$(cat "$out/digest")
version=$(sed -n 's/^ *"org.opencontainers.image.version": "\(.*\)",\{0,1\}$/\1/p' "$out/linux-amd64/config.json")
[ -d "$out/linux-arm64" ] || die "$out holds no linux/arm64 image"
[ -n "$digest" ] && [ -n "$version" ] || die "$out holds no built image (run make image)"

work=$(mktemp -d /tmp/kp-image-verify.XXXXXX)
ns="kpimg-$$"
ns2="kpimg-$$-b"
rootfs="$work/rootfs"
pids=()
mounts=()
cleanup() {
	local rc=$? p m i
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# Anything else still in the namespace (there should be nothing) goes too.
	for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		m=${mounts[$i]}
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	if grep -q " $work/" /proc/self/mounts; then
		echo "error: mounts under $work remain; leaving it in place" >&2
	else
		chmod -R u+w "$work" 2>/dev/null || true
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. A second build from a fresh copy.
copy="$work/elsewhere/copy-of-repo"
mkdir -p "$copy" "$work/gocache" "$work/tmp"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$copy")
cp -r "$root/.git" "$copy/.git"
log "second image build in $copy (empty GOCACHE, own TMPDIR, umask 0027; shared .deb cache)"
start=$(date +%s)
(
	umask 0027
	cd "$copy"
	env GOCACHE="$work/gocache" TMPDIR="$work/tmp" DEB_CACHE="${DEB_CACHE:-$root/_output/cache/debs}" \
		make --no-print-directory image >"$work/build.log" 2>&1
) || { tail -50 "$work/build.log" >&2; die "the second build failed"; }
second=$(cat "$copy/$rel/digest")
echo "first:  $digest  $out"
echo "second: $second  $copy/$rel ($(($(date +%s) - start))s)"
if [ "$digest" != "$second" ]; then
	other=$(sed -n 's/^ *"org.opencontainers.image.version": "\(.*\)",\{0,1\}$/\1/p' "$copy/$rel/linux-amd64/config.json")
	[ "$other" = "$version" ] || echo "note: the versions differ ($version, $other): the repo changed between the two builds" >&2
	for a in amd64 arm64; do
		echo "linux/$a: $(cat "$out/linux-$a/digest") and $(cat "$copy/$rel/linux-$a/digest")" >&2
		diff "$out/linux-$a/config.json" "$copy/$rel/linux-$a/config.json" >&2 || true
	done
	die "the two image builds differ"
fi
echo "reproducible: the same image digest twice"

# 2. Each image's own binaries, under chroot (arm64: under qemu-user).
nft_at_least_1_1() { # nft_at_least_1_1 VERSION: 1.1 or newer ("nftables v1.1.3 (...)" or "1.1.3-1")
	local v
	v=$(sed -n 's/^\(nftables v\)\{0,1\}\([0-9][0-9]*\.[0-9][0-9]*\).*/\2/p' <<<"$1")
	[ -n "$v" ] && [ "$(printf '%s\n' 1.1 "$v" | sort -V | head -1)" = 1.1 ]
}
# check_tools PLATFORM ROOTFS LOADER RUNNER...: the image's tools, run through RUNNER. Under
# qemu-user (LOADER is then the image's dynamic loader), nft, iptables-nft and conntrack cannot
# run: each opens a netfilter netlink socket before it reads its arguments, and qemu-user refuses
# that protocol ("Protocol not supported"). For those, the check is that the loader resolves
# every shared library the binary needs inside the image, and nft's version is the one its
# package records.
check_tools() {
	local platform=$1 fs=$2 loader=$3 got t want
	shift 3
	got=$("$@" /usr/local/bin/kube-proxy --version)
	echo "$platform: $got"
	[ "$got" = "Kubernetes $version" ] || die "the $platform image's kube-proxy says \"$got\", its label says $version"
	for t in nft iptables-nft conntrack; do
		case $t in
		nft) want="nftables v*" ;;
		iptables-nft) want="iptables v*(nf_tables)*" ;;
		conntrack) want="conntrack v*" ;;
		esac
		got=$("$@" /usr/sbin/$t --version 2>&1) || true
		if [[ $got == $want ]]; then
			echo "$platform: $got"
			[ $t != nft ] || nft_at_least_1_1 "$got" || die "the $platform image's nft is older than 1.1: $got"
		elif [ -n "$loader" ] && grep -q "Protocol not supported" <<<"$got"; then
			echo "$platform: $t --version cannot run under qemu-user: $(head -1 <<<"$got" | tr -d '\n')"
			got=$("$@" "$loader" --list /usr/sbin/$t 2>&1) || die "the $platform image's loader cannot load $t: $got"
			! grep -q "not found" <<<"$got" || die "the $platform image lacks libraries of $t: $got"
			echo "$platform: $t loads: its $(grep -c '=>' <<<"$got") shared libraries resolve inside the image"
		else
			die "the $platform image's $t --version says \"$got\""
		fi
	done
	got=$(sed -n 's/^Version: //p' "$fs/var/lib/dpkg/status.d/nftables")
	nft_at_least_1_1 "$got" || die "the $platform image's nftables package is $got, older than 1.1"
	echo "$platform: nftables package $got, iptables package $(sed -n 's/^Version: //p' "$fs/var/lib/dpkg/status.d/iptables")"
}
mkdir -p "$rootfs"
"$kpimage" flatten -oci "$out/oci" -platform linux/amd64 | tar -x -p --numeric-owner -C "$rootfs"
run() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
check_tools linux/amd64 "$rootfs" "" run

arm="$work/rootfs-arm64"
mkdir -p "$arm"
"$kpimage" flatten -oci "$out/oci" -platform linux/arm64 | tar -x -p --numeric-owner -C "$arm"
file_arch=$(od -An -tu2 -j18 -N2 "$arm/usr/local/bin/kube-proxy" | tr -d ' ')
[ "$file_arch" = 183 ] || die "the arm64 image's kube-proxy is not an aarch64 ELF (e_machine $file_arch)"
cp "$(command -v qemu-aarch64-static)" "$arm/qemu-aarch64-static"
runarm() { chroot "$arm" /qemu-aarch64-static -E PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
check_tools "linux/arm64 (qemu-aarch64-static)" "$arm" /lib/ld-linux-aarch64.so.1 runarm

ip netns add "$ns2"
if err=$(ip netns exec "$ns2" chroot "$arm" /qemu-aarch64-static /usr/sbin/nft -f - 2>&1 <<-'EOF'
	table inet kpimg-arm64 {
		set s { type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2 } }
		chain c { type filter hook output priority 0; ip daddr @s counter accept }
	}
	EOF
); then
	listed=$(ip netns exec "$ns2" nft list table inet kpimg-arm64)
	grep -q "10.0.0.2" <<<"$listed" || die "the arm64 nft reported success but the kernel holds no such table"
	echo "linux/arm64 (qemu-aarch64-static): nft programmed a table with a set and a chain on this kernel"
elif grep -qi "protocol not supported" <<<"$err"; then
	echo "linux/arm64 (qemu-aarch64-static): nft cannot program this kernel under qemu-user: $(head -1 <<<"$err")"
	echo "  (qemu-user only emulates the route, audit and uevent netlink protocols and refuses netfilter's;"
	echo "  the arm64 nft's rule programming is covered only on arm64 hardware)"
else
	echo "$err" >&2
	die "the arm64 nft failed under qemu-user for another reason than netlink support"
fi
ip netns del "$ns2"

# /proc and /dev in the amd64 filesystem, for steps 3 and 4.
mount -t proc proc "$rootfs/proc"
mounts+=("$rootfs/proc")
mount -t tmpfs -o mode=0755,size=1m tmpfs "$rootfs/dev"
mounts+=("$rootfs/dev")
for d in "null c 1 3" "zero c 1 5" "random c 1 8" "urandom c 1 9"; do
	set -- $d
	mknod -m 0666 "$rootfs/dev/$1" "$2" "$3" "$4"
done

# 3. The iptables wrapper picks nft on a node with no legacy rules (once /dev/null exists).
ip netns add "$ns2"
picked=$(ip netns exec "$ns2" chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /usr/sbin/iptables --version 2>&1 | head -1 || true)
target=$(readlink "$rootfs/usr/sbin/iptables" || true)
echo "empty node: the image's iptables wrapper picked $target ($picked)"
[ "$target" = iptables-nft ] && [[ $picked == *"(nf_tables)"* ]] || die "the wrapper should have picked iptables-nft on an empty node"
ip netns del "$ns2"
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sfn iptables-wrapper "$rootfs/usr/sbin/$c"
done

# 4. kube-proxy in nftables mode, in a throwaway network namespace.
ip netns add "$ns"
ip -n "$ns" link set lo up
inns() { ip netns exec "$ns" "$@"; }

legacy=no
if inns chroot "$rootfs" /usr/sbin/iptables-legacy-restore --noflush 2>/dev/null <<-'EOF'; then
	*nat
	:KUBE-SERVICES - [0:0]
	:KUBE-POSTROUTING - [0:0]
	:KUBE-SVC-VERIFYIMAGE00000 - [0:0]
	-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
	-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
	-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
	-A KUBE-SERVICES -j KUBE-SVC-VERIFYIMAGE00000
	COMMIT
	*filter
	:KUBE-FORWARD - [0:0]
	-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
	COMMIT
	EOF
	legacy=yes
	echo "seeded legacy iptables with $(inns chroot "$rootfs" /usr/sbin/iptables-legacy-save | grep -c KUBE-) KUBE-* lines, as an iptables-mode kube-proxy leaves them"
else
	echo "note: this kernel has no legacy iptables; the legacy clean-up check is skipped"
fi

node=kpimg-node
mkdir -p "$rootfs/var/lib/kube-proxy"
cat >"$rootfs/var/lib/kube-proxy/kubeconfig" <<-EOF
	apiVersion: v1
	kind: Config
	clusters:
	- name: fake
	  cluster: {server: "http://127.0.0.1:6443"}
	users:
	- name: kube-proxy
	  user: {}
	contexts:
	- name: fake
	  context: {cluster: fake, user: kube-proxy}
	current-context: fake
EOF
# Started with ip netns exec directly (not through a shell function), so that $! is the process
# itself: ip and chroot exec into their commands.
ip netns exec "$ns" "$fake" -listen 127.0.0.1:6443 -node "$node" -ready-file "$work/fake.ready" >"$work/fake.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/fake.ready" ] && break; sleep 0.1; done
[ -s "$work/fake.ready" ] || { cat "$work/fake.log" >&2; die "the fake API server did not start"; }

ip netns exec "$ns" chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/usr/local/bin/kube-proxy --proxy-mode=nftables --hostname-override="$node" \
	--kubeconfig=/var/lib/kube-proxy/kubeconfig \
	--metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256 \
	--conntrack-max-per-core=0 --v=2 >"$work/kube-proxy.log" 2>&1 &
kp=$!
pids+=($kp)

chains="filter-prerouting-pre-dnat filter-output-pre-dnat filter-input filter-forward filter-output nat-prerouting nat-output nat-postrouting"
ok=no
for _ in $(seq 120); do
	if ! kill -0 "$kp" 2>/dev/null; then
		tail -40 "$work/kube-proxy.log" >&2
		die "kube-proxy exited"
	fi
	if table=$(inns chroot "$rootfs" /usr/sbin/nft list table ip kube-proxy 2>/dev/null); then
		ok=yes
		for c in $chains; do
			grep -A1 "chain $c {" <<<"$table" | grep -q 'type .* hook ' || { ok=no; break; }
		done
		[ $ok = yes ] && break
	fi
	sleep 0.5
done
if [ $ok != yes ]; then
	tail -40 "$work/kube-proxy.log" >&2
	die "kube-proxy did not program its base chains within 60s"
fi
echo "kube-proxy programmed table ip kube-proxy with its base chains: $chains"

picked=$(readlink "$rootfs/usr/sbin/iptables" || true)
echo "the image's iptables wrapper picked: $picked"
if [ $legacy = yes ]; then
	[ "$picked" = iptables-legacy ] || die "the wrapper should have picked iptables-legacy, which held the old rules"
	left=$(inns chroot "$rootfs" /usr/sbin/iptables-legacy-save | grep -c KUBE- || true)
	[ "$left" -eq 0 ] || {
		inns chroot "$rootfs" /usr/sbin/iptables-legacy-save >&2
		die "kube-proxy left $left KUBE-* lines in legacy iptables"
	}
	echo "kube-proxy's start-up cleanup removed the old KUBE-* rules from legacy iptables"
else
	[ "$picked" = iptables-nft ] || die "the wrapper should have picked iptables-nft on an empty node"
fi
kill "$kp"
wait "$kp" 2>/dev/null || true
echo "image digest: $digest (linux/amd64 $(cat "$out/linux-amd64/digest"), linux/arm64 $(cat "$out/linux-arm64/digest"))"
