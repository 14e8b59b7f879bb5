// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/statefile"
)

// The automatic modes' sticky choices live beside the ledger in their own small file,
// written (atomically) before the SETs that act on a new choice: an agent that restarts,
// crashes or is upgraded gives every running pod the node it had, never a new one.

const choicesVersion = 1

// choicesFile is the choices' file; what is in it is written sorted, so an unchanged set
// of choices writes the same bytes.
func choicesFile(path string) statefile.File[choicesPayload] {
	return statefile.File[choicesPayload]{Path: path, Version: choicesVersion, Limit: stateFileLimit}
}

type choicesPayload struct {
	Choices []plan.Choice `json:"choices"`
}

// loadChoices reads the choices at path; a missing file holds none. A damaged one yields
// none and an error.
func loadChoices(path string) (plan.Choices, error) {
	out := plan.Choices{}
	if path == "" {
		return out, nil
	}
	f, _, err := choicesFile(path).Load() // never through a link
	if err != nil {
		return out, fmt.Errorf("placement choices %s are unusable (%w); placing pods anew", path, err)
	}
	for _, c := range f.Choices {
		if c.PodUID != "" && c.Group != "" && c.Node >= 0 {
			out[c.ChoiceKey] = c
		}
	}
	return out, nil
}

// saveChoices writes choices to the file at path.
func saveChoices(path string, choices plan.Choices) error {
	var f choicesPayload
	for _, c := range choices {
		f.Choices = append(f.Choices, c)
	}
	slices.SortFunc(f.Choices, func(a, b plan.Choice) int {
		return strings.Compare(string(a.PodUID)+a.Group, string(b.PodUID)+b.Group)
	})
	return choicesFile(path).Save(f)
}
