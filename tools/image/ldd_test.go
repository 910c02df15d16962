package main

import "testing"

// Each kind of line ldd prints: a library and where it is, the loader, the vDSO (the kernel's,
// not a file), a path through $ORIGIN (cleaned, as the image stores it), a library not found.
func TestLddPath(t *testing.T) {
	for _, c := range []struct {
		line, want string
		err        bool
	}{
		{line: "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f60f1d3e000)", want: "/lib/x86_64-linux-gnu/libc.so.6"},
		{line: "\t/lib64/ld-linux-x86-64.so.2 (0x00007f60f90e0000)", want: "/lib64/ld-linux-x86-64.so.2"},
		{line: "\tlinux-vdso.so.1 (0x00007f60f90de000)"},
		{line: "\tlibjli.so => /usr/lib/jvm/java-17-openjdk-amd64/bin/../lib/libjli.so (0x00007f1)", want: "/usr/lib/jvm/java-17-openjdk-amd64/lib/libjli.so"},
		{line: "\tlibjvm.so => not found", err: true},
		{line: "\tstatically linked"},
		{line: ""},
	} {
		got, err := lddPath(c.line)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%q: %q, %v; want %q (error: %v)", c.line, got, err, c.want, c.err)
		}
	}
}
