package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const capFile = "../../wire/testdata/ud_send.pcap"
	notCapture := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notCapture, []byte("not a capture\n"), 0o644)
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // substring; "" checks the stream is empty
		stderr string
		exact  bool
	}{
		{nil, exitUsage, "", "Usage:", false},
		{[]string{"help"}, exitOK, "rocesim inspect [flags] FILE", "", false},
		{[]string{"--help"}, exitOK, "Usage:", "", false},
		{[]string{"help", "inspect"}, exitOK, "Usage: rocesim inspect", "", false},
		{[]string{"help", "demo"}, exitOK, "Usage: rocesim demo", "", false},
		{[]string{"help", "nope"}, exitUsage, "", `unknown command "nope"`, false},
		{[]string{"nope"}, exitUsage, "", `unknown command "nope"`, false},
		{[]string{"demo"}, exitOK, "NAK(seq) psn=2", "", false},
		{[]string{"demo", "--quiet"}, exitOK, "go-back-n: 2 completions, 2 IBV_WC_SUCCESS", "", false},
		{[]string{"demo", "rnr"}, exitUsage, "", "takes no scenario (it is go-back-n)", false},
		{[]string{"inspect"}, exitUsage, "", "want exactly one FILE, got 0", false},
		{[]string{"inspect", capFile, capFile}, exitUsage, "", "want exactly one FILE, got 2", false},
		{[]string{"inspect", "--bogus", capFile}, exitUsage, "", "flag provided but not defined: --bogus", false},
		{[]string{"inspect", "-h"}, exitOK, "Usage: rocesim inspect", "", false},
		{[]string{"inspect", "does-not-exist.pcap"}, exitUsage, "", "does-not-exist.pcap: no such file", false},
		{[]string{"inspect", notCapture}, exitUsage, "", "not a pcap or pcapng file (starts with 6e 6f 74 20)", false},
		{[]string{"inspect", capFile}, exitOK, "# ../../wire/testdata/ud_send.pcap (pcap): time is seconds since frame 1, at 20", "", false},
		{[]string{"inspect", capFile, "--json"}, exitOK, `{"index":1,`, "", false},
		{[]string{"inspect", "-json", capFile}, exitOK, `{"index":1,`, "", false},
		{[]string{"inspect", "--", capFile}, exitOK, "# 40 frames: 10 RoCE (0 bad), 30 non-RoCE\n", "", false},
	} {
		code, out, errOut := runCmd(c.args...)
		name := strings.Join(c.args, " ")
		if code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", name, code, c.code, errOut)
		}
		for _, s := range []struct{ got, want, which string }{{out, c.stdout, "stdout"}, {errOut, c.stderr, "stderr"}} {
			switch {
			case s.want == "" && s.got != "":
				t.Errorf("%q: %s not empty: %q", name, s.which, s.got)
			case c.exact && s.which == "stdout" && s.got != s.want:
				t.Errorf("%q: stdout %q, want %q", name, s.got, s.want)
			case !strings.Contains(s.got, s.want):
				t.Errorf("%q: %s lacks %q:\n%s", name, s.which, s.want, s.got)
			}
		}
	}
}
