// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a container image made from one static binary, without Docker: the same
// shape as the Dockerfile's final stage (the binary at Path, root user, no shell). With
// Rootfs, it is that root filesystem instead (one layer), with no binary added.
type Image struct {
	Ref        string   // e.g. numapref.local/numapref:e2e
	Binary     string   // the static binary on the host
	Path       string   // where it goes in the image, e.g. /numapref
	Rootfs     string   // a tarball of a whole root filesystem, instead of Binary and Path
	Entrypoint []string // defaults to [Path]
	Cmd        []string
	Env        []string // defaults to PATH=/
	User       string   // defaults to 0:0
}

// WriteTarball writes the image as a `docker save` tarball, which
// `ctr images import` reads.
func (im Image) WriteTarball(path string) error {
	layer, err := im.layer()
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0)}
	entry := im.Entrypoint
	if entry == nil && im.Rootfs == "" {
		entry = []string{im.Path}
	}
	env := im.Env
	if env == nil {
		env = []string{"PATH=/"}
	}
	user := im.User
	if user == "" {
		user = "0:0"
	}
	cfg.Config = v1.Config{Entrypoint: entry, Cmd: im.Cmd, User: user, Env: env}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	ref, err := name.ParseReference(im.Ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", im.Ref, err)
	}
	return tarball.WriteToFile(path, ref, img)
}

// layer is the image's one layer: Rootfs as it is, or /tmp and the binary at Path.
func (im Image) layer() (v1.Layer, error) {
	if im.Rootfs != "" {
		return tarball.LayerFromFile(im.Rootfs)
	}
	bin, err := os.ReadFile(im.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", im.Binary, err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: im.Path[1:], Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
}

// The images a local node runs, all built from this repository.
const (
	AgentImage    = "numapref.local/numapref:e2e"
	WorkloadImage = "numapref.local/workload:e2e"
	// DeviceDriverImage offers fake devices through the kubelet's device plugin and DRA
	// APIs (test/devicedriver), for the FollowDevices specs.
	DeviceDriverImage = "numapref.local/devicedriver:e2e"
)

// TarballName is the file name BuildImages gives the tarball of the image ref.
func TarballName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

// BuildImages compiles the agent and the workload as static binaries from the module at
// repo and writes the pause, workload and agent image tarballs into out.
func BuildImages(ctx context.Context, repo, out string) ([]string, error) {
	bins := map[string]string{"numapref": "./cmd/numapref", "workload": "./test/e2e/workload", "devicedriver": "./test/devicedriver"}
	for bin, pkg := range bins {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(out, bin), pkg)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v: %s", pkg, err, b)
		}
	}
	workload := filepath.Join(out, "workload")
	images := []Image{
		{Ref: PauseImage, Binary: workload, Path: "/workload", Cmd: []string{"pause"}},
		{Ref: WorkloadImage, Binary: workload, Path: "/workload", Cmd: []string{"work"}},
		// The Dockerfile's final stage: /numapref, entrypoint the binary, "agent" by default.
		{Ref: AgentImage, Binary: filepath.Join(out, "numapref"), Path: "/numapref", Cmd: []string{"agent"}},
		{Ref: DeviceDriverImage, Binary: filepath.Join(out, "devicedriver"), Path: "/devicedriver"},
	}
	var tars []string
	for _, im := range images {
		p := filepath.Join(out, TarballName(im.Ref))
		if err := im.WriteTarball(p); err != nil {
			return nil, fmt.Errorf("writing image %s: %w", im.Ref, err)
		}
		tars = append(tars, p)
	}
	return tars, nil
}
