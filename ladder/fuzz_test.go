package ladder_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/sim"
)

// FuzzRender: any selection of real events, some of them damaged (a
// trace cut short, filtered, or from a future emitter), draws without
// panicking, within the width, as well-formed XML.
func FuzzRender(f *testing.F) {
	var pool []sim.Event
	for _, sc := range []scenario{
		{plan: "drop psn=101 tx=1 src=a"},
		{plan: "dup psn=100 src=a\ndelay 3us psn=102 src=a\nreorder n=1 psn=101 src=a\ncorrupt class=ack first=1\n", sw: true},
		{plan: "drop link=b-sw psn=101 tx=1\ndown link=a-sw from=5us to=6us", sw: true, hosts: 3},
		{plan: "drop src=a psn=101", retry: 1},
	} {
		pool = append(pool, run(f, sc).Events()...)
	}
	f.Add([]byte{})
	f.Add([]byte{0x01})
	f.Add([]byte{0x55, 0xAA, 0x0F})
	f.Add([]byte{0x00, 0xFF, 0x00, 0xFE, 0x00, 0xFD})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := &sim.Trace{}
		for i, e := range pool {
			var c byte
			if len(data) > 0 {
				c = data[i%len(data)] ^ byte(i/len(data))
			}
			switch {
			case c&0x80 != 0 && c&0x01 != 0:
				continue // left out
			case c == 0xFE:
				e.Node = ""
			case c == 0xFC:
				e.Fields = e.Fields[:len(e.Fields)/2]
			case c == 0xFA:
				e.Kind = "frame-tx"
			}
			tr.Add(e)
		}
		width := 40
		if len(data) > 0 {
			width += int(data[0]) % 120
		}
		var b strings.Builder
		if err := ladder.Text(&b, tr, ladder.Options{Width: width, Color: len(data)%2 == 1}); err != nil {
			t.Fatal(err)
		}
		if len(data)%2 == 0 {
			for _, l := range strings.Split(b.String(), "\n") {
				if utf8.RuneCountInString(l) > width {
					t.Fatalf("line wider than %d: %q", width, l)
				}
			}
		}
		var s bytes.Buffer
		if err := ladder.SVG(&s, tr, ladder.Options{}, "fuzz"); err != nil {
			t.Fatal(err)
		}
		validXML(t, s.Bytes())
	})
}
