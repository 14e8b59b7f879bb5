// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseInterleaved(t *testing.T) {
	tests := map[string]struct {
		args    []string
		pos     []string
		output  string
		context string
	}{
		"flags first":        {args: []string{"-o", "json", "ns/db"}, pos: []string{"ns/db"}, output: "json"},
		"flags after":        {args: []string{"ns/db", "--output=json", "--context", "kind"}, pos: []string{"ns/db"}, output: "json", context: "kind"},
		"around":             {args: []string{"--context=a", "ns/db", "-o", "json"}, pos: []string{"ns/db"}, output: "json", context: "a"},
		"after double dash":  {args: []string{"ns/db", "--", "-o"}, pos: []string{"ns/db", "-o"}, output: "table"},
		"two positionals":    {args: []string{"a/b", "c/d"}, pos: []string{"a/b", "c/d"}, output: "table"},
		"no positional":      {args: []string{"-o", "json"}, output: "json"},
		"dash dash at start": {args: []string{"--", "ns/db"}, pos: []string{"ns/db"}, output: "table"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o inspectOptions
			fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
			o.register(fs)
			pos, err := parseInterleaved(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.pos, pos); diff != "" {
				t.Errorf("positionals (-want +got):\n%s", diff)
			}
			if o.output != tc.output || o.kubeContext != tc.context {
				t.Errorf("output %q context %q, want %q %q", o.output, o.kubeContext, tc.output, tc.context)
			}
		})
	}
}

func TestPodArg(t *testing.T) {
	contextNS := func() (string, error) { return "from-context", nil }
	tests := map[string]struct {
		arg, flagNS string
		ns, name    string
		err         string
	}{
		"namespace/pod":          {arg: "shop/db-0", ns: "shop", name: "db-0"},
		"bare pod, flag":         {arg: "db-0", flagNS: "shop", ns: "shop", name: "db-0"},
		"bare pod, context":      {arg: "db-0", ns: "from-context", name: "db-0"},
		"same namespace twice":   {arg: "shop/db-0", flagNS: "shop", ns: "shop", name: "db-0"},
		"conflicting namespaces": {arg: "shop/db-0", flagNS: "other", err: "--namespace is"},
		"too many slashes":       {arg: "shop/db-0/main", err: "want /inspect/<namespace>/<pod>"},
		"invalid namespace":      {arg: "Shop/db-0", err: "namespace"},
		"empty pod":              {arg: "shop/", err: "want /inspect/<namespace>/<pod>"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns, pod, err := podArg(tc.arg, tc.flagNS, contextNS)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errUsage) {
					t.Fatalf("podArg(%q) = %v, want a usage error containing %q", tc.arg, err, tc.err)
				}
				return
			}
			if err != nil || ns != tc.ns || pod != tc.name {
				t.Errorf("podArg(%q) = %q, %q, %v; want %q, %q", tc.arg, ns, pod, err, tc.ns, tc.name)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		err  string
	}{
		"no command":       {args: nil, code: 2, err: "usage: kubectl numapref"},
		"unknown command":  {args: []string{"apply"}, code: 2, err: `unknown command "apply"`},
		"no pod":           {args: []string{"inspect"}, code: 2, err: "one argument"},
		"bad output":       {args: []string{"inspect", "ns/db", "-o", "yaml"}, code: 2, err: "--output must be table or json"},
		"insecure and CA":  {args: []string{"inspect", "ns/db", "--insecure-skip-tls-verify", "--agent-ca-file=/ca.pem"}, code: 2, err: "excludes --agent-ca-file"},
		"bad token SA":     {args: []string{"inspect", "ns/db", "--token-service-account=nobody"}, code: 2, err: "want <namespace>/<name>"},
		"plain http agent": {args: []string{"inspect", "ns/db", "--agent-url=http://10.0.0.1:8443"}, code: 2, err: "want https://host:port"},
		"agent url path":   {args: []string{"inspect", "ns/db", "--agent-url=https://10.0.0.1:8443/inspect/x"}, code: 2, err: "want https://host:port"},
		"bad port":         {args: []string{"inspect", "ns/db", "--agent-port=70000"}, code: 2, err: "is not a port"},
		"unknown flag":     {args: []string{"inspect", "ns/db", "--bogus"}, code: 2, err: "flag provided but not defined"},
		"help":             {args: []string{"inspect", "-h"}, code: 0, err: "FORCED is the task's"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tc.args, io.Discard, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", code, stderr.String(), tc.code, tc.err)
			}
		})
	}
}
