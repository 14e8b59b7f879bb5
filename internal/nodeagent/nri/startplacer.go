// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// StartEngine is what StartPlacer needs of the apply engine.
type StartEngine interface {
	PlaceAtStart(desire.Desire) (plan.Result, bool)
	PolicyAtCreation(desire.Desire, cpuset.Cpuset) (plan.Result, mempolicy.Policy, bool)
}

// StartPlacer is the Placer of the agent's plugin: it places containers as the runtime
// starts them, before the kubelet posts their status. One decision, two triggers: desire.PlanStart
// decides as the node agent controller does (PlanPod), on the agent's cached pod (or,
// when the cache does not hold it yet, one made of the runtime's sandbox) and the cached
// NumaPreferences of its namespace; the engine's PlaceAtStart acts at once.
type StartPlacer struct {
	reader    client.Reader         // the agent's cache
	node      *cgroups.NodeIdentity // judges mirror pods: a static pod is placed once its UID is known
	engine    StartEngine
	persisted *PreferenceStore // nil: none
	log       logr.Logger
}

// A start never waits for the agent's cache: every container start on the node waits for
// the agent's answer (the runtime serializes its NRI events), selected or not. The cache
// is read with a context that is already done, which a synced cache answers at once (it
// checks whether it has synced before it looks at the context); one that has not synced
// (an agent started while the API is unreachable) fails at once, and the start is decided
// from the persisted NumaPreferences instead.

// NewStartPlacer returns the placer of the node agent whose cache reader holds its pods and
// the NumaPreferences (controllers/agent's NodeCacheOptions). persisted, when not nil, is
// what it decides from while that cache has not synced: the NumaPreferences the agent last
// saw (the node agent controller's NodeAgentOptions.Preferences).
func NewStartPlacer(reader client.Reader, node *cgroups.NodeIdentity, engine StartEngine, persisted *PreferenceStore, log logr.Logger) *StartPlacer {
	return &StartPlacer{reader: reader, node: node, engine: engine, persisted: persisted, log: log}
}

// PlaceAtStart decides for the container s and has the engine place it (Placer). It
// reads only the cache, or the persisted NumaPreferences while the cache has not synced:
// the runtime waits for its answer.
func (p *StartPlacer) PlaceAtStart(ctx context.Context, s Start) {
	d, ok := p.decide(ctx, s)
	if !ok {
		return
	}
	if r, ok := p.engine.PlaceAtStart(d); ok {
		p.log.V(1).Info("Placed at start", "pod", s.Namespace+"/"+s.PodName, "container", s.Container, "reason", r.Reason, "node", r.Node, "tasks", r.Tasks, "placedAt", r.PlacedAt)
	}
}

// PolicyAtCreation decides for the container s the runtime is creating as PlaceAtStart
// does, and returns the memory policy the engine gives it, in the runtime's names, or nil
// (Placer).
func (p *StartPlacer) PolicyAtCreation(ctx context.Context, s Start) *mempolicy.OCIPolicy {
	log := p.log.WithValues("pod", s.Namespace+"/"+s.PodName, "container", s.Container)
	cpus, err := numa.ParseList(s.CpusetCPUs)
	if err == nil {
		var mems []int
		mems, err = numa.ParseList(s.CpusetMems)
		if err == nil {
			d, ok := p.decide(ctx, s)
			if !ok {
				return nil
			}
			return p.policyOf(log, d, cpuset.Cpuset{CPUs: cpus, Mems: mems})
		}
	}
	log.Error(err, "Reading the created container's cpuset; it gets no memory policy", "cpus", s.CpusetCPUs, "mems", s.CpusetMems)
	return nil
}

// policyOf is the engine's memory policy for desire d of a container created with cpuset
// cs, in the runtime's names, or nil.
func (p *StartPlacer) policyOf(log logr.Logger, d desire.Desire, cs cpuset.Cpuset) *mempolicy.OCIPolicy {
	r, pol, ok := p.engine.PolicyAtCreation(d, cs)
	if !ok {
		if r.Reason != "" {
			log.V(1).Info("No memory policy at creation", "reason", r.Reason, "message", r.Message)
		}
		return nil
	}
	o, err := pol.OCI()
	if err != nil { // HomePolicy makes only soft policies: cannot happen
		log.Error(err, "Not giving the memory policy")
		return nil
	}
	log.V(1).Info("Memory policy at creation", "policy", pol.String(), "node", r.Node)
	return &o
}

// decide is the desire of container s, from the agent's cache or, while it has not
// synced, the persisted NumaPreferences; ok is false when nothing asks for it.
func (p *StartPlacer) decide(ctx context.Context, s Start) (desire.Desire, bool) {
	log := p.log.WithValues("pod", s.Namespace+"/"+s.PodName, "container", s.Container)
	var prefs numav1.NumaPreferenceList
	cctx, cancel := context.WithCancel(ctx)
	cancel() // no wait: see above
	err := p.reader.List(cctx, &prefs, client.InNamespace(s.Namespace))
	var pod *corev1.Pod
	var ok bool
	if err == nil {
		if pod, ok = p.pod(cctx, s); !ok {
			return desire.Desire{}, false
		}
	} else {
		// No cache yet: the sandbox's pod, and what the API last said.
		if prefs.Items, ok = p.stored(s.Namespace); !ok {
			log.Error(err, "Listing the cached NumaPreferences; the container is placed once the API reports it running")
			return desire.Desire{}, false
		}
		log.V(1).Info("Deciding from the persisted NumaPreferences: the cache has not synced", "error", err.Error())
		pod = sandboxPod(s)
	}
	d, ok := desire.PlanStart(p.node.Node(), pod, prefs.Items, s.Container, s.ContainerID)
	if !ok {
		return desire.Desire{}, false // nothing asks for it
	}
	d.Ref.CgroupsPath = s.CgroupsPath // the runtime's own word on where the container is
	return d, true
}

// pod is s's pod as the cache holds it (a static pod's mirror pod too: its cgroup's UID is
// the sandbox's), or, when the cache holds no pod of that name yet, one made of the
// runtime's sandbox: its metadata and labels, no spec (PlanStart then takes the container
// for an app container). ok is false when the cache holds another pod of that name: a pod
// deleted and made again, whose new one the API path places.
func (p *StartPlacer) pod(ctx context.Context, s Start) (*corev1.Pod, bool) {
	var pod corev1.Pod
	err := p.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.PodName}, &pod)
	switch {
	case err == nil:
		return &pod, p.node.Node().PodUID(&pod) == s.PodUID
	case !apierrors.IsNotFound(err):
		p.log.Error(err, "Reading the cached pod; the container is placed once the API reports it running", "pod", s.Namespace+"/"+s.PodName)
		return nil, false
	}
	return sandboxPod(s), true
}

// sandboxPod is the pod of the runtime's sandbox of s: its metadata and labels, no spec.
func sandboxPod(s Start) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.PodName, UID: types.UID(s.PodUID),
		Labels: s.Labels, Annotations: s.Annotations}}
}

// stored returns the persisted NumaPreferences of namespace; ok is false when there are
// none to go by.
func (p *StartPlacer) stored(namespace string) ([]numav1.NumaPreference, bool) {
	if p.persisted == nil {
		return nil, false
	}
	return p.persisted.InNamespace(namespace)
}
