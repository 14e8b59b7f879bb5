// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"fmt"
	"testing"
)

func TestIsTaskGone(t *testing.T) {
	tests := map[string]struct {
		err  error
		gone bool
	}{
		"ErrTaskGone wrapped": {fmt.Errorf("reading: %w", ErrTaskGone), true},
		"ErrTaskReplaced":     {ErrTaskReplaced, true},
		"ESRCH wrapped":       {fmt.Errorf("getting preferred node of task 3: %w", errESRCH), true},
		"EPERM":               {errEPERM, false},
		"nil":                 {nil, false},
		"unrelated":           {fmt.Errorf("boom"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsTaskGone(tc.err); got != tc.gone {
				t.Errorf("IsTaskGone(%v) = %v, want %v", tc.err, got, tc.gone)
			}
		})
	}
	if !IsPermissionDenied(fmt.Errorf("x: %w", errEACCES)) || IsPermissionDenied(errESRCH) {
		t.Error("IsPermissionDenied misreads EACCES or ESRCH")
	}
}
