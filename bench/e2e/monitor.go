package e2e

import "strings"

// Element is one map or set element that `nft monitor` reported added.
type Element struct {
	Family, Table, Set string
	Key                string // the key as nft prints it, for example "fd00:96::5 . tcp . 80"
}

// ParseMonitorLine parses one line of `nft monitor new elements`, for example
//
//	add element ip6 kube-proxy service-ips { fd00:96::5 . tcp . 80 : goto service-X }
//
// into its elements (several when nft prints a batch on one line). A line that does not add
// elements returns none.
func ParseMonitorLine(line string) []Element {
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "add" || f[1] != "element" || f[5] != "{" {
		return nil
	}
	body := strings.TrimSpace(line[strings.Index(line, "{")+1:])
	body = strings.TrimSpace(strings.TrimSuffix(body, "}"))
	var out []Element
	for _, e := range splitTop(body) {
		key, _, _ := strings.Cut(e, " : ")
		key = strings.TrimSpace(key)
		if key != "" {
			out = append(out, Element{Family: f[2], Table: f[3], Set: f[4], Key: key})
		}
	}
	return out
}

// splitTop splits s on the commas that are not inside braces (a verdict map's value may be an
// anonymous set).
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
