# Shared helpers for the image scripts: a private apt configuration, so that the image's
# packages never depend on this machine's apt sources, pins or state. Source it; do not run it.
# shellcheck shell=bash
#
# apt_setup DIR SUITE ARCH writes DIR/apt.conf and DIR/sources.list for Debian SUITE (with its
# -updates and -security suites, component main) and exports APT_CONFIG, so that every apt-get
# and apt-cache after it reads only that configuration: its own lists and cache under DIR, no
# dpkg status, no preferences, no recommends. Index files are verified with Debian's archive
# keyring (package debian-archive-keyring), so every .deb apt fetches is checked against a
# signed index.
#
# The mirrors are this machine's own Debian mirrors, as its apt sources name them for SUITE and
# SUITE-security; when they name none for SUITE (a bookworm host building the trixie image), the
# mirrors they name for another suite serve (Debian mirrors carry every suite).
# DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR override them (a local mirror).

APT_KEYRING=${APT_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

# host_mirror SUITE prints the repository URI that this machine's apt uses for SUITE, or else
# the one it uses for any other suite of the same kind (SUITE-security: a security suite).
host_mirror() {
	APT_CONFIG=/dev/null apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 2>/dev/null |
		awk -v s="$1" '
			$1 == s { print $2; found = 1; exit }
			!any && (($1 ~ /-security$/) == (s ~ /-security$/)) && $1 !~ /-(updates|backports|proposed-updates)$/ { any = $2 }
			END { if (!found && any) print any }'
}

apt_setup() {
	local dir=$1 suite=$2 arch=$3 main sec
	main=${DEBIAN_MIRROR:-$(host_mirror "$suite")}
	sec=${DEBIAN_SECURITY_MIRROR:-$(host_mirror "$suite-security")}
	[ -n "$main" ] && [ -n "$sec" ] ||
		die "this machine's apt sources name no mirror for Debian $suite and $suite-security; set DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR to the archive and security archive URIs"
	[ -r "$APT_KEYRING" ] || die "$APT_KEYRING is missing (apt-get install debian-archive-keyring)"
	mkdir -p "$dir/parts" "$dir/state/lists/partial" "$dir/cache/archives/partial"
	: >"$dir/state/status"
	cat >"$dir/sources.list" <<-EOF
		deb [signed-by=$APT_KEYRING] ${main%/} $suite main
		deb [signed-by=$APT_KEYRING] ${main%/} $suite-updates main
		deb [signed-by=$APT_KEYRING] ${sec%/} $suite-security main
	EOF
	cat >"$dir/apt.conf" <<-EOF
		Dir::Etc::Main "/dev/null";
		Dir::Etc::Parts "$dir/parts";
		Dir::Etc::SourceList "$dir/sources.list";
		Dir::Etc::SourceParts "$dir/parts";
		Dir::Etc::Preferences "/dev/null";
		Dir::Etc::PreferencesParts "$dir/parts";
		Dir::State "$dir/state";
		Dir::State::status "$dir/state/status";
		Dir::Cache "$dir/cache";
		APT::Architecture "$arch";
		APT::Architectures { "$arch"; };
		APT::Install-Recommends "false";
		APT::Install-Suggests "false";
		Acquire::Languages "none";
		Acquire::Retries "3";
		APT::Sandbox::User "root";
	EOF
	export APT_CONFIG="$dir/apt.conf"
}

# apt_update refreshes the private lists (after apt_setup).
apt_update() {
	log "apt-get update (Debian $(awk 'NR==1{print $4}' "${APT_CONFIG%/apt.conf}/sources.list"), private configuration)"
	apt-get -q -o Debug::NoLocking=1 update >"${APT_CONFIG%/apt.conf}/update.log" 2>&1 || {
		cat "${APT_CONFIG%/apt.conf}/update.log" >&2
		die "apt-get update failed"
	}
	! grep -q '^\(W\|E\):' "${APT_CONFIG%/apt.conf}/update.log" || {
		grep '^\(W\|E\):' "${APT_CONFIG%/apt.conf}/update.log" >&2
		die "apt-get update reported problems (see above); refusing to trust the indexes"
	}
}
