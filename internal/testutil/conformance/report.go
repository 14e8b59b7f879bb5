// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package conformance

// The report each case writes, one JSON line per case, to $NUMAPREF_CONFORMANCE_REPORT.
// The kernel lab's differential report reads the same types.

// CaseReport is one case run against one backend.
type CaseReport struct {
	Case     string         `json:"case"`
	Backend  string         `json:"backend"`
	Pass     bool           `json:"pass"`
	Skipped  bool           `json:"skipped,omitempty"`
	Calls    []CallResult   `json:"calls"`
	Observed map[string]int `json:"observed,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
}

// CallResult is one call as reported: the same for every backend, pids named, not numbered.
type CallResult struct {
	Label  string `json:"label"`
	Cmd    int    `json:"cmd"`
	Target string `json:"target"`
	Nid    int    `json:"nid"`
	Ptr    string `json:"ptr"`
	Ret    int    `json:"ret"`
	Errno  string `json:"errno"`
	// Stored says the call left a value at the pointer; Value is that value.
	Stored bool `json:"stored"`
	Value  int  `json:"value"`
}
