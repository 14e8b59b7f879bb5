// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package status holds what the agent and the summarizer share of the statuses they write
// and read: the conversion of a typed status into its apply configuration, and the counts
// by reason of a report's entry.
package status

import (
	"encoding/json"
	"fmt"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// ApplyConfigOf converts a typed API value into its generated apply configuration; the two
// share their JSON form field for field. Empty objects (a zero struct such as totals of an
// idle node) are left out: the apply request would carry them as null, which the schema
// refuses, and leaving them out means the same to server-side apply.
func ApplyConfigOf[T any](v any) (*T, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	if data, err = json.Marshal(pruneEmpty(m)); err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("converting %T into its apply configuration: %w", v, err)
	}
	return out, nil
}

// pruneEmpty drops the keys of m, at any depth, whose value is an empty object.
func pruneEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		switch t := v.(type) {
		case map[string]any:
			if len(pruneEmpty(t)) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range t {
				if em, ok := e.(map[string]any); ok {
					pruneEmpty(em)
				}
			}
		}
	}
	return m
}

// ReasonLists are a report entry's counts by reason: containers skipped, tasks refused
// and containers without effect. The agent adds up its problems from them, and the
// summarizer checks and adds up every one of them.
func ReasonLists(e *numav1.PreferenceReport) [][]numav1.ReasonCount {
	return [][]numav1.ReasonCount{e.Skipped, e.Failed, e.Ineffective}
}
