package controllers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Node labels the agent publishes, so users can target capable nodes.
const (
	LabelKernelSupport = "numapref.io/kernel-support" // prctl, emulator or unsupported
	LabelNUMABalancing = "numapref.io/numa-balancing" // disabled, normal, memory-tiering, normal-memory-tiering
	LabelNUMANodes     = "numapref.io/numa-nodes"     // online NUMA node count
)

// NodeFacts are this host's kernel facts as node labels.
type NodeFacts struct {
	KernelSupport string
	NUMABalancing string
	NUMANodes     int
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=patch

// PublishNodeFacts returns a runnable that labels node with facts at start, under the
// agent's field manager (so it never fights other writers of the node's labels). It retries
// until the apiserver takes the labels: the agent's real work does not wait for it.
func PublishNodeFacts(c client.Client, node string, facts NodeFacts) manager.Runnable {
	return nodeRunnable(func(ctx context.Context) error {
		for {
			err := applyNodeLabels(ctx, c, node, facts)
			if err == nil {
				return nil
			}
			ctrl.LoggerFrom(ctx).Error(err, "Publishing node facts; retrying", "node", node)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(nodeFactsRetry):
			}
		}
	})
}

const nodeFactsRetry = 10 * time.Second

func applyNodeLabels(ctx context.Context, c client.Client, node string, facts NodeFacts) error {
	ac := corev1ac.Node(node).WithLabels(map[string]string{
		LabelKernelSupport: facts.KernelSupport,
		LabelNUMABalancing: facts.NUMABalancing,
		LabelNUMANodes:     strconv.Itoa(facts.NUMANodes),
	})
	err := c.Apply(ctx, ac, client.FieldOwner(AgentFieldManager(node)), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("labelling node %s: %w", node, err)
	}
	return nil
}

// NodeCacheOptions limits the manager's pod cache to the pods of one node; NumaPreferences
// stay cached cluster-wide.
func NodeCacheOptions(node string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
		},
		// Nothing reads managedFields from the cache (status is server-side applied from
		// fresh objects); dropping them keeps the agent's memory small.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
