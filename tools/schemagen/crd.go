package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// crd is the part of a CustomResourceDefinition schemagen reads.
type crd struct {
	Spec struct {
		Names struct {
			Kind string `yaml:"kind"`
		} `yaml:"names"`
		Group    string `yaml:"group"`
		Versions []struct {
			Name   string `yaml:"name"`
			Schema struct {
				OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
			} `yaml:"schema"`
		} `yaml:"versions"`
	} `yaml:"spec"`
}

// kinds maps each kind to its v1alpha1 schema.
type kinds map[string]map[string]any

func loadCRDs(dir string) (kinds, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	out := kinds{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range c.Spec.Versions {
			if v.Name == "v1alpha1" {
				out[c.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	for _, k := range []string{"LimitPolicy", "GatewayDefaults"} {
		if out[k] == nil {
			return nil, fmt.Errorf("no v1alpha1 %s CRD in %s", k, dir)
		}
	}
	return out, nil
}

// child follows a path of property names through an OpenAPI schema ("[]" steps into items).
func child(s map[string]any, path ...string) map[string]any {
	for _, p := range path {
		if s == nil {
			return nil
		}
		if p == "[]" {
			s, _ = s["items"].(map[string]any)
			continue
		}
		props, _ := s["properties"].(map[string]any)
		s, _ = props[p].(map[string]any)
	}
	return s
}
