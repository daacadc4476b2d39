package e2e

import "testing"

func TestParseMonitorLine(t *testing.T) {
	es := ParseMonitorLine("add element ip6 kube-proxy service-ips { fd00:96::5 . tcp . 80 : goto service-ABC-default/s/tcp/http }")
	if len(es) != 1 || es[0].Family != "ip6" || es[0].Table != "kube-proxy" || es[0].Set != "service-ips" || es[0].Key != "fd00:96::5 . tcp . 80" {
		t.Errorf("got %+v", es)
	}
	es = ParseMonitorLine("add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto a, 10.96.0.2 . udp . 53 : goto b }")
	if len(es) != 2 || es[1].Key != "10.96.0.2 . udp . 53" {
		t.Errorf("two elements: %+v", es)
	}
	es = ParseMonitorLine("add element ip kube-proxy cluster-ips { 10.96.0.1 }")
	if len(es) != 1 || es[0].Set != "cluster-ips" || es[0].Key != "10.96.0.1" {
		t.Errorf("set element: %+v", es)
	}
	for _, l := range []string{"", "delete element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto a }", "add rule ip kube-proxy x { }", "# new generation 5"} {
		if es := ParseMonitorLine(l); len(es) != 0 {
			t.Errorf("%q: %+v", l, es)
		}
	}
}
