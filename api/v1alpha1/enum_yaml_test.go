// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every enum value of every CRD spec field is read back as that string when a user writes it
// unquoted in a manifest, as kubectl's YAML 1.1 decoder reads it: "Off", "On", "Yes" or
// "No" would be a boolean, which the API refuses with a message about types that does not
// say to quote the value (the kernel lab's effect experiment fell into it with
// memoryPolicy: Off).
func TestEnumValuesSurviveUnquotedYAML(t *testing.T) {
	crds, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs under config/crd/bases: %v", err)
	}
	checked := 0
	for _, path := range crds {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, value := range specEnumValues(crd) {
			checked++
			var doc map[string]any
			if err := yaml.Unmarshal([]byte("field: "+value), &doc); err != nil {
				t.Errorf("%s: enum value %q unquoted: %v", filepath.Base(path), value, err)
				continue
			}
			if got, ok := doc["field"].(string); !ok || got != value {
				t.Errorf("%s: enum value %q written unquoted reads back as %#v (%T): a user's manifest would be refused",
					filepath.Base(path), value, doc["field"], doc["field"])
			}
		}
	}
	if checked == 0 {
		t.Fatal("the CRDs have no enum values: the walk found nothing to check")
	}
}

// specEnumValues are the enum values under each version's spec: what users write (status
// is written by the agents, and its conditions' True and False are metav1.Condition's).
func specEnumValues(crd map[string]any) []string {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	var out []string
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		props, _ := root["properties"].(map[string]any)
		out = append(out, enumValues(props["spec"])...)
	}
	return out
}

// enumValues are the string members of every "enum" list under node.
func enumValues(node any) []string {
	var out []string
	switch n := node.(type) {
	case map[string]any:
		for key, child := range n {
			if list, ok := child.([]any); ok && key == "enum" {
				for _, v := range list {
					out = append(out, fmt.Sprint(v))
				}
				continue
			}
			out = append(out, enumValues(child)...)
		}
	case []any:
		for _, child := range n {
			out = append(out, enumValues(child)...)
		}
	}
	return out
}
