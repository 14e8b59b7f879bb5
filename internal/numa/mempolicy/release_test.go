// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import "testing"

func TestSupportOfRelease(t *testing.T) {
	for _, tc := range []struct {
		release                    string
		many, balancing, wantError bool
	}{
		{release: "6.18.44-fc-v1147", many: true, balancing: true},
		{release: "6.12.48+deb13-amd64", many: true, balancing: true},
		{release: "6.10.0", many: true, balancing: true},
		{release: "6.9.12-200.fc40.x86_64", many: true},
		{release: "5.15.0-105-generic", many: true},
		{release: "5.14.21", many: false},
		{release: "4.19.0", many: false},
		{release: "7.0", many: true, balancing: true},
		{release: "6", wantError: true},
		{release: "x.y", wantError: true},
		{release: "", wantError: true},
	} {
		s, err := SupportOfRelease(tc.release, 1)
		if tc.wantError {
			if err == nil {
				t.Errorf("%q: %+v, want an error", tc.release, s)
			}
			continue
		}
		if err != nil || !s.Preferred || s.PreferredMany != tc.many || s.PreferredManyBalancing != tc.balancing || s.Node != 1 {
			t.Errorf("%q: %+v, %v; want MPOL_PREFERRED, many %v, balancing %v on node 1", tc.release, s, err, tc.many, tc.balancing)
		}
	}
}
