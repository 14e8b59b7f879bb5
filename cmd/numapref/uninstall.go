// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// uninstallFlags are `numapref uninstall-check`'s: the chart's pre-delete hook.
type uninstallFlags struct {
	kubeconfig, namespace, daemonSet string
	timeout, poll                    time.Duration
	failIfValuesStay                 bool
}

func (f *uninstallFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty: in-cluster")
	fs.StringVar(&f.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the agents' namespace")
	fs.StringVar(&f.daemonSet, "daemonset", "", "the agents' DaemonSet, which this deletes")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the agents' drains")
	fs.DurationVar(&f.poll, "poll", 2*time.Second, "how often the nodes' reports are read")
	fs.BoolVar(&f.failIfValuesStay, "fail-if-values-stay", false, "exit 1 when a node's values stay (helm uninstall then fails, and keeps the release)")
}

// runUninstallCheck is `numapref uninstall-check`, the chart's pre-delete hook: it deletes
// the agents' DaemonSet itself, while their RBAC still stands, waits (bounded) for each
// node's agent to report its drain (ConditionDrained, naming this DaemonSet), and prints,
// node by node, whether what the agent set was put back. helm uninstall shows that output
// (the hook's log policy). Without a running agent nothing is undone on a node: this says
// which nodes, instead of leaving it unsaid.
func runUninstallCheck(args []string) error {
	var f uninstallFlags
	fs := flag.NewFlagSet("uninstall-check", flag.ContinueOnError)
	f.register(fs)
	if err := parseWithLogFlags(fs, args); err != nil {
		return err
	}
	if f.namespace == "" || f.daemonSet == "" {
		return errors.New("uninstall-check: -namespace (or POD_NAMESPACE) and -daemonset are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("uninstall-check: loading kubeconfig: %w", err)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("uninstall-check: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout+30*time.Second)
	defer cancel()
	stay, err := checkUninstall(ctx, c, f, os.Stdout)
	if err != nil {
		return fmt.Errorf("uninstall-check: %w", err)
	}
	if stay > 0 && f.failIfValuesStay {
		return fmt.Errorf("uninstall-check: the values numapref set stay on %d nodes", stay)
	}
	return nil
}

// nodeDrain is what the check knows of one node's agent.
type nodeDrain struct {
	pod      string
	ready    bool
	decided  bool
	drained  bool
	message  string
	podGone  bool
	restarts int32
}

// checkUninstall deletes the DaemonSet, waits for the drains, prints one line per node to
// out, and returns on how many nodes values stay.
func checkUninstall(ctx context.Context, c client.Client, f uninstallFlags, out io.Writer) (int, error) {
	var ds appsv1.DaemonSet
	err := c.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: f.daemonSet}, &ds)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "numapref: DaemonSet %s/%s is already gone: nothing to wait for\n", f.namespace, f.daemonSet)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading DaemonSet %s/%s: %w", f.namespace, f.daemonSet, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return 0, fmt.Errorf("the DaemonSet's selector: %w", err)
	}
	nodes, err := agentNodes(ctx, c, f.namespace, selector, nil)
	if err != nil {
		return 0, err
	}
	uid := ds.UID
	background := metav1.DeletePropagationBackground
	if err := c.Delete(ctx, &ds, &client.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting DaemonSet %s/%s: %w", f.namespace, f.daemonSet, err)
	}
	fmt.Fprintf(out, "numapref: deleted DaemonSet %s/%s; waiting up to %s for the agents of %d nodes to put back what they set\n",
		f.namespace, f.daemonSet, f.timeout, len(nodes))
	deadline := time.Now().Add(f.timeout)
	for {
		if err := readDrains(ctx, c, nodes, string(uid)); err != nil {
			fmt.Fprintf(out, "numapref: %v (retrying)\n", err)
		}
		if _, err := agentNodes(ctx, c, f.namespace, selector, nodes); err != nil {
			fmt.Fprintf(out, "numapref: %v (retrying)\n", err)
		}
		if allDecided(nodes) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(f.poll):
		}
	}
	return printDrains(out, nodes, f.namespace), nil
}

// agentNodes lists the agent pods by node into known (a new map when nil): a pod no longer
// listed is marked gone.
func agentNodes(ctx context.Context, c client.Client, namespace string, selector labels.Selector, known map[string]*nodeDrain) (map[string]*nodeDrain, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return known, fmt.Errorf("listing the agent pods: %w", err)
	}
	if known == nil {
		known = map[string]*nodeDrain{}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			d := &nodeDrain{pod: p.Name}
			for _, cs := range p.Status.ContainerStatuses {
				d.restarts += cs.RestartCount
			}
			for _, cond := range p.Status.Conditions {
				d.ready = d.ready || cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
			}
			known[p.Spec.NodeName] = d
		}
		return known, nil
	}
	present := map[string]bool{}
	for _, p := range pods.Items {
		present[p.Name] = true
	}
	for _, d := range known {
		d.podGone = !present[d.pod]
	}
	return known, nil
}

// readDrains reads each undecided node's report for the Drained condition that names the
// DaemonSet uid.
func readDrains(ctx context.Context, c client.Client, nodes map[string]*nodeDrain, uid string) error {
	var errs []error
	for name, d := range nodes {
		if d.decided && d.drained {
			continue
		}
		var rep numav1.NumaNodeReport
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &rep); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("reading the report of node %s: %w", name, err))
			}
			continue
		}
		cond := meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionDrained)
		if cond == nil || !strings.Contains(cond.Message, uid) {
			continue
		}
		d.decided, d.drained, d.message = true, cond.Status == metav1.ConditionTrue, cond.Message
	}
	return errors.Join(errs...)
}

// allDecided: every node drained, or has no agent left to drain it (an agent that said it
// could not put everything back tries again until it is stopped).
func allDecided(nodes map[string]*nodeDrain) bool {
	for _, d := range nodes {
		if !d.drained && !d.podGone {
			return false
		}
	}
	return true
}

// printDrains prints one line per node, the nodes whose values stay first, and what to do;
// it returns how many nodes' values stay.
func printDrains(out io.Writer, nodes map[string]*nodeDrain, namespace string) int {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	var stay []string
	for _, n := range names {
		d := nodes[n]
		switch {
		case d.drained:
			fmt.Fprintf(out, "numapref: node %s: drained, every value its agent set is put back\n", n)
		case d.decided:
			stay = append(stay, n)
			fmt.Fprintf(out, "numapref: node %s: VALUES STAY: %s\n", n, d.message)
		default:
			stay = append(stay, n)
			why := "its agent did not report a drain in time"
			if !d.ready {
				why = fmt.Sprintf("its agent (pod %s) was not ready (%d restarts): it does not drain", d.pod, d.restarts)
			}
			fmt.Fprintf(out, "numapref: node %s: VALUES STAY: %s\n", n, why)
		}
	}
	if len(stay) > 0 {
		fmt.Fprintf(out, "numapref: on %d nodes (%s) the preferred nodes numapref set stay on their tasks until those exit or the node reboots, "+
			"and the agent's state dir stays in /var/lib/numapref/%s_<release>: install numapref again and uninstall it with those agents running "+
			"to undo them (docs/install/uninstall.md)\n", len(stay), strings.Join(stay, ", "), namespace)
	}
	return len(stay)
}
