// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// statLine is a /proc/<pid>/stat line as Linux 6.18 prints it, with comm and starttime
// (field 22) substituted.
func statLine(comm string, start string) string {
	return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 137 0 0 0 0 0 0 0 20 0 1 0 " + start +
		" 5754880 224 18446744073709551615 94244216213504 94244216231377 140736522586144 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0" +
		" 94244216243440 94244216244808 94244245450752 140736522593727 140736522593747 140736522593747 140736522596331 0\n"
}

func TestParseStatStartTime(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    uint64
		wantErr bool
	}{
		"plain":                  {in: statLine("cat", "26001234"), want: 26001234},
		"comm with spaces":       {in: statLine("my prog", "7"), want: 7},
		"comm with parentheses":  {in: statLine("a) S 1 2 (b", "99"), want: 99},
		"comm with a digit line": {in: statLine("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", "5"), want: 5},
		"no command name":        {in: "4242 cat S 1", wantErr: true},
		"too few fields":         {in: "4242 (cat) S 1 4242", wantErr: true},
		"not a number":           {in: statLine("cat", "x"), wantErr: true},
		"negative":               {in: statLine("cat", "-1"), wantErr: true},
		"empty":                  {in: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStatStartTime(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadTask(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "100", "stat"), statLine("sleep", "12345"))
	writeFile(t, filepath.Join(root, "101", "stat"), "garbage")
	tests := map[string]struct {
		tid      int
		want     Task
		wantGone bool
		wantErr  bool
	}{
		"present": {tid: 100, want: Task{TID: 100, StartTime: 12345}},
		"missing": {tid: 102, wantGone: true, wantErr: true},
		"damaged": {tid: 101, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadTask(root, tc.tid)
			if (err != nil) != tc.wantErr || errors.Is(err, ErrTaskGone) != tc.wantGone {
				t.Fatalf("error %v, want error %v, gone %v", err, tc.wantErr, tc.wantGone)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadTaskSelf(t *testing.T) {
	self, err := ReadTask("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	again, err := ReadTask("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.StartTime == 0 || self != again {
		t.Errorf("ReadTask of this process: %+v then %+v, want the same non-zero start", self, again)
	}
}

func FuzzParseStatStartTime(f *testing.F) {
	f.Add(statLine("cat", "26001234"))
	f.Add(statLine("a) b (c", "1"))
	f.Add("1 (x) S")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseStatStartTime(s)
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
