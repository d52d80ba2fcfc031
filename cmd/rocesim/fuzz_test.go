package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rocesim/rocesim/wire/capture"
)

// FuzzInspectFrame: any frame is classified and rendered as text and as
// valid JSON without panicking, and the text is one line.
func FuzzInspectFrame(f *testing.F) {
	for _, path := range realCaptures(f) {
		for _, fr := range readFrames(f, path) {
			f.Add(fr.data)
		}
	}
	rd, err := capture.Open("../../wire/testdata/ud_send.pcap")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rd.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		var text, js bytes.Buffer
		in := &inspector{rd: rd, name: "fuzz", out: bufio.NewWriter(&text)}
		in.sum.Frames = 1
		rec := capture.Record{Data: data, OrigLen: len(data), LinkType: capture.LinkTypeEthernet}
		v, derr := in.classify(&rec)
		in.writeText(&rec, v, derr)
		in.out.Flush()
		if bytes.Count(text.Bytes(), []byte("\n")) != 1 {
			t.Fatalf("text is not one line: %q", text.String())
		}
		in.out = bufio.NewWriter(&js)
		in.enc = json.NewEncoder(in.out)
		if err := in.writeJSON(&rec, v, derr); err != nil {
			t.Fatal(err)
		}
		in.out.Flush()
		if !json.Valid(js.Bytes()) {
			t.Fatalf("invalid JSON: %s", js.String())
		}
	})
}
