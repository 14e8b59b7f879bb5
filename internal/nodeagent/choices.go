package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// The automatic modes' sticky choices live beside the ledger in their own small file,
// written (atomically) before the SETs that act on a new choice: an agent that restarts,
// crashes or is upgraded gives every running pod the node it had, never a new one.

const choicesVersion = 1

type choicesFile struct {
	Version int           `json:"version"`
	Choices []plan.Choice `json:"choices"`
}

// loadChoices reads the choices at path; a missing file holds none. A damaged one yields
// none and an error.
func loadChoices(path string) (plan.Choices, error) {
	out := plan.Choices{}
	if path == "" {
		return out, nil
	}
	data, err := fsutil.ReadStateFile(path, stateFileLimit) // never through a link
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("reading placement choices %s: %w", path, err)
	}
	var f choicesFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != choicesVersion {
		return out, fmt.Errorf("placement choices %s are damaged (version %d, %v); placing pods anew", path, f.Version, err)
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
	f := choicesFile{Version: choicesVersion}
	for _, c := range choices {
		f.Choices = append(f.Choices, c)
	}
	slices.SortFunc(f.Choices, func(a, b plan.Choice) int {
		return strings.Compare(string(a.PodUID)+a.Group, string(b.PodUID)+b.Group)
	})
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o600)
}
