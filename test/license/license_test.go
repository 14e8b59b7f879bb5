// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package license checks that the repository is licensed as it says: LICENSE holds the
// Apache License 2.0, and every Go file carries the header of hack/boilerplate.go.txt
// (hack/license-header.sh adds it; generators get it as their headerFile).
package license

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// hasHeader reports whether src begins with header, or with a build constraint, a blank
// line and header (where controller-gen puts it).
func hasHeader(src, header []byte) bool {
	if bytes.HasPrefix(src, header) {
		return true
	}
	if !bytes.HasPrefix(src, []byte("//go:build ")) {
		return false
	}
	_, rest, ok := bytes.Cut(src, []byte("\n"))
	return ok && bytes.HasPrefix(rest, append([]byte("\n"), header...))
}

func TestLicenseIsApache2(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
}

func TestEveryGoFileHasTheHeader(t *testing.T) {
	root := moduleRoot(t)
	header, err := os.ReadFile(filepath.Join(root, "hack/boilerplate.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(header, []byte("SPDX-License-Identifier: Apache-2.0")) {
		t.Fatalf("hack/boilerplate.go.txt names no Apache-2.0 SPDX identifier:\n%s", header)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if !hasHeader(src, header) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: no license header (hack/license-header.sh adds it)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Errorf("found %d Go files: the walk did not see the module", files)
	}
}

// The check itself, on made-up files.
func TestHasHeader(t *testing.T) {
	h := []byte("// Copyright 2026 The numapref Authors.\n// SPDX-License-Identifier: Apache-2.0\n")
	for name, c := range map[string]struct {
		src  string
		want bool
	}{
		"at the top":             {string(h) + "\npackage p\n", true},
		"below a constraint":     {"//go:build linux\n\n" + string(h) + "\npackage p\n", true},
		"none":                   {"package p\n", false},
		"another license":        {"// Copyright 2026 Someone.\n// SPDX-License-Identifier: MIT\n\npackage p\n", false},
		"below a package clause": {"package p\n\n" + string(h), false},
		"constraint, no blank":   {"//go:build linux\n" + string(h), false},
	} {
		if got := hasHeader([]byte(c.src), h); got != c.want {
			t.Errorf("%s: hasHeader = %v, want %v", name, got, c.want)
		}
	}
}
