// Command schemagen derives, from the CRDs controller-gen writes from control-plane/api/v1alpha1,
// the policy files' JSON Schema and the field tables of the policy reference: one source for
// the three (`make generate`; `make check-generated` fails when a committed copy is stale).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	crdDir := flag.String("crds", "", "directory of the generated CRDs")
	schemaFile := flag.String("schema", "", "the policy files' JSON Schema to write")
	referenceFile := flag.String("reference", "", "the policy reference whose generated tables to rewrite")
	check := flag.Bool("check", false, "write nothing; fail if a file differs from what would be written")
	flag.Parse()
	if *crdDir == "" || *schemaFile == "" || *referenceFile == "" {
		fmt.Fprintln(os.Stderr, "usage: schemagen -crds DIR -schema FILE -reference FILE [-check]")
		os.Exit(2)
	}
	crds, err := loadCRDs(*crdDir)
	if err != nil {
		fail(err)
	}
	schema, err := fileSchema(crds)
	if err != nil {
		fail(err)
	}
	oldReference, err := os.ReadFile(*referenceFile)
	if err != nil {
		fail(err)
	}
	reference, err := rewriteReference(oldReference, crds)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *referenceFile, err))
	}
	stale := false
	for _, out := range []struct {
		path string
		body []byte
	}{{*schemaFile, schema}, {*referenceFile, reference}} {
		if *check {
			old, _ := os.ReadFile(out.path)
			if !bytes.Equal(old, out.body) {
				fmt.Fprintf(os.Stderr, "schemagen: %s is not what control-plane/api/v1alpha1 generates: run make generate\n", out.path)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(out.path, out.body, 0o644); err != nil {
			fail(err)
		}
	}
	if stale {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "schemagen:", err)
	os.Exit(1)
}
