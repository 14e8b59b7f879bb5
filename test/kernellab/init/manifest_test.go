// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseManifest(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    manifest
		wantErr string
	}{
		"full": {
			in: `# written by run.sh
timeout 90s
env KERNELLAB_KERNEL=patched
env A=b=c

test smoke /kernellab/bin/smoke.test -test.v -test.run=TestSmoke
test conformance /kernellab/bin/conformance.test
testenv conformance IMPL=emulator
testenv conformance X=1
`,
			want: manifest{
				Timeout: 90 * time.Second,
				Env:     []string{"KERNELLAB_KERNEL=patched", "A=b=c"},
				Tests: []test{
					{Name: "smoke", Path: "/kernellab/bin/smoke.test", Args: []string{"-test.v", "-test.run=TestSmoke"}},
					{Name: "conformance", Path: "/kernellab/bin/conformance.test", Env: []string{"IMPL=emulator", "X=1"}},
				},
			},
		},
		"empty keeps the default timeout": {
			in:   "",
			want: manifest{Timeout: defaultTestTimeout},
		},
		"duplicate name":   {in: "test a /a\ntest a /b\n", wantErr: "listed twice"},
		"relative path":    {in: "test a bin/a.test\n", wantErr: "not absolute"},
		"bad name":         {in: "test ../a /a\n", wantErr: "bad test name"},
		"missing path":     {in: "test a\n", wantErr: "takes a name and a path"},
		"bad env":          {in: "env NOVALUE\n", wantErr: "KEY=VALUE"},
		"empty env key":    {in: "env =x\n", wantErr: "KEY=VALUE"},
		"testenv no test":  {in: "test a /a\ntestenv b K=V\n", wantErr: "which is no test"},
		"bad testenv":      {in: "test a /a\ntestenv a K\n", wantErr: "testenv takes"},
		"bad timeout":      {in: "timeout soon\n", wantErr: "bad timeout"},
		"negative timeout": {in: "timeout -1s\n", wantErr: "bad timeout"},
		"unknown keyword":  {in: "reboot now\n", wantErr: "unknown keyword"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseManifest(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseManifest() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseManifest() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseManifest() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectTests(t *testing.T) {
	m := manifest{Tests: []test{
		{Name: "smoke", Path: "/kernellab/bin/smoke.test", Args: []string{"-test.v"}},
		{Name: "conformance", Path: "/kernellab/bin/conformance.test"},
	}}
	tests := map[string]struct {
		cmdline     string
		want        []test
		wantTimeout time.Duration
		wantErr     string
	}{
		"no options runs the manifest": {
			cmdline: "console=ttyS0 panic=-1",
			want:    m.Tests,
		},
		"names pick and order": {
			cmdline:     "console=ttyS0 kernellab.run=conformance,smoke kernellab.timeout=2m",
			want:        []test{m.Tests[1], m.Tests[0]},
			wantTimeout: 2 * time.Minute,
		},
		"a path runs a binary outside the manifest": {
			cmdline: "kernellab.run=/kernellab/bin/extra.test",
			want:    []test{{Name: "extra", Path: "/kernellab/bin/extra.test", Args: []string{"-test.v"}}},
		},
		"unknown relative name": {cmdline: "kernellab.run=nope", wantErr: "neither"},
		"bad timeout":           {cmdline: "kernellab.timeout=x", wantErr: "bad kernellab.timeout"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts, err := parseCmdline(tc.cmdline)
			var got []test
			if err == nil {
				got, err = selectTests(m, opts)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selectTests() (-want +got):\n%s", diff)
			}
			if opts.Timeout != tc.wantTimeout {
				t.Errorf("timeout = %v, want %v", opts.Timeout, tc.wantTimeout)
			}
		})
	}
}

func TestMarker(t *testing.T) {
	tests := map[string]struct {
		kind   string
		fields []string
		want   string
	}{
		"no fields": {kind: kindBeginKmsg, want: "<<<KERNELLAB BEGIN-KMSG>>>"},
		"fields": {
			kind:   kindEndTest,
			fields: []string{"name", "smoke", "status", "pass", "exit", "0"},
			want:   "<<<KERNELLAB END-TEST name=smoke status=pass exit=0>>>",
		},
		"values stay one word": {
			kind:   kindBeginReport,
			fields: []string{"file", "a b<c>.json", "args", ""},
			want:   "<<<KERNELLAB BEGIN-REPORT file=a_b_c_.json args=->>>",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := marker(tc.kind, tc.fields...); got != tc.want {
				t.Errorf("marker() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKmsgLine(t *testing.T) {
	tests := map[string]struct {
		record string
		want   string
		wantOK bool
	}{
		"warning kept": {
			record: "4,812,2345678,-;WARNING: CPU: 1 PID: 9 at kernel/sched/fair.c:123\n",
			want:   "[    2.345678] <4> WARNING: CPU: 1 PID: 9 at kernel/sched/fair.c:123",
			wantOK: true,
		},
		"facility bits ignored": {
			record: "11,3,5,-;usb: error\n SUBSYSTEM=usb\n",
			want:   "[    0.000005] <3> usb: error",
			wantOK: true,
		},
		"info dropped":  {record: "6,1,100,-;Linux version 6.12\n"},
		"not a record":  {record: "garbage"},
		"short header":  {record: "4,1;x\n"},
		"bad timestamp": {record: "4,1,x,-;x\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := kmsgLine([]byte(tc.record), 4)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("kmsgLine() = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
