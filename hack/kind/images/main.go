// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command images writes the control-plane images kubeadm asks for, each made from one
// static binary with go-containerregistry (test/localnode's Image), as `docker save`
// tarballs for the kind node image (hack/kind/node-image.sh). No registry is needed.
//
//	go run ./hack/kind/images -out DIR REF=BINARY[,ARG...] ...
//
// The binary goes to /usr/local/bin/<its name>, on the image's PATH, since kubeadm's static
// pod manifests call the commands by name (kube-apiserver, etcd, ...); ARGs become the
// image's Cmd (the pause image: "pause").
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/numapref/numapref/test/localnode"
)

func main() {
	out := flag.String("out", "", "directory for the image tarballs")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: images -out DIR REF=BINARY[,ARG...] ...")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	for _, spec := range flag.Args() {
		ref, bin, ok := strings.Cut(spec, "=")
		if !ok || ref == "" || bin == "" {
			fail(fmt.Errorf("image %q: want REF=BINARY[,ARG...]", spec))
		}
		parts := strings.Split(bin, ",")
		path := "/usr/local/bin/" + filepath.Base(parts[0])
		im := localnode.Image{
			Ref: ref, Binary: parts[0], Path: path, Cmd: parts[1:],
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		}
		name := strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
		if err := im.WriteTarball(filepath.Join(*out, name)); err != nil {
			fail(fmt.Errorf("writing %s: %w", ref, err))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "images:", err)
	os.Exit(1)
}
