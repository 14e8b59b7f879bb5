// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugin tests kubectl-numapref's release: the krew archive and manifest
// hack/plugin-archive.sh makes.
package plugin

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is what the test reads of a krew manifest.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// The archive holds the binary and the LICENSE, nothing else; the manifest names it by
// the semantic version, with the archive's own sha256; the binary says its version; a
// version that is not semver is refused.
func TestPluginArchive(t *testing.T) {
	dist := t.TempDir()
	script := filepath.Join("..", "..", "hack", "plugin-archive.sh")
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "VERSION=1.2.3-rc.1", "PLATFORMS=linux/"+goarch(t), "DIST="+dist, "URL_BASE=https://example.test/r")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	name := "kubectl-numapref_v1.2.3-rc.1_linux_" + goarch(t) + ".tar.gz"
	data, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, data, dist)
	if !slices.Equal(files, []string{"LICENSE", "kubectl-numapref"}) {
		t.Errorf("archive holds %v, want LICENSE and kubectl-numapref", files)
	}
	out, err := exec.Command(filepath.Join(dist, "kubectl-numapref"), "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "v1.2.3-rc.1" {
		t.Errorf("kubectl-numapref version: %q, %v; want v1.2.3-rc.1", out, err)
	}

	raw, err := os.ReadFile(filepath.Join(dist, "numapref.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("the manifest: %v\n%s", err, raw)
	}
	sum := sha256.Sum256(data)
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "numapref" || m.Spec.Version != "v1.2.3-rc.1" {
		t.Errorf("manifest %+v", m)
	}
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("platforms %+v, want one", m.Spec.Platforms)
	}
	p := m.Spec.Platforms[0]
	if p.URI != "https://example.test/r/"+name || p.SHA256 != hex.EncodeToString(sum[:]) || p.Bin != "kubectl-numapref" ||
		p.Selector.MatchLabels["os"] != "linux" || p.Selector.MatchLabels["arch"] != goarch(t) || len(p.Files) != 2 {
		t.Errorf("platform %+v, want the archive's URI and sha256 %x", p, sum)
	}

	bad := exec.Command(script)
	bad.Env = append(os.Environ(), "VERSION=1.2", "DIST="+t.TempDir())
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "not a semantic version") {
		t.Errorf("VERSION=1.2: %v\n%s; want a refusal naming semver", err, out)
	}
}

func goarch(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// untar extracts the gzipped tar data into dir and returns its file names.
func untar(t *testing.T, data []byte, dir string) []string {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(h.Name)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return names
}
