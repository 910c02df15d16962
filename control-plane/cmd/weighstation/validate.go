package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// validate prints every error as FILE:LINE:COL: field.path: reason and exits 1 on any. Warnings
// (FILE:LINE:COL: warning: field.path: reason) leave the directory valid.
func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: weighstation validate DIR")
		return 2
	}
	dir := fs.Arg(0)
	set, err := policy.LoadDir(dir)
	if err != nil {
		var perrs policy.Errors
		if errors.As(err, &perrs) {
			for _, e := range perrs {
				fmt.Fprintln(stderr, e.Error())
			}
			fmt.Fprintf(stderr, "%s: %d error(s)\n", dir, len(perrs))
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", dir, err)
		}
		return 1
	}
	for _, w := range set.Warnings {
		fmt.Fprintln(stderr, w.Warning())
	}
	fmt.Fprintf(stdout, "%s: valid (%d tenants, default %q, sha256 %s)", dir, len(set.Tenants), set.DefaultTenant, set.Hash[:12])
	if n := len(set.Warnings); n > 0 {
		fmt.Fprintf(stdout, ", %d warning(s)", n)
	}
	fmt.Fprintln(stdout)
	return 0
}
