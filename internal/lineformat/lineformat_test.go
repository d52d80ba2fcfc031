package lineformat

import (
	"reflect"
	"testing"
)

// TestTokenize pins the words and their columns (in characters) and
// byte offsets: both formats' error positions rest on them.
func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []Token
	}{
		{"", nil},
		{"   # only a comment", nil},
		{"drop psn=2", []Token{{"drop", 1, 0}, {"psn=2", 6, 5}}},
		{"\tdrop  psn=2#tx=1", []Token{{"drop", 2, 1}, {"psn=2", 8, 7}}},
		{"drop psn=2\r", []Token{{"drop", 1, 0}, {"psn=2", 6, 5}}},
		{"description µs → ns x", []Token{{"description", 1, 0}, {"µs", 13, 12}, {"→", 16, 16}, {"ns", 18, 20}, {"x", 21, 23}}},
		{"a\vb\fc", []Token{{"a", 1, 0}, {"b", 3, 2}, {"c", 5, 4}}},
	} {
		if got := Tokenize(tc.line); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Tokenize(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// TestKeyValue checks the split at the first '=' and the value's column,
// where an error about a value points.
func TestKeyValue(t *testing.T) {
	for _, tc := range []struct {
		tok      Token
		key, val string
		valCol   int
		ok       bool
	}{
		{Token{"psn=2", 6, 5}, "psn", "2", 10, true},
		{Token{"µ=é=x", 3, 4}, "µ", "é=x", 5, true},
		{Token{"len=", 1, 0}, "len", "", 5, true},
		{Token{"=5", 1, 0}, "", "5", 2, true},
		{Token{"50us", 7, 6}, "50us", "", 0, false},
	} {
		key, val, col, ok := tc.tok.KeyValue()
		if key != tc.key || val != tc.val || col != tc.valCol || ok != tc.ok {
			t.Errorf("%v.KeyValue() = %q, %q, %d, %v; want %q, %q, %d, %v", tc.tok, key, val, col, ok, tc.key, tc.val, tc.valCol, tc.ok)
		}
	}
}

func TestErrorText(t *testing.T) {
	if got, want := ErrorText(4, 12, "unknown key \"pns\""), `4:12: unknown key "pns"`; got != want {
		t.Errorf("ErrorText = %q, want %q", got, want)
	}
}
