// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stateDir is the release's state dir on the node (the chart's per-release hostPath dir).
const stateDir = "/var/lib/numapref/" + agentNamespace + "_" + release

var _ = Describe("helm uninstall", Ordered, func() {
	var (
		cl  client.Client
		ids map[string]string // container name -> ID of the placed pod
	)

	BeforeAll(func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		cl = newClient(cfg)
	})

	AfterAll(func(ctx SpecContext) {
		_, _ = kubectl(ctx, "delete", "numapref", "e2e-undo", "-n", ns, "--ignore-not-found", "--wait=true")
		_, _ = kubectl(ctx, "delete", "pod", "undo", "-n", ns, "--ignore-not-found", "--grace-period=1", "--wait=true")
		// Installed still if a spec failed before the uninstall.
		if out, err := helm(ctx, "status", release, "-n", agentNamespace); err == nil {
			logf("uninstalling after a failed spec:\n%s", out)
			uninstallAgent(ctx)
		}
	}, NodeTimeout(2*time.Minute))

	It("places a pod, and keeps its state in the release's state dir", func(ctx SpecContext) {
		installAgent(ctx)
		Expect(cl.Create(ctx, workloadPod("undo", map[string]string{"app": "e2e-undo"}, nil, "app", "helper"))).To(Succeed())
		ids = containerIDs(ctx, cl, ns, "undo")
		applyPreference(ctx, "e2e-undo")
		for _, id := range ids {
			// The workload's 8 threads plus the Go runtime's own.
			Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		Eventually(func() error {
			out, err := nodeShell(ctx, fmt.Sprintf("test -s %s/ledger.json && test -e %s/agent.lock", stateDir, stateDir))
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the ledger and the lock in %s", stateDir)
	}, SpecTimeout(3*time.Minute))

	It("puts every task's previous value back and removes the state dir", func(ctx SpecContext) {
		start := time.Now()
		uninstallAgent(ctx)
		// The pod and its NumaPreference are still there: only the uninstall undid the values.
		for name, id := range ids {
			Eventually(allPreferOn(ctx, primaryNode(), id, -1, 9)).WithContext(ctx).WithTimeout(30*time.Second).
				Should(Succeed(), "container %s after helm uninstall", name)
		}
		out, err := nodeShell(ctx, fmt.Sprintf("if [ -e %[1]s ]; then ls -la %[1]s; exit 1; fi", stateDir))
		Expect(err).NotTo(HaveOccurred(), "the state dir is still on the node:\n%s", out)
		logf("helm uninstall put every value back and removed %s within %s", stateDir, time.Since(start).Round(time.Millisecond))
	}, SpecTimeout(3*time.Minute))
})
