// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command rootfsimage writes a container image of one root filesystem tarball (one
// layer, test/localnode's Image) as a `docker save` tarball, for the kernel lab's forking
// server (hack/kernel/server-image.sh). No registry is needed.
//
//	go run ./hack/kernel/rootfsimage -rootfs ROOTFS.tar -ref REF -out IMAGE.tar [-user U] [-env K=V]... -- CMD...
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/numapref/numapref/test/localnode"
)

func main() {
	var env envFlags
	rootfs := flag.String("rootfs", "", "the root filesystem tarball, the image's one layer")
	ref := flag.String("ref", "", "the image's reference, e.g. numapref.local/postgres:15")
	out := flag.String("out", "", "the image tarball to write")
	user := flag.String("user", "", "the image's user (default 0:0)")
	flag.Var(&env, "env", "an environment variable of the image, KEY=VALUE (repeatable)")
	flag.Parse()
	if *rootfs == "" || *ref == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: rootfsimage -rootfs ROOTFS.tar -ref REF -out IMAGE.tar [-user U] [-env K=V]... -- CMD...")
		os.Exit(2)
	}
	im := localnode.Image{Ref: *ref, Rootfs: *rootfs, Cmd: flag.Args(), Env: env, User: *user}
	if err := im.WriteTarball(*out); err != nil {
		fmt.Fprintln(os.Stderr, "rootfsimage:", err)
		os.Exit(1)
	}
}

// envFlags collects repeated -env KEY=VALUE flags.
type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, " ") }

func (e *envFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}
