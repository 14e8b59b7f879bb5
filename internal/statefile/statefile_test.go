// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package statefile

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/fsutil"
)

type entry struct {
	Name  string `json:"name"`
	Node  int    `json:"node"`
	Note  string `json:"note,omitempty"`
	Inner *entry `json:"inner,omitempty"`
}

type payload struct {
	Entries []entry `json:"entries"`
}

func testFile(t *testing.T) File[payload] {
	t.Helper()
	return File[payload]{Path: filepath.Join(t.TempDir(), "state.json"), Version: 3, Limit: 1 << 10, Strict: true}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	f := testFile(t)
	want := payload{Entries: []entry{{Name: "a", Node: 1}, {Name: "b<&>", Node: -1, Note: "x", Inner: &entry{Name: "c"}}}}
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	got, found, err := f.Load()
	if err != nil || !found {
		t.Fatalf("Load = %v, %v", found, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	if st, err := os.Stat(f.Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", st.Mode(), err)
	}
	_, data, _, err := f.LoadRaw()
	if enc, _ := f.Encode(want); err != nil || string(data) != string(enc) {
		t.Errorf("LoadRaw's bytes %s, %v; want what Encode gives, %s", data, err, enc)
	}
}

// What Save writes is what json.Marshal wrote for the stores' own envelopes, a version
// field first: an upgraded agent writes the files an older one reads, and the reverse.
func TestEncodeIsTheEnvelopesJSON(t *testing.T) {
	type envelope struct {
		Version int     `json:"version"`
		Entries []entry `json:"entries"`
	}
	type omitted struct {
		Note    string  `json:"note,omitempty"`
		Entries []entry `json:"entries"`
	}
	type omittedEnvelope struct {
		Version int     `json:"version"`
		Note    string  `json:"note,omitempty"`
		Entries []entry `json:"entries"`
	}
	type empty struct{}
	for name, tc := range map[string]struct {
		payload, envelope any
	}{
		"nil list":      {payload{}, envelope{Version: 3}},
		"empty list":    {payload{Entries: []entry{}}, envelope{Version: 3, Entries: []entry{}}},
		"entries":       {payload{Entries: []entry{{Name: "<p&q>", Node: 2, Inner: &entry{}}}}, envelope{Version: 3, Entries: []entry{{Name: "<p&q>", Node: 2, Inner: &entry{}}}}},
		"first omitted": {omitted{Entries: []entry{{Name: "a"}}}, omittedEnvelope{Version: 3, Entries: []entry{{Name: "a"}}}},
		"first present": {omitted{Note: "n"}, omittedEnvelope{Version: 3, Note: "n"}},
		"no members": {empty{}, struct {
			Version int `json:"version"`
		}{3}},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(tc.envelope)
			if err != nil {
				t.Fatal(err)
			}
			got, err := File[any]{Version: 3, Limit: 1 << 10}.Encode(tc.payload)
			if err != nil || string(got) != string(want) {
				t.Errorf("Encode = %s, %v; want %s", got, err, want)
			}
		})
	}
	if _, err := (File[[]int]{Version: 1, Limit: 10}).Encode([]int{1}); err == nil {
		t.Error("a payload that is no JSON object was encoded")
	}
}

func TestLoadRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		content string
		strict  bool
		want    error
	}{
		"another version":                  {content: `{"version":2,"entries":[]}`, want: ErrVersion},
		"no version":                       {content: `{"entries":[]}`, want: ErrVersion},
		"a version of no number":           {content: `{"version":"3","entries":[]}`, want: ErrDamaged},
		"truncated":                        {content: `{"version":3,"entries":[{"name":"a"`, want: ErrDamaged},
		"not an object":                    {content: `[3]`, want: ErrDamaged},
		"null":                             {content: `null`, want: ErrDamaged},
		"trailing data":                    {content: `{"version":3,"entries":[]}{}`, want: ErrDamaged},
		"a member of another type":         {content: `{"version":3,"entries":{}}`, want: ErrDamaged},
		"an unknown member, strict":        {content: `{"version":3,"entries":[],"extra":1}`, strict: true, want: ErrDamaged},
		"an unknown nested member, strict": {content: `{"version":3,"entries":[{"name":"a","renamed":1}]}`, strict: true, want: ErrDamaged},
	} {
		t.Run(name, func(t *testing.T) {
			f := testFile(t)
			f.Strict = tc.strict
			write(t, f.Path, tc.content)
			v, found, err := f.Load()
			if !errors.Is(err, tc.want) || found {
				t.Errorf("Load = %v, %v; want not found and %v", found, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), f.Path) {
				t.Errorf("error %q does not name the file", err)
			}
			if v.Entries != nil {
				t.Errorf("loaded %v from a refused file", v)
			}
		})
	}
	// Without Strict, a member the payload does not know is skipped.
	f := testFile(t)
	f.Strict = false
	write(t, f.Path, `{"extra":[1],"version":3,"entries":[{"name":"a","renamed":1}]}`)
	if v, found, err := f.Load(); err != nil || !found || !cmp.Equal(v, payload{Entries: []entry{{Name: "a"}}}) {
		t.Errorf("Load = %v, %v, %v; want the known members", v, found, err)
	}
}

func TestLoadMissing(t *testing.T) {
	f := testFile(t)
	if v, found, err := f.Load(); err != nil || found || v.Entries != nil {
		t.Errorf("Load of no file = %v, %v, %v; want nothing, no error", v, found, err)
	}
	f.Path = filepath.Join(filepath.Dir(f.Path), "absent", "state.json")
	if _, found, err := f.Load(); err != nil || found {
		t.Errorf("Load in a missing dir = %v, %v; want nothing, no error", found, err)
	}
}

// A state file that is a link was put there by someone else: it is neither read through
// nor replaced.
func TestLinkRefused(t *testing.T) {
	f := testFile(t)
	target := filepath.Join(filepath.Dir(f.Path), "elsewhere")
	write(t, target, `{"version":3,"entries":[]}`)
	if err := os.Symlink(target, f.Path); err != nil {
		t.Fatal(err)
	}
	if _, found, err := f.Load(); !errors.Is(err, fsutil.ErrSymlink) || found {
		t.Errorf("Load through a link = %v, %v; want ErrSymlink", found, err)
	}
	if err := f.Save(payload{}); !errors.Is(err, fsutil.ErrSymlink) {
		t.Errorf("Save over a link = %v, want ErrSymlink", err)
	}
	if st, err := os.Lstat(f.Path); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", st.Mode(), err)
	}
}

func TestPastTheBound(t *testing.T) {
	f := testFile(t)
	f.Limit = 40
	small := payload{Entries: []entry{{Name: "a"}}} // {"version":3,"entries":[{"name":"a","node":0}]}: 47 bytes
	if err := f.Save(small); !errors.Is(err, fsutil.ErrTooLarge) {
		t.Errorf("Save past the bound = %v, want ErrTooLarge", err)
	}
	if _, err := os.Lstat(f.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was written past the bound: %v", err)
	}
	f.Limit = 47
	if err := f.Save(small); err != nil {
		t.Fatalf("Save at the bound: %v", err)
	}
	f.Limit = 46
	if _, found, err := f.Load(); !errors.Is(err, fsutil.ErrTooLarge) || found {
		t.Errorf("Load past the bound = %v, %v; want ErrTooLarge", found, err)
	}
	f.Limit = 0
	if _, _, err := f.Load(); err == nil {
		t.Error("Load with no bound: no error")
	}
	if err := f.Save(small); err == nil {
		t.Error("Save with no bound: no error")
	}
}

// A write killed between creating its temporary file and the rename leaves the file; the
// next start removes it, and nothing else.
func TestRemoveTemps(t *testing.T) {
	f := testFile(t)
	if err := f.Save(payload{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.Path)
	write(t, filepath.Join(dir, ".state.json.tmp-123"), "torn")
	write(t, filepath.Join(dir, ".other.json.tmp-9"), "another file's")
	if n, err := f.RemoveTemps(); n != 1 || err != nil {
		t.Errorf("RemoveTemps = %d, %v; want 1 removed", n, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".other.json.tmp-9", "state.json"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
}
