package main

import (
	"strings"
	"testing"
	"time"
)

const sampleLog = `{"start_ns":1000000000,"end_ns":1002000000,"user_us":1000,"sys_us":500,"exit":0,"args":["--version"],"input_bytes":0,"cmds":null,"pid":1}
{"start_ns":1010000000,"end_ns":1015000000,"user_us":2000,"sys_us":1000,"exit":1,"args":["--json","list","set","ip","kube-proxy","cluster-ips"],"input_bytes":0,"cmds":null,"pid":2}

{"start_ns":1020000000,"end_ns":1120000000,"user_us":30000,"sys_us":60000,"exit":0,"args":["-f","-"],"input_bytes":4096,"cmds":{"add":40,"flush":10,"delete":2},"pid":3}
{"start_ns":1130000000,"end_ns":1140000000,"user_us":4000,"sys_us":3000,"exit":0,"args":["--json","--terse","list","table","ip","kube-proxy"],"input_bytes":0,"cmds":null,"pid":4}
{"start_ns":1150000000,"end_ns":1151000000,"user_us":100,"sys_us":100,"exit":0,"args":["--check","-f","-"],"input_bytes":10,"cmds":{"add":1},"pid":5}
{"start_ns":2000000000,"end_ns":2300000000,"user_us":1,"sys_us":1,"exit":1,"args":["-f","-"],"input_bytes":1,"cmds":{"add":1},"pid":6}
`

func TestParseNFTLog(t *testing.T) {
	invs, err := ParseNFTLog(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 6 {
		t.Fatalf("parsed %d invocations, want 6", len(invs))
	}
	if invs[2].Cmds["add"] != 40 || invs[2].InputBytes != 4096 || invs[2].Wall() != 100*time.Millisecond {
		t.Errorf("third invocation parsed as %+v", invs[2])
	}
}

func TestParseNFTLogTruncatedLastLine(t *testing.T) {
	invs, err := ParseNFTLog(strings.NewReader(sampleLog + `{"start_ns":3,"end_`))
	if err != nil || len(invs) != 6 {
		t.Fatalf("truncated last line: %d invocations, err %v", len(invs), err)
	}
	if _, err := ParseNFTLog(strings.NewReader(`{"start_ns":3,"end_` + "\n" + sampleLog)); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("malformed first line: err %v, want one naming line 1", err)
	}
	if _, err := ParseNFTLog(strings.NewReader(`{"start_ns":3,"end_ns":2}`)); err == nil {
		t.Error("end before start: no error")
	}
}

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "-"}, KindWrite},
		{[]string{"--file=/tmp/x"}, KindWrite},
		{[]string{"--check", "-f", "-"}, KindCheck},
		{[]string{"-c", "-f", "-"}, KindCheck},
		{[]string{"--json", "--terse", "list", "table", "ip", "kube-proxy"}, KindRead},
		{[]string{"list", "ruleset"}, KindRead},
		{[]string{"--version"}, KindVersion},
		{[]string{"add", "table", "ip", "x"}, KindWrite},
		{[]string{"delete", "table", "ip", "x"}, KindWrite},
		{[]string{"-j", "add", "table", "ip", "x"}, KindWrite},
		{[]string{"monitor"}, KindOther},
		{nil, KindOther},
	} {
		if got := (Invocation{Args: tc.args}).Kind(); got != tc.want {
			t.Errorf("Kind(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestSummarizeNFT(t *testing.T) {
	invs, err := ParseNFTLog(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	// The window holds the first five; the failed write at 2 s is outside.
	s := SummarizeNFT(invs, 1000000000, 1500000000)
	want := NFTStats{
		Count: 5, Writes: 1, Reads: 2, Checks: 1, FailedOther: 1,
		MaxWrite: 100 * time.Millisecond, MaxRead: 10 * time.Millisecond, MaxAny: 100 * time.Millisecond,
		Total: 118 * time.Millisecond, WriteTotal: 100 * time.Millisecond, ReadTotal: 15 * time.Millisecond,
		User: 37100 * time.Microsecond, Sys: 64600 * time.Microsecond, WriteCmds: 52, WriteBytes: 4096,
	}
	if s != want {
		t.Errorf("SummarizeNFT =\n%+v\nwant\n%+v", s, want)
	}
	all := SummarizeNFT(invs, 0, 1<<62)
	if all.Count != 6 || all.FailedWrites != 1 || all.MaxWrite != 300*time.Millisecond {
		t.Errorf("whole log: %+v", all)
	}
	// One that starts inside and ends after belongs to the next sync.
	if cut := SummarizeNFT(invs, 1000000000, 1100000000); cut.Count != 2 || cut.Writes != 0 {
		t.Errorf("window ending mid-write: %+v", cut)
	}
	if none := SummarizeNFT(invs, 5e9, 6e9); none.Count != 0 {
		t.Errorf("empty window: %+v", none)
	}
}
