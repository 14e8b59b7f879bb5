// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseContainerID(t *testing.T) {
	id := strings.Repeat("0f", 32)
	tests := map[string]struct {
		in          string
		wantRuntime string
		wantID      string
		wantErr     bool
	}{
		"containerd":    {in: "containerd://" + id, wantRuntime: RuntimeContainerd, wantID: id},
		"cri-o":         {in: "cri-o://" + id, wantRuntime: RuntimeCRIO, wantID: id},
		"docker":        {in: "docker://" + id, wantRuntime: RuntimeDocker, wantID: id},
		"bare":          {in: id, wantID: id},
		"empty":         {in: "", wantErr: true},
		"scheme only":   {in: "containerd://", wantErr: true},
		"uppercase":     {in: "containerd://" + strings.ToUpper(id), wantErr: true},
		"short":         {in: "containerd://" + id[:63], wantErr: true},
		"long":          {in: "containerd://" + id + "0", wantErr: true},
		"slash":         {in: "containerd://" + id[:62] + "/x", wantErr: true},
		"unknown":       {in: "rkt://" + id, wantErr: true},
		"crio spelling": {in: "crio://" + id, wantErr: true},
		"double scheme": {in: "docker://docker://" + id, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt, gotID, err := ParseContainerID(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseContainerID(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidContainerRef) {
					t.Errorf("error %v does not wrap ErrInvalidContainerRef", err)
				}
				return
			}
			if diff := cmp.Diff([]string{tc.wantRuntime, tc.wantID}, []string{rt, gotID}); diff != "" {
				t.Errorf("ParseContainerID(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseCgroupsPath(t *testing.T) {
	id := strings.Repeat("ab", 32)
	tests := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"containerd systemd": {
			in:   "kubepods-burstable-pod1234_5678.slice:cri-containerd:" + id,
			want: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope",
		},
		"crio systemd guaranteed": {
			in:   "kubepods-pod1234_5678.slice:crio:" + id,
			want: "/kubepods.slice/kubepods-pod1234_5678.slice/crio-" + id + ".scope",
		},
		"root slice": {in: "-.slice:docker:" + id, want: "/docker-" + id + ".scope"},
		"slice unit": {in: "system.slice:x:my.slice", want: "/system.slice/my.slice"},
		"cgroupfs": {
			in:   "/kubepods/besteffort/pod1234-5678/" + id,
			want: "/kubepods/besteffort/pod1234-5678/" + id,
		},
		"cgroupfs relative":   {in: "kubepods//pod1/" + id + "/", want: "/kubepods/pod1/" + id},
		"proc cgroup v2 line": {in: "0::/kubepods/pod1/" + id, want: "/kubepods/pod1/" + id},
		"proc cgroup v1 line": {in: "8:pids:/kubepods/pod1/" + id, want: "/kubepods/pod1/" + id},
		"dotdot":              {in: "/kubepods/../..", wantErr: true},
		"dot":                 {in: "/kubepods/./x", wantErr: true},
		"root":                {in: "/", wantErr: true},
		"empty":               {in: "", wantErr: true},
		"not a slice":         {in: "kubepods:crio:" + id, wantErr: true},
		"empty slice part":    {in: "kubepods--x.slice:crio:" + id, wantErr: true},
		"leading dash":        {in: "-kubepods.slice:crio:" + id, wantErr: true},
		"empty prefix":        {in: "kubepods.slice::" + id, wantErr: true},
		"empty name":          {in: "kubepods.slice:crio:", wantErr: true},
		"slash in name":       {in: "kubepods.slice:crio:../x", wantErr: true},
		"dotdot name":         {in: "kubepods.slice:crio:..", wantErr: true},
		"two colons only":     {in: "a:b", wantErr: true},
		"four parts":          {in: "a.slice:b:c:d", wantErr: true},
		"newline":             {in: "/kubepods/x\ny", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCgroupsPath(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseCgroupsPath(%q) = %q, %v; wantErr %v", tc.in, got, err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidContainerRef) {
					t.Errorf("error %v does not wrap ErrInvalidContainerRef", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseCgroupsPath(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestSystemdName(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want string
	}{
		"kubepods":   {in: []string{"kubepods"}, want: "/kubepods.slice"},
		"guaranteed": {in: []string{"kubepods", "pod1-2"}, want: "/kubepods.slice/kubepods-pod1_2.slice"},
		"burstable": {
			in:   []string{"kubepods", "burstable", "pod6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f"},
			want: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice",
		},
		"static pod": {
			in:   []string{"kubepods", "besteffort", "pod0a1b2c3d4e5f60718293a4b5c6d7e8f9"},
			want: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a1b2c3d4e5f60718293a4b5c6d7e8f9.slice",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := systemdName(tc.in)
			if err != nil {
				t.Fatalf("systemdName: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("systemdName(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func FuzzParseContainerID(f *testing.F) {
	id := strings.Repeat("0f", 32)
	for _, s := range []string{"containerd://" + id, "cri-o://" + id, "docker://" + id, id, "", "://", "rkt://x", "docker://" + id + "/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rt, got, err := ParseContainerID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidContainerRef) {
				t.Fatalf("ParseContainerID(%q): error %v does not wrap ErrInvalidContainerRef", s, err)
			}
			return
		}
		if len(got) != containerIDLen || !isLowerHex(got) {
			t.Fatalf("ParseContainerID(%q) accepted id %q", s, got)
		}
		want := got
		if rt != "" {
			want = rt + "://" + got
		}
		if want != s || (rt != "" && !slices.Contains([]string{RuntimeContainerd, RuntimeCRIO, RuntimeDocker}, rt)) {
			t.Fatalf("ParseContainerID(%q) = %q, %q: does not round-trip", s, rt, got)
		}
	})
}

func FuzzParseCgroupsPath(f *testing.F) {
	id := strings.Repeat("ab", 32)
	for _, s := range []string{
		"kubepods-burstable-pod1234_5678.slice:cri-containerd:" + id,
		"-.slice:docker:" + id, "system.slice:x:my.slice",
		"/kubepods/besteffort/pod1/" + id, "0::/kubepods/pod1", "/kubepods/../..", "a:b:c", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseCgroupsPath(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidContainerRef) {
				t.Fatalf("ParseCgroupsPath(%q): error %v does not wrap ErrInvalidContainerRef", s, err)
			}
			return
		}
		// The result must name a cgroup strictly below a hierarchy root.
		if !strings.HasPrefix(got, "/") || got == "/" || path.Clean(got) != got {
			t.Fatalf("ParseCgroupsPath(%q) = %q: not a clean absolute path", s, got)
		}
		for _, part := range strings.Split(got[1:], "/") {
			if part == "." || part == ".." || strings.ContainsFunc(part, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("ParseCgroupsPath(%q) = %q: bad component %q", s, got, part)
			}
		}
	})
}

func FuzzParseTaskIDs(f *testing.F) {
	for _, s := range []string{"", "1\n", "1\n2\n3", "0\n", "2147483647\n", "1\n\n", "x", "-1\n", "99999999999\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := parseTaskIDs(data, nil)
		if err != nil {
			return
		}
		for _, id := range ids {
			if id < 0 || id > maxTaskID {
				t.Fatalf("parseTaskIDs(%q) accepted id %d", data, id)
			}
		}
		// Accepted input is canonical up to leading zeros and the final newline:
		// printing the ids again and parsing that gives the same ids.
		again, err := parseTaskIDs([]byte(idLines(ids)), nil)
		if err != nil {
			t.Fatalf("parseTaskIDs(%q) of its own output: %v", idLines(ids), err)
		}
		if !slices.Equal(ids, again) {
			t.Fatalf("parseTaskIDs(%q) = %v, reparsed %v", data, ids, again)
		}
	})
}
