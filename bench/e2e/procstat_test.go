package e2e

import "testing"

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as a process may choose.
	line := "4242 (kube (proxy) x) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 890 12 20 0 12 0 9999 812345344 20480 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := ParseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "kube (proxy) x" || st.UTime != 1234 || st.STime != 567 || st.CUTime != 890 || st.CSTime != 12 || st.RSSPages != 20480 {
		t.Errorf("got %+v", st)
	}
	if got := st.CPUSeconds(100); got != 18.01 {
		t.Errorf("CPUSeconds = %v, want 18.01", got)
	}
	if got := st.ChildCPUSeconds(100); got != 9.02 {
		t.Errorf("ChildCPUSeconds = %v, want 9.02", got)
	}
	for _, bad := range []string{"", "4242 kube-proxy S 1", "4242 (kp) S 1 2 3", "4242 (kp) S 1 4242 4242 0 -1 4194560 9000 0 0 0 x 567 0 0 20 0 12 0 9999 812345344 20480 1"} {
		if _, err := ParseProcStat(bad); err == nil {
			t.Errorf("ParseProcStat(%q) did not fail", bad)
		}
	}
}

func TestStatusKiB(t *testing.T) {
	status := "Name:\tkube-proxy\nVmPeak:\t 1000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   70000 kB\nThreads:\t12\n"
	if v, err := StatusKiB(status, "VmHWM"); err != nil || v != 81234 {
		t.Errorf("VmHWM = %d, %v", v, err)
	}
	if v, err := StatusKiB(status, "VmRSS"); err != nil || v != 70000 {
		t.Errorf("VmRSS = %d, %v", v, err)
	}
	if _, err := StatusKiB(status, "VmSwap"); err == nil {
		t.Error("a missing key did not fail")
	}
	if _, err := StatusKiB(status, "Threads"); err == nil {
		t.Error("a value without kB did not fail")
	}
}
