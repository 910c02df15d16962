// Command k6 is k6 v1.8.1 with the weighstation extension (k6/x/weighstation) built in — what
// xk6 would produce, by a plain go build.
package main

import (
	"go.k6.io/k6/cmd"

	_ "github.com/weighstation/weighstation/load-tests/k6"
)

func main() { cmd.Execute() }
