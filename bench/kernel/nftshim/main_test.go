package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestInputFile(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "-"}, "-"},
		{[]string{"--check", "-f", "-"}, "-"},
		{[]string{"--file=/tmp/x"}, "/tmp/x"},
		{[]string{"--json", "--terse", "list", "table", "ip", "kube-proxy"}, ""},
		{[]string{"-f"}, ""},
	} {
		if got := inputFile(tc.args); got != tc.want {
			t.Errorf("inputFile(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestCountCmds(t *testing.T) {
	got := countCmds([]byte("add table ip kube-proxy { comment \"x\" ; }\nflush chain ip kube-proxy a\n\nadd rule ip kube-proxy a jump b\n# c\ndelete chain ip kube-proxy z\n"))
	want := map[string]int{"add": 2, "flush": 1, "delete": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("countCmds = %v, want %v", got, want)
	}
}

// TestRecordFormat pins the JSON field names that ../nftlog.go parses.
func TestRecordFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	rec := record{StartNS: 1, EndNS: 2, UserUS: 3, SysUS: 4, Exit: 1, Args: []string{"-f", "-"}, InputBytes: 5, Cmds: map[string]int{"add": 6}, PID: 7}
	if err := appendRecord(path, rec); err != nil {
		t.Fatal(err)
	}
	if err := appendRecord(path, rec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start_ns":1,"end_ns":2,"user_us":3,"sys_us":4,"exit":1,"args":["-f","-"],"input_bytes":5,"cmds":{"add":6},"pid":7}` + "\n"
	if string(data) != want+want {
		t.Errorf("log = %q, want two lines of %q", data, want)
	}
	var back record
	if err := json.Unmarshal([]byte(want), &back); err != nil || !reflect.DeepEqual(back, rec) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
