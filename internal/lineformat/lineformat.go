// Package lineformat is the tokenizer of rocesim's line-based text formats:
// the fault plans of package faults and the scenario files of package
// scenario (whose fault lines are fault plans). Both read a line as
// words separated by white space, cut at '#', with words of the form
// key=value, and report a problem at the 1-based line and column (in
// characters) of the word at fault. Having one tokenizer keeps the two
// formats' words and columns the same: a scenario's fault line is handed
// to faults.Parse and its error columns are shifted, not recounted.
//
// The package is internal: it is the formats' shared lexical layer, not
// an API. Each format keeps its own grammar and its own ParseError type.
package lineformat

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Token is one word of a line.
type Token struct {
	// Text is the word, without the white space around it.
	Text string
	// Col is the 1-based column of its first character, counted in
	// characters (runes), as an editor shows it.
	Col int
	// Off is the byte offset of its first byte in the line, for formats
	// that take the rest of the line as it is (a description, a fault).
	Off int
}

// isSpace reports the separators between words: ASCII white space. '\r'
// is one, so a CRLF line ends like an LF line.
func isSpace(c rune) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// Tokenize splits line into words at white space, up to a '#' (a comment
// runs to the end of the line). A line of white space or comment alone
// has no tokens.
func Tokenize(line string) []Token {
	var toks []Token
	start, startCol, col := -1, 0, 0
	for i, c := range line {
		col++
		if c == '#' || isSpace(c) {
			if start >= 0 {
				toks = append(toks, Token{line[start:i], startCol, start})
				start = -1
			}
			if c == '#' {
				return toks
			}
			continue
		}
		if start < 0 {
			start, startCol = i, col
		}
	}
	if start >= 0 {
		toks = append(toks, Token{line[start:], startCol, start})
	}
	return toks
}

// KeyValue splits a key=value word at its first '='. ok is false for a
// bare word (key is then the whole word). valCol is the column of the
// value's first character, where an error about the value points.
func (t Token) KeyValue() (key, val string, valCol int, ok bool) {
	key, val, ok = strings.Cut(t.Text, "=")
	if !ok {
		return t.Text, "", 0, false
	}
	return key, val, t.Col + utf8.RuneCountInString(key) + 1, true
}

// ErrorText is the text of a positioned error in every line format:
// "line:col: message", both 1-based.
func ErrorText(line, col int, msg string) string {
	return strconv.Itoa(line) + ":" + strconv.Itoa(col) + ": " + msg
}
