// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tasklistProc writes files (paths relative to a fake /proc) and returns its root.
func tasklistProc(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// tasklistStat is a /proc/<tid>/stat line whose starttime (field 22) is start.
func tasklistStat(tid int, start uint64) string {
	return fmt.Sprintf("%d (a b) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", tid, tid, tid, start)
}

func TestListThreads(t *testing.T) {
	proc := tasklistProc(t, map[string]string{
		"10/task/10/stat": "", "10/task/12/stat": "", "10/task/9/stat": "",
		"10/task/not-a-tid/stat": "", "10/task/0/stat": "",
		"20/stat": "", // a process directory without a task directory
	})
	tests := map[string]struct {
		tgid    int
		want    []int
		wantErr error
	}{
		"threads, sorted":   {tgid: 10, want: []int{9, 10, 12}},
		"process gone":      {tgid: 30, wantErr: ErrTaskGone},
		"no task directory": {tgid: 20, wantErr: ErrTaskGone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ListThreads(proc, tc.tgid)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ListThreads(%d) error = %v, want %v", tc.tgid, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ListThreads(%d) (-want +got):\n%s", tc.tgid, diff)
			}
		})
	}
}

func TestTaskVerify(t *testing.T) {
	proc := tasklistProc(t, map[string]string{
		"7/stat": tasklistStat(7, 500),
		"8/stat": "8 (broken",
	})
	tests := map[string]struct {
		task         Task
		wantErr      error
		wantReplaced bool
	}{
		"same task":  {task: Task{TID: 7, StartTime: 500}},
		"id reused":  {task: Task{TID: 7, StartTime: 400}, wantErr: ErrTaskGone, wantReplaced: true},
		"task gone":  {task: Task{TID: 9, StartTime: 500}, wantErr: ErrTaskGone},
		"unreadable": {task: Task{TID: 8, StartTime: 500}, wantErr: errTasklistAny},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.task.Verify(proc)
			switch {
			case tc.wantErr == errTasklistAny:
				if err == nil || errors.Is(err, ErrTaskGone) {
					t.Fatalf("Verify(%+v) = %v, want an error that is not ErrTaskGone", tc.task, err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("Verify(%+v) = %v, want %v", tc.task, err, tc.wantErr)
			}
			if got := errors.Is(err, ErrTaskReplaced); got != tc.wantReplaced {
				t.Errorf("Verify(%+v) = %v: replaced %v, want %v", tc.task, err, got, tc.wantReplaced)
			}
		})
	}
}

var errTasklistAny = errors.New("any error")
