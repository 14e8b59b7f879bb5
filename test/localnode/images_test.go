// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImageTarball writes an image of one binary and one of a root filesystem, reads each
// back as `ctr images import` would, and checks its configuration and its one layer's files.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs.tar")
	writeTar(t, rootfs, map[string]string{"etc/passwd": "postgres:x:100:102::/:/bin/sh\n", "usr/bin/server": "server"})
	tests := map[string]struct {
		im        Image
		wantCfg   v1.Config
		wantFiles map[string]string
	}{
		"one binary": {
			im:        Image{Ref: "numapref.local/one:test", Binary: bin, Path: "/one", Cmd: []string{"work"}},
			wantCfg:   v1.Config{Entrypoint: []string{"/one"}, Cmd: []string{"work"}, User: "0:0", Env: []string{"PATH=/"}},
			wantFiles: map[string]string{"tmp/": "", "one": "binary"},
		},
		"a root filesystem": {
			im: Image{Ref: "numapref.local/rootfs:test", Rootfs: rootfs, Cmd: []string{"server", "-x"}, User: "postgres",
				Env: []string{"PATH=/usr/bin"}},
			wantCfg:   v1.Config{Cmd: []string{"server", "-x"}, User: "postgres", Env: []string{"PATH=/usr/bin"}},
			wantFiles: map[string]string{"etc/passwd": "postgres:x:100:102::/:/bin/sh\n", "usr/bin/server": "server"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "image.tar")
			if err := tc.im.WriteTarball(path); err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCfg, cfg.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers %d (%v), want 1", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if diff := cmp.Diff(tc.wantFiles, readTar(t, rc)); diff != "" {
				t.Errorf("the layer's files (-want +got):\n%s", diff)
			}
		})
	}
}

func writeTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func readTar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}
