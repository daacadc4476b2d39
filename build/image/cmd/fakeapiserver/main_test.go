package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestListsAndWatches(t *testing.T) {
	srv := httptest.NewServer(&server{node: "n1", nodeIP: "127.0.0.1", logf: t.Logf})
	defer srv.Close()

	get := func(path string) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	nodes := get("/api/v1/nodes?fieldSelector=metadata.name%3Dn1")
	if nodes["kind"] != "NodeList" || len(nodes["items"].([]any)) != 1 {
		t.Errorf("nodes: %v", nodes)
	}
	if other := get("/api/v1/nodes?fieldSelector=metadata.name%3Dn2"); len(other["items"].([]any)) != 0 {
		t.Errorf("the field selector was ignored: %v", other)
	}
	if svc := get("/api/v1/services?labelSelector=x"); svc["kind"] != "ServiceList" || len(svc["items"].([]any)) != 0 {
		t.Errorf("services: %v", svc)
	}
	node := get("/api/v1/nodes/n1")
	addr := node["status"].(map[string]any)["addresses"].([]any)[0].(map[string]any)
	if addr["type"] != "InternalIP" || addr["address"] != "127.0.0.1" {
		t.Errorf("node addresses: %v", addr)
	}
	if nf := get("/apis/apps/v1/deployments"); nf["code"] != float64(404) {
		t.Errorf("unknown collection: %v", nf)
	}

	// A streaming list: the items, then the bookmark that ends the initial events; then the
	// watch stays open.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var types []string
	for len(types) < 2 && sc.Scan() {
		var ev struct {
			Type   string
			Object map[string]any
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == "BOOKMARK" {
			ann := ev.Object["metadata"].(map[string]any)["annotations"].(map[string]any)
			if ann["k8s.io/initial-events-end"] != "true" || ev.Object["kind"] != "Node" {
				t.Errorf("bookmark: %v", ev.Object)
			}
		}
	}
	if strings.Join(types, ",") != "ADDED,BOOKMARK" {
		t.Errorf("watch events %v", types)
	}

	// Events are accepted.
	resp2, err := http.Post(srv.URL+"/apis/events.k8s.io/v1/namespaces/default/events", "application/json", strings.NewReader(`{"kind":"Event"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusCreated {
		t.Errorf("event post: %d", resp2.StatusCode)
	}
}
