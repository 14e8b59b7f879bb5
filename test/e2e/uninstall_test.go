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
		out := uninstallAgent(ctx)
		Expect(out).To(ContainSubstring("numapref: node %s: drained", primaryNode()), "helm uninstall prints the check's word")
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

var _ = Describe("helm uninstall with the agent crash-looping", Ordered, func() {
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
		_, _ = kubectl(ctx, "delete", "numapref", "e2e-stay", "-n", ns, "--ignore-not-found", "--wait=true")
		_, _ = kubectl(ctx, "delete", "pod", "stay", "-n", ns, "--ignore-not-found", "--grace-period=1", "--wait=true")
		if out, err := helm(ctx, "status", release, "-n", agentNamespace); err == nil {
			logf("uninstalling after a failed spec:\n%s", out)
			uninstallAgent(ctx)
		}
	}, NodeTimeout(3*time.Minute))

	It("names the node whose values stay, and a later install and uninstall put them back", func(ctx SpecContext) {
		installAgent(ctx)
		Expect(cl.Create(ctx, workloadPod("stay", map[string]string{"app": "e2e-stay"}, nil, "app"))).To(Succeed())
		ids = containerIDs(ctx, cl, ns, "stay")
		applyPreference(ctx, "e2e-stay")
		for _, id := range ids {
			Eventually(allPrefer(ctx, id, 0, 9)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}

		By("the primary node's agent crash-loops: its pod replaced under a flag it refuses (the old agent, stopped, does not drain)")
		// OnDelete, and only that node's pod deleted: a rolling update on several nodes
		// replaces one node's agent first, whichever, and stops there.
		ds := release + "-agent" // the chart's fullname is the release name when it holds "numapref"
		out, err := kubectl(ctx, "patch", "daemonset", ds, "-n", agentNamespace, "--type=json",
			"-p", `[{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}},`+
				`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--no-such-flag"}]`)
		Expect(err).NotTo(HaveOccurred(), out)
		onPrimary := []string{"-n", agentNamespace, "-l", "app.kubernetes.io/component=agent", "--field-selector", "spec.nodeName=" + primaryNode()}
		out, err = kubectl(ctx, append([]string{"delete", "pods", "--wait=true"}, onPrimary...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return kubectl(ctx, append([]string{"get", "pods", "-o",
				`go-template={{range .items}}{{range .status.containerStatuses}}{{.restartCount}} {{end}}{{end}}`}, onPrimary...)...)
		}).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(2*time.Second).Should(MatchRegexp(`^[1-9]`), "the primary node's new agent restarts")

		out = uninstallAgent(ctx)
		Expect(out).To(ContainSubstring("numapref: node %s: VALUES STAY", primaryNode()), "helm uninstall names the node:\n%s", out)
		for name, id := range ids {
			Consistently(allPreferOn(ctx, primaryNode(), id, 0, 9)).WithContext(ctx).WithTimeout(3*time.Second).
				Should(Succeed(), "container %s keeps the value no agent undid", name)
		}

		By("installed again, an agent finds the ledger; uninstalled with it running, it puts everything back")
		installAgent(ctx)
		out = uninstallAgent(ctx)
		Expect(out).To(ContainSubstring("numapref: node %s: drained", primaryNode()), out)
		Expect(kubectl(ctx, "delete", "numapref", "e2e-stay", "-n", ns, "--wait=true")).Error().NotTo(HaveOccurred())
		for name, id := range ids {
			Eventually(allPreferOn(ctx, primaryNode(), id, -1, 9)).WithContext(ctx).WithTimeout(30*time.Second).
				Should(Succeed(), "container %s after the second uninstall", name)
		}
	}, SpecTimeout(6*time.Minute))
})
