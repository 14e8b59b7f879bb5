// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"errors"
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// FuzzDecodeLedger: any file content yields a usable ledger (maybe empty, with an error),
// never a panic, and what is decoded survives an encode and a decode unchanged.
func FuzzDecodeLedger(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"version":1}`, `{"version":1,"containers":null}`,
		`{"version":1,"containers":[{"podUID":"u","container":"c","ref":{"podUID":"u","containerID":"containerd://x"},"tasks":{"12":{"start":5,"prev":-1,"values":[0]}}}]}`,
		`{"version":1,"containers":[null,{"podUID":"","container":"c"}]}`,
		`{"version":3,"containers":[]}`, `{"version":2,"bootID":"b","containers":[]}`, `{"version":1,"containers":[{"podUID":"u","container":"c","tasks":{"-3":null,"4":null}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		f, _ := decodeLedgerFile(data)
		l := f.containers()
		for k, c := range l {
			for tid, te := range c.Tasks {
				if te == nil || tid <= 0 {
					t.Fatalf("container %v kept task %d = %v", k, tid, te)
				}
			}
		}
		enc, err := encodeLedgerFile(ledgerFile{BootID: f.BootID, Containers: l.Sorted()})
		if err != nil {
			t.Fatalf("encoding a decoded ledger: %v", err)
		}
		again, err := decodeLedgerFile(enc)
		if err != nil {
			t.Fatalf("an encoded ledger does not decode: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(l, again.containers()); diff != "" {
			t.Errorf("encode and decode changed the ledger (-decoded +again):\n%s", diff)
		}
	})
}

// testLedger is a ledger of one container with one task, as the engine records it.
func testLedger() ledgerFile {
	return ledgerFile{BootID: "b", Containers: []*known.Container{{
		PodUID: "pod", Container: "main", Ref: cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"},
		Tasks: map[int]*known.Task{100: {Start: 1100, Prev: -1, Values: []int{1}}},
	}}}
}

// The ledger carries a checksum of its content: any change of the content is seen as
// damage (ErrDamaged), never read as a smaller or different ledger. Files of
// versions 1 and 2, which have no checksum, are still read.
func TestLoadLedger(t *testing.T) {
	good, err := encodeLedgerFile(testLedger())
	if err != nil {
		t.Fatal(err)
	}
	legacy := `{"version":2,"bootID":"b","containers":[{"podUID":"pod","container":"main","ref":{"podUID":"pod","containerID":"containerd://x"},` +
		`"tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`
	for name, c := range map[string]struct {
		content string
		limit   int
		want    error // nil: the test ledger is read
	}{
		"written by the agent":   {content: string(good)},
		"version 2, no checksum": {content: legacy},
		"version 1, no checksum": {content: strings.Replace(legacy, `"version":2,"bootID":"b",`, `"version":1,"bootID":"b",`, 1)},
		"a task's value changed": {content: strings.Replace(string(good), `"values":[1]`, `"values":[0]`, 1), want: ErrDamaged},
		"a container dropped":    {content: strings.Replace(string(good), `"containers":[{`, `"containers":[],"x":[{`, 1), want: ErrDamaged},
		"checksum missing":       {content: strings.Replace(string(good), `"sha256":"`, `"sha256":"x`, 1), want: ErrDamaged},
		"truncated":              {content: string(good[:len(good)/2]), want: ErrDamaged},
		"version 3, no journal":  {content: strings.Replace(string(good), `"version":4`, `"version":3`, 1)},
		"unknown version":        {content: strings.Replace(string(good), `"version":4`, `"version":5`, 1), want: ErrDamaged},
		"past its bound":         {content: string(good), limit: len(good) - 1, want: fsutil.ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			files.Write(t, path, c.content)
			limit := c.limit
			if limit == 0 {
				limit = DefaultLimit
			}
			l, err := Read(path, limit)
			if c.want != nil {
				if !errors.Is(err, c.want) || !errors.Is(err, ErrDamaged) {
					t.Errorf("Read = %v, want %v and ErrDamaged", err, c.want)
				}
				if len(l) != 0 {
					t.Errorf("a damaged ledger yielded entries: %+v", l)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(testLedger().containers(), l); diff != "" {
				t.Errorf("ledger read (-want +got):\n%s", diff)
			}
		})
	}
}

// A ledger that cannot be read at all (here a directory in its place) is damaged too.
func TestLoadLedgerUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path, 0); !errors.Is(err, ErrDamaged) {
		t.Errorf("Read of a directory = %v, want ErrDamaged", err)
	}
}
