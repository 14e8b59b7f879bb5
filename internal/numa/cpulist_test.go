// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseList(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []int
		wantErr bool
	}{
		"empty":              {in: "", want: nil},
		"newline only":       {in: "\n", want: nil},
		"single":             {in: "0\n", want: []int{0}},
		"range":              {in: "0-3", want: []int{0, 1, 2, 3}},
		"ranges and singles": {in: "0-1,4,8-9\n", want: []int{0, 1, 4, 8, 9}},
		"unsorted duplicate": {in: "3,1-2,2", want: []int{1, 2, 3}},
		"one-element range":  {in: "5-5", want: []int{5}},
		"sparse nodes":       {in: "0,2", want: []int{0, 2}},
		"reversed range":     {in: "3-1", wantErr: true},
		"negative":           {in: "-1", wantErr: true},
		"empty element":      {in: "0,,1", wantErr: true},
		"trailing comma":     {in: "0,", wantErr: true},
		"padded element":     {in: "0, 1", wantErr: true},
		"garbage":            {in: "a-b", wantErr: true},
		"open range":         {in: "1-", wantErr: true},
		"hex mask":           {in: "0000000f", wantErr: true},
		"too large":          {in: "0-4294967295", wantErr: true},
		"at the bound":       {in: "65536", want: []int{65536}},
		"above the bound":    {in: "65537", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseList(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseList(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseList(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestFormatList(t *testing.T) {
	tests := map[string]struct {
		in   []int
		want string
	}{
		"none":          {in: nil, want: ""},
		"single":        {in: []int{2}, want: "2"},
		"run":           {in: []int{0, 1, 2, 3}, want: "0-3"},
		"pair":          {in: []int{4, 5}, want: "4-5"},
		"mixed":         {in: []int{0, 1, 4, 8, 9, 10}, want: "0-1,4,8-10"},
		"unsorted dups": {in: []int{9, 1, 0, 1, 8}, want: "0-1,8-9"},
		"eight nodes":   {in: []int{0, 1, 2, 3, 32, 33, 34, 35}, want: "0-3,32-35"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FormatList(tc.in)); diff != "" {
				t.Errorf("FormatList(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "0", "0-3", "0-1,4,8-9\n", "3-1", "0,,1", "1-", "65536", "0-65536", "-", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseList(s)
		if err != nil {
			return
		}
		// What parses prints back to a list that parses to the same ids.
		again, err := ParseList(FormatList(ids))
		if err != nil {
			t.Fatalf("FormatList(%v) = %q does not parse: %v", ids, FormatList(ids), err)
		}
		if diff := cmp.Diff(ids, again); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", s, diff)
		}
	})
}
