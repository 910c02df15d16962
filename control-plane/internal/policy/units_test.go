package policy

import "testing"

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"256KiB", 256 << 10, true}, {"8MiB", 8 << 20, true},
		{"2GiB", 2 << 30, true}, {"1.5MiB", 0, false}, {"1 MiB", 0, false}, {"MiB", 0, false},
		{"-1", 0, false}, {"20000000000GiB", 0, false}, {"1MB", 0, false},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
