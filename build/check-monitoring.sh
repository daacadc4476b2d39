#!/usr/bin/env bash
# check-monitoring.sh [--write] checks the alert rules in images/deploy/monitoring/:
#   - prometheusrule.yaml (for the Prometheus Operator) must carry, under spec:, exactly the
#     groups of the plain rule file kube-proxy.rules.yaml (--write regenerates it from them);
#   - promtool (Debian's prometheus package, installed by build/deps.sh test) must parse the
#     rule file (promtool check rules) and pass its unit tests, in which each alert once fires
#     and once does not (promtool test rules kube-proxy.rules.test.yaml).
# Any difference, parse error or failed test exits non-zero.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
dir="$here/../images/deploy/monitoring"
rules="$dir/kube-proxy.rules.yaml" cr="$dir/prometheusrule.yaml"
command -v promtool >/dev/null || die "promtool not found: install Debian's prometheus package (build/deps.sh test does)"

# render prints the PrometheusRule for the groups of the plain rule file.
render() {
	cat <<'HDR'
# The alerts of kube-proxy.rules.yaml as a PrometheusRule for the Prometheus Operator. Generated
# by build/check-monitoring.sh --write from kube-proxy.rules.yaml; edit that file instead.
# Your Prometheus's ruleSelector may need a label (e.g. release: <your release>) added here.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kube-proxy-overlay
  namespace: kube-system
  labels:
    app.kubernetes.io/name: kube-proxy
spec:
HDR
	sed -n '/^groups:/,$p' "$rules" | sed 's/^\(.\)/  \1/'
}

if [ "${1:-}" = "--write" ]; then
	render > "$cr"
	log "wrote $cr"
	exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--write]"
diff -u "$cr" <(render) >&2 || die "$cr does not match $rules (run $0 --write)"
(cd "$dir" && promtool check rules kube-proxy.rules.yaml && promtool test rules kube-proxy.rules.test.yaml)
