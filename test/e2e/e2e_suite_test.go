// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e installs numapref with Helm on a real cluster and checks it from the outside:
// kubectl, the API, and the node's /proc and emulator task view.
//
//	make e2e                       the local provider: a real node on this machine
//	E2E_PROVIDER=kind make e2e     a three-node kind cluster (test/kindnode); make e2e-kind
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/numapref/numapref/test/localnode"
)

const (
	agentNamespace = "numapref-system"
	release        = "numapref"
	// emulatorView is where the emulator keeps its kernel-shaped task view on the node
	// (the chart's /run/numapref hostPath).
	emulatorView = "/run/numapref/emulator/proc"
)

var (
	prov       provider
	kubeconfig string
	plugin     string // kubectl-numapref, built from this tree
	suiteCtx   = context.Background()
)

func logf(format string, args ...any) { fmt.Fprintf(GinkgoWriter, format+"\n", args...) }

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "numapref e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	prov, err = newProvider(os.Getenv("E2E_PROVIDER"))
	Expect(err).NotTo(HaveOccurred())
	repo, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	tmp := GinkgoT().TempDir()
	images, err := localnode.BuildImages(ctx, repo, tmp)
	Expect(err).NotTo(HaveOccurred())
	plugin = filepath.Join(tmp, "kubectl-numapref")
	build := exec.CommandContext(ctx, "go", "build", "-o", plugin, "./cmd/kubectl-numapref")
	build.Dir = repo
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	start := time.Now()
	kubeconfig, err = prov.up(ctx, images)
	Expect(err).NotTo(HaveOccurred())
	logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if prov == nil {
		return
	}
	if os.Getenv("E2E_KEEP") == "1" {
		logf("E2E_KEEP=1: leaving the cluster up (KUBECONFIG=%s)", kubeconfig)
		return
	}
	start := time.Now()
	Expect(prov.down(ctx)).To(Succeed(), "teardown must leave nothing behind")
	logf("cluster torn down in %s", time.Since(start).Round(time.Millisecond))
}, NodeTimeout(5*time.Minute))

// On failure: the agent's logs and every event, so a red run explains itself. A
// JustAfterEach, which runs before the spec's AfterEach and its ordered container's
// AfterAll: these uninstall the chart, and the kubelet deletes the logs of deleted pods.
var _ = JustAfterEach(func() {
	if !CurrentSpecReport().Failed() || prov == nil {
		return
	}
	ctx, cancel := context.WithTimeout(suiteCtx, 30*time.Second)
	defer cancel()
	fmt.Fprintf(os.Stderr, "\n===== agent logs =====\n%s", prov.agentLogs(ctx))
	events, _ := kubectl(ctx, "get", "events", "-A", "--sort-by=.lastTimestamp")
	fmt.Fprintf(os.Stderr, "\n===== events =====\n%s", events)
	nps, _ := kubectl(ctx, "get", "numapref", "-A", "-o", "yaml")
	fmt.Fprintf(os.Stderr, "\n===== NumaPreferences =====\n%s", nps)
})

// kubectl runs the real kubectl (KUBECTL, built with the other Kubernetes binaries).
func kubectl(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "", envOr("KUBECTL", "kubectl"), args...)
}

// kubectlIn is kubectl with a manifest on stdin.
func kubectlIn(ctx context.Context, stdin string, args ...string) (string, error) {
	return run(ctx, stdin, envOr("KUBECTL", "kubectl"), args...)
}

func helm(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "", envOr("HELM", "helm"), args...)
}

func run(ctx context.Context, stdin, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
