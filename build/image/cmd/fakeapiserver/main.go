// Command fakeapiserver is a tiny stand-in for the Kubernetes API server, just enough for
// kube-proxy to start and program its base rules: it serves one Node, and empty lists of
// Services, EndpointSlices and ServiceCIDRs, with watches that stay open. It speaks JSON over
// plain HTTP, accepts and discards events, and answers everything else with 404.
//
//	fakeapiserver -listen 127.0.0.1:6443 -node NAME [-node-ip 127.0.0.1]
//
// It is for tests only (make verify-image runs it inside a throwaway network namespace).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const resourceVersion = "100"

type server struct {
	node   string
	nodeIP string
	logf   func(format string, a ...any)
}

// list describes one collection the server knows.
type list struct {
	apiVersion string
	kind       string // the list kind, e.g. ServiceList
	items      func(s *server) []any
}

func (s *server) collections() map[string]list {
	none := func(*server) []any { return []any{} }
	return map[string]list{
		"/api/v1/nodes":                                {"v1", "NodeList", func(s *server) []any { return []any{s.nodeObject()} }},
		"/api/v1/services":                             {"v1", "ServiceList", none},
		"/api/v1/endpoints":                            {"v1", "EndpointsList", none},
		"/apis/discovery.k8s.io/v1/endpointslices":     {"discovery.k8s.io/v1", "EndpointSliceList", none},
		"/apis/networking.k8s.io/v1/servicecidrs":      {"networking.k8s.io/v1", "ServiceCIDRList", none},
		"/apis/networking.k8s.io/v1beta1/servicecidrs": {"networking.k8s.io/v1beta1", "ServiceCIDRList", none},
	}
}

func (s *server) nodeObject() map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata": map[string]any{
			"name":              s.node,
			"uid":               "00000000-0000-0000-0000-000000000001",
			"resourceVersion":   resourceVersion,
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":            map[string]string{"kubernetes.io/hostname": s.node, "kubernetes.io/os": "linux"},
		},
		"spec": map[string]any{},
		"status": map[string]any{
			"addresses": []map[string]string{
				{"type": "InternalIP", "address": s.nodeIP},
				{"type": "Hostname", "address": s.node},
			},
			"conditions": []map[string]string{{"type": "Ready", "status": "True"}},
		},
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func status(code int, reason, msg string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"message": msg, "reason": reason, "code": code,
	}
}

// matches applies the only field selector kube-proxy sends for a collection it lists here:
// metadata.name=NAME on nodes.
func matches(obj any, fieldSelector string) bool {
	if fieldSelector == "" {
		return true
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return true
	}
	for _, term := range strings.Split(fieldSelector, ",") {
		if v, ok := strings.CutPrefix(term, "metadata.name="); ok {
			if m["metadata"].(map[string]any)["name"] != v {
				return false
			}
		}
	}
	return true
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.logf("%s %s", r.Method, r.URL.RequestURI())
	p := strings.TrimSuffix(r.URL.Path, "/")

	switch {
	case p == "/version":
		writeJSON(w, 200, map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.3-fake", "platform": "linux/amd64"})
		return
	case p == "/healthz" || p == "/livez" || p == "/readyz":
		w.Write([]byte("ok"))
		return
	case r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut:
		// Events (kube-proxy's birth cry and others): accept and echo back.
		if strings.Contains(p, "/events") {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var obj map[string]any
			if json.Unmarshal(body, &obj) != nil || obj == nil {
				obj = map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": map[string]any{"name": "event"}}
			}
			writeJSON(w, http.StatusCreated, obj)
			return
		}
		writeJSON(w, 405, status(405, "MethodNotAllowed", "this fake server only accepts events"))
		return
	}

	if p == "/api/v1/nodes/"+s.node {
		writeJSON(w, 200, s.nodeObject())
		return
	}
	c, ok := s.collections()[p]
	if !ok {
		writeJSON(w, 404, status(404, "NotFound", "the fake API server does not serve "+p))
		return
	}
	var items []any
	for _, it := range c.items(s) {
		if matches(it, q.Get("fieldSelector")) {
			items = append(items, it)
		}
	}
	if items == nil {
		items = []any{}
	}
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.watch(w, r, c, items, q.Get("sendInitialEvents") == "true")
		return
	}
	writeJSON(w, 200, map[string]any{
		"apiVersion": c.apiVersion,
		"kind":       c.kind,
		"metadata":   map[string]any{"resourceVersion": resourceVersion},
		"items":      items,
	})
}

// watch streams watch events as JSON lines. With sendInitialEvents (the streaming-list form of
// a list), it sends the items as ADDED and then the bookmark that ends the initial list. Then it
// keeps the connection open, with a periodic bookmark, until the client goes away or asks for
// a timeout.
func (s *server) watch(w http.ResponseWriter, r *http.Request, c list, items []any, initial bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	bookmark := func(initialEnd bool) {
		md := map[string]any{"resourceVersion": resourceVersion}
		if initialEnd {
			md["annotations"] = map[string]string{"k8s.io/initial-events-end": "true"}
		}
		kind := strings.TrimSuffix(c.kind, "List")
		enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"apiVersion": c.apiVersion, "kind": kind, "metadata": md}})
	}
	if initial {
		for _, it := range items {
			enc.Encode(map[string]any{"type": "ADDED", "object": it})
		}
		bookmark(true)
	}
	if fl != nil {
		fl.Flush()
	}
	timeout := 10 * time.Minute
	if t := r.URL.Query().Get("timeoutSeconds"); t != "" {
		if d, err := time.ParseDuration(t + "s"); err == nil && d > 0 {
			timeout = d
		}
	}
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	end := time.After(timeout)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end:
			return
		case <-tick.C:
			if r.URL.Query().Get("allowWatchBookmarks") == "true" {
				bookmark(false)
				if fl != nil {
					fl.Flush()
				}
			}
		}
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6443", "address to listen on (loopback only)")
	node := flag.String("node", "", "the node name kube-proxy runs as (its --hostname-override)")
	nodeIP := flag.String("node-ip", "127.0.0.1", "the node's InternalIP")
	verbose := flag.Bool("v", false, "log every request")
	ready := flag.String("ready-file", "", "write this file once listening")
	flag.Parse()
	if *node == "" {
		log.Fatal("fakeapiserver: -node is required")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("fakeapiserver: -listen %q must be a loopback address", *listen)
	}
	s := &server{node: *node, nodeIP: *nodeIP, logf: func(string, ...any) {}}
	if *verbose {
		s.logf = log.Printf
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("fakeapiserver: %v", err)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			log.Fatalf("fakeapiserver: %v", err)
		}
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatalf("fakeapiserver: %v", err)
	}
}
