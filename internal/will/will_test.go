package will

import (
	"bytes"
	"strings"
	"testing"
)

// TestKeeper: records set, replace and take out frames by key; the will
// reads in key order; the void record empties it and says so, and a
// frame set after it makes it a will again. A malformed record is an
// error that keeps what was read.
func TestKeeper(t *testing.T) {
	frame := func(s string) []byte { return []byte(s) }
	var b []byte
	b = Append(b, []Entry{{Key: 9, Frame: frame("nine")}, {Key: 2, Frame: frame("two")}, {Key: 5, Frame: frame("five")}})
	b = Append(b, []Entry{{Key: 2, Frame: frame("TWO")}, {Key: 5}})
	var k Keeper
	if err := k.Read(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if got := string(bytes.Join(k.Frames(), []byte(","))); got != "TWO,nine" || k.Void() {
		t.Errorf("will %q void %v, want TWO,nine and not void", got, k.Void())
	}
	if err := k.Read(bytes.NewReader(AppendVoid(nil))); err != nil || !k.Void() || len(k.Frames()) != 0 {
		t.Errorf("after the void record: %v, void %v, %d frames", err, k.Void(), len(k.Frames()))
	}
	if err := k.Read(bytes.NewReader(Append(nil, []Entry{{Key: 1, Frame: frame("one")}}))); err != nil || k.Void() || len(k.Frames()) != 1 {
		t.Errorf("a frame after the void: %v, void %v, %d frames", err, k.Void(), len(k.Frames()))
	}
	for _, c := range []struct {
		name string
		b    []byte
		err  string
	}{
		{"short length", []byte{0, 0, 0, 2, 1, 2}, "a record of 2 bytes"},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, "a record of 4294967295 bytes"},
		{"cut short", []byte{0, 0, 0, 9, 0, 0, 0, 1, 'x'}, "cut short"},
		{"cut in the length", []byte{0, 0}, "unexpected EOF"},
	} {
		var k Keeper
		if err := k.Read(bytes.NewReader(append(Append(nil, []Entry{{Key: 3, Frame: frame("three")}}), c.b...))); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
		if len(k.Frames()) != 1 {
			t.Errorf("%s: the record before it was lost", c.name)
		}
	}
}
