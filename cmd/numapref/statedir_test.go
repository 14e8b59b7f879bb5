package main

import (
	"os"
	"path/filepath"
	"testing"
)

// An upgrade from a release whose agents kept their state in the shared dir moves that
// state into the release's own dir, once: a dir with its own ledger adopts nothing.
func TestAdoptState(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			return "<none>"
		}
		return string(data)
	}
	for name, tc := range map[string]struct {
		ownLedger           bool
		wantLedger, wantOld string
	}{
		"a new dir adopts the old state":     {wantLedger: "old ledger", wantOld: "<none>"},
		"a dir with its own ledger keeps it": {ownLedger: true, wantLedger: "own ledger", wantOld: "old ledger"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			state := filepath.Join(root, "ns_release")
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(root, "ledger.json"), "old ledger")
			write(t, filepath.Join(root, "choices.json"), "old choices")
			write(t, filepath.Join(root, "ledger.json.journal"), "old journal")
			if tc.ownLedger {
				write(t, filepath.Join(state, "ledger.json"), "own ledger")
			}
			if err := adoptState(root, state); err != nil {
				t.Fatal(err)
			}
			if got := read(filepath.Join(state, "ledger.json")); got != tc.wantLedger {
				t.Errorf("ledger in the release's dir = %q, want %q", got, tc.wantLedger)
			}
			if got := read(filepath.Join(root, "ledger.json")); got != tc.wantOld {
				t.Errorf("ledger left in the old dir = %q, want %q", got, tc.wantOld)
			}
			if !tc.ownLedger && read(filepath.Join(state, "choices.json")) != "old choices" {
				t.Errorf("choices.json was not adopted")
			}
			if !tc.ownLedger && read(filepath.Join(state, "ledger.json.journal")) != "old journal" {
				t.Errorf("the ledger's journal was not adopted with it")
			}
		})
	}
	if err := adoptState("", t.TempDir()); err != nil {
		t.Errorf("adopting from nothing: %v", err)
	}
}
