// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
)

// defaultTestTimeout bounds one test binary when the manifest sets none.
const defaultTestTimeout = 10 * time.Minute

// test is one binary the init runs.
type test struct {
	Name string
	Path string
	Args []string
	// Env comes after the manifest's env lines, so it overrides them.
	Env []string
}

// manifest is what the initramfs asks the init to do. run.sh writes it as
// lines of words:
//
//	# comment
//	timeout 10m               per-test timeout (a Go duration)
//	env KEY=VALUE             environment of every test, in order
//	test NAME PATH [ARG ...]  a test binary and its arguments
//	testenv NAME KEY=VALUE    environment of one test (the same binary can run
//	                          twice under two names, e.g. against two
//	                          implementations)
//
// Words are separated by blanks; a word cannot contain one.
type manifest struct {
	Timeout time.Duration
	Env     []string
	Tests   []test
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func parseManifest(r io.Reader) (manifest, error) { //nolint:funlen // test tooling: one check per manifest key, in the file's order
	m := manifest{Timeout: defaultTestTimeout}
	seen := map[string]bool{}
	testEnv := map[string][]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		words := strings.Fields(sc.Text())
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		switch words[0] {
		case "timeout":
			if len(words) != 2 {
				return manifest{}, fmt.Errorf("line %d: timeout takes one duration", n)
			}
			d, err := time.ParseDuration(words[1])
			if err != nil || d <= 0 {
				return manifest{}, fmt.Errorf("line %d: bad timeout %q", n, words[1])
			}
			m.Timeout = d
		case "env":
			if len(words) != 2 || !isKeyValue(words[1]) {
				return manifest{}, fmt.Errorf("line %d: env takes one KEY=VALUE", n)
			}
			m.Env = append(m.Env, words[1])
		case "testenv":
			if len(words) != 3 || !isKeyValue(words[2]) {
				return manifest{}, fmt.Errorf("line %d: testenv takes a test name and one KEY=VALUE", n)
			}
			testEnv[words[1]] = append(testEnv[words[1]], words[2])
		case "test":
			if len(words) < 3 {
				return manifest{}, fmt.Errorf("line %d: test takes a name and a path", n)
			}
			t := test{Name: words[1], Path: words[2], Args: words[3:]}
			if !namePattern.MatchString(t.Name) {
				return manifest{}, fmt.Errorf("line %d: bad test name %q", n, t.Name)
			}
			if seen[t.Name] {
				return manifest{}, fmt.Errorf("line %d: test %q listed twice", n, t.Name)
			}
			if !path.IsAbs(t.Path) {
				return manifest{}, fmt.Errorf("line %d: test path %q is not absolute", n, t.Path)
			}
			seen[t.Name] = true
			if len(t.Args) == 0 {
				t.Args = nil
			}
			m.Tests = append(m.Tests, t)
		default:
			return manifest{}, fmt.Errorf("line %d: unknown keyword %q", n, words[0])
		}
	}
	if err := sc.Err(); err != nil {
		return manifest{}, fmt.Errorf("reading manifest: %w", err)
	}
	for i := range m.Tests {
		m.Tests[i].Env = testEnv[m.Tests[i].Name]
		delete(testEnv, m.Tests[i].Name)
	}
	for name := range testEnv {
		return manifest{}, fmt.Errorf("testenv for %q, which is no test", name)
	}
	return m, nil
}

func isKeyValue(s string) bool {
	key, _, ok := strings.Cut(s, "=")
	return ok && key != ""
}

// bootOptions are the kernellab.* parameters of the kernel command line.
type bootOptions struct {
	// Run, when set, replaces the manifest's list: each item is the name of
	// a manifest test or the absolute path of a binary in the initramfs.
	Run []string
	// Timeout, when non-zero, overrides the manifest's per-test timeout.
	Timeout time.Duration
}

func parseCmdline(cmdline string) (bootOptions, error) {
	var o bootOptions
	for _, word := range strings.Fields(cmdline) {
		key, value, _ := strings.Cut(word, "=")
		switch key {
		case "kernellab.run":
			for _, item := range strings.Split(value, ",") {
				if item != "" {
					o.Run = append(o.Run, item)
				}
			}
		case "kernellab.timeout":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return bootOptions{}, fmt.Errorf("bad kernellab.timeout %q", value)
			}
			o.Timeout = d
		}
	}
	return o, nil
}

// selectTests applies the boot options to the manifest's list.
func selectTests(m manifest, o bootOptions) ([]test, error) {
	if len(o.Run) == 0 {
		return m.Tests, nil
	}
	byName := map[string]test{}
	for _, t := range m.Tests {
		byName[t.Name] = t
	}
	var out []test
	for _, item := range o.Run {
		if t, ok := byName[item]; ok {
			out = append(out, t)
			continue
		}
		if !path.IsAbs(item) {
			return nil, fmt.Errorf("kernellab.run: %q is neither a manifest test nor an absolute path", item)
		}
		name := strings.TrimSuffix(path.Base(item), ".test")
		if !namePattern.MatchString(name) {
			return nil, fmt.Errorf("kernellab.run: cannot name a test after %q", item)
		}
		out = append(out, test{Name: name, Path: item, Args: []string{"-test.v"}})
	}
	return out, nil
}
