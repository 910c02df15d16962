package main

import (
	"bytes"
	"testing"
)

// A flexible response header ends after its tagged fields; what follows is the body.
func TestSkipTaggedFields(t *testing.T) {
	body := []byte{0xb0, 0xd7}
	for _, tc := range []struct {
		name   string
		header []byte
		ok     bool
	}{
		{"none", []byte{0}, true},
		{"one of 3 bytes", []byte{1, 0, 3, 'a', 'b', 'c'}, true},
		{"two, one empty", []byte{2, 0, 0, 1, 2, 'x', 'y'}, true},
		{"a tag past 127", []byte{1, 0x80, 0x01, 1, 'z'}, true},
		{"no count", nil, false},
		{"a field longer than what is left", []byte{1, 0, 9, 'a'}, false},
		{"a field without its size", []byte{1, 5}, false},
	} {
		in := append(append([]byte(nil), tc.header...), body...)
		if !tc.ok {
			in = tc.header
		}
		rest, err := skipTaggedFields(in)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.ok && !bytes.Equal(rest, body):
			t.Errorf("%s: body %x, want %x", tc.name, rest, body)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted, leaving %x", tc.name, rest)
		}
	}
}
