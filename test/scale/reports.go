// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/controllers/agent"
)

// standInReport is the report an agent writes for podsPerNode pods of one container each,
// all Applied to NUMA node 0 with tasks tasks each, on a node with stubFacts. In agents
// mode the harness checks that a real agent wrote exactly this.
func (w *world) standInReport(generation int64, tasks int32) numav1.NumaNodeReportStatus {
	pods := int32(w.podsPerNode)
	return numav1.NumaNodeReportStatus{
		KernelSupport: stubFacts.KernelSupport, NumaBalancing: stubFacts.NUMABalancing, NumaNodes: int32(stubFacts.NUMANodes),
		Totals: numav1.ReportTotals{Preferences: 1, Pods: pods, Tasks: pods * tasks},
		Preferences: []numav1.PreferenceReport{{
			Namespace: w.namespace, Name: w.preference, Generation: generation,
			Pods: pods, Containers: pods, Tasks: pods * tasks,
			PodsByNode: []numav1.NodeCount{{Node: 0, Pods: pods}},
		}},
	}
}

// checkStandIn compares the report the agent of node-0 wrote with standInReport.
func (w *world) checkStandIn(ctx context.Context, generation int64, tasks int32) error {
	var rep numav1.NumaNodeReport
	if err := w.c.Get(ctx, client.ObjectKey{Name: nodeName(0)}, &rep); err != nil {
		return fmt.Errorf("reading the report of %s: %w", nodeName(0), err)
	}
	if want := w.standInReport(generation, tasks); !equality.Semantic.DeepEqual(want, rep.Status) {
		return fmt.Errorf("the agent of %s wrote %+v, the stand-in report is %+v", nodeName(0), rep.Status, want)
	}
	return nil
}

// applyReports writes every node's stand-in report as its agent would: server-side apply
// under the agent's field manager, forced, owned by the Node. A refused write is tried
// again a second later until ctx ends; failures counts them.
func (w *world) applyReports(ctx context.Context, generation int64, tasks int32, failures *atomic.Int64) error {
	data, err := json.Marshal(w.standInReport(generation, tasks))
	if err != nil {
		return err
	}
	return w.parallel(ctx, w.nodes, func(ctx context.Context, i int) error {
		var status numaac.NumaNodeReportStatusApplyConfiguration
		if err := json.Unmarshal(data, &status); err != nil {
			return fmt.Errorf("converting the stand-in report: %w", err)
		}
		node := nodeName(i)
		ac := numaac.NumaNodeReport(node).WithStatus(&status).
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("Node").
				WithName(node).WithUID(w.nodeUIDs[i]))
		return retry(ctx, failures, "writing the report of "+node, func() error {
			return w.c.Apply(ctx, ac, client.FieldOwner(agent.AgentFieldManager(node)), client.ForceOwnership)
		})
	})
}

// standInWatches opens, for every node, the two watches whose bytes an agent receives
// when its report or a NumaPreference changes, as NodeCacheOptions sets them up: every
// NumaPreference, and its own report by a field selector. (Its pods do not change here.)
func (w *world) standInWatches(ctx context.Context, wc *watchCounter) error {
	prefs := "/apis/" + numav1.GroupVersion.String() + "/numapreferences"
	reports := "/apis/" + numav1.GroupVersion.String() + "/numanodereports"
	var paths []string
	var queries []url.Values
	for i := range w.nodes {
		paths = append(paths, prefs, reports)
		queries = append(queries, nil, url.Values{"fieldSelector": {"metadata.name=" + nodeName(i)}})
	}
	return wc.startWatches(ctx, w.workers, paths, queries)
}
