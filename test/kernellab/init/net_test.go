// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNetConfig(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    netConfig
		wantErr string
	}{
		"run.sh's line": {
			in:   "# written by run.sh\niface eth0 10.0.2.15/24\n",
			want: netConfig{Iface: "eth0", Addr: net.IPv4(10, 0, 2, 15).To4(), Mask: net.CIDRMask(24, 32)},
		},
		"no iface":     {in: "# nothing\n", wantErr: "no iface line"},
		"no prefix":    {in: "iface eth0 10.0.2.15\n", wantErr: "bad address"},
		"IPv6":         {in: "iface eth0 fd00::2/64\n", wantErr: "want IPv4"},
		"other word":   {in: "route default 10.0.2.2\n", wantErr: "bad line"},
		"missing addr": {in: "iface eth0\n", wantErr: "bad line"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseNetConfig(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseNetConfig() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseNetConfig() (-want +got):\n%s", diff)
			}
		})
	}
}
