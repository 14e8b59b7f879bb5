// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localnode brings a real single-node Kubernetes cluster up on this machine and
// tears it down again (test/localnode does the work). Needs root.
//
//	go run ./hack/localnode up   -bin-dir $(hack/k8s-binaries.sh all)   (make local-up)
//	go run ./hack/localnode up   -bin-dir $(hack/k8s-binaries.sh all) -runtime-dir $(hack/runtime-binaries.sh)
//	                             (containerd 2.x with NRI and runc instead of Debian's)
//	go run ./hack/localnode down                                         (make local-down)
//	go run ./hack/localnode leftovers
//	go run ./hack/localnode reclaim   (tears down a local node or kind cluster whose run was killed)
//
// up builds the pause, workload and agent images and imports them, then prints the
// admin kubeconfig's path.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/numapref/numapref/test/kindnode"
	"github.com/numapref/numapref/test/localnode"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: localnode up|down|leftovers|reclaim [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", localnode.DefaultDir, "the node's directory")
	binDir := fs.String("bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet (hack/k8s-binaries.sh all)")
	runtimeDir := fs.String("runtime-dir", "", "directory with containerd, containerd-shim-runc-v2, ctr, runc (hack/runtime-binaries.sh: containerd 2.x with NRI); empty: Debian's from PATH")
	_ = fs.Parse(os.Args[2:]) // ExitOnError: a bad flag exits
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, *dir, *binDir, *runtimeDir, logf)
	case "down":
		var n *localnode.Node
		if n, err = localnode.Load(*dir); err == nil {
			err = n.Down(logf)
		} else if os.IsNotExist(err) {
			logf("localnode: no node recorded in %s", *dir)
			err = nil
		}
	case "leftovers":
		var n *localnode.Node
		if n, err = localnode.Load(*dir); err == nil {
			if left := n.Leftovers(); len(left) > 0 {
				fmt.Println(strings.Join(left, "\n"))
			}
		}
	case "reclaim":
		err = reclaim(ctx, *dir, logf)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localnode:", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, dir, binDir, runtimeDir string, logf func(string, ...any)) error {
	if binDir == "" {
		return fmt.Errorf("-bin-dir is required")
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "numapref-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	images, err := localnode.BuildImages(ctx, repo, tmp)
	if err != nil {
		return err
	}
	if _, err := kindnode.ReclaimOrphan(ctx, kindnode.DefaultDir, logf); err != nil {
		return err
	}
	n, err := localnode.UpRuntime(ctx, dir, binDir, runtimeDir, images, logf)
	if err != nil {
		return err
	}
	if sock := n.NRISocket(); sock != "" {
		logf("localnode: NRI socket %s", sock)
	}
	fmt.Println(n.Kubeconfig())
	return nil
}

// reclaim tears down the local node in dir and the kind cluster, each only if the run that
// started it was killed and none of its daemons runs any more.
func reclaim(ctx context.Context, dir string, logf func(string, ...any)) error {
	local, err := localnode.ReclaimOrphan(dir, logf)
	if err != nil {
		return err
	}
	kind, err := kindnode.ReclaimOrphan(ctx, kindnode.DefaultDir, logf)
	if err == nil && !local && !kind {
		logf("localnode: no orphaned cluster on this machine")
	}
	return err
}
