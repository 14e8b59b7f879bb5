// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// The ledger is one file of a bounded size for every container of the node. A container
// past its own share is refused before its tasks are read (MaxTasks); beside it, a full
// pass shares the ledger by namespace: when the containers it places would hold more task
// entries than the ledger can (Input.LedgerTasks), the namespace that holds most gives up
// its largest container, then again, until the rest fit. A namespace within an equal part
// of the ledger is never refused while another holds more, so one tenant's containers
// cannot put another's into LedgerError.

// ledgerTasks is how many task entries cp's ledger entry holds once its plan is applied:
// those known, with the new ones it puts and without those it forgets.
func (pl *planner) ledgerTasks(cp *ContainerPlan) int {
	entry := pl.in.Known.Entry(cp.Key)
	n := 0
	for range entry.TIDs() {
		n++
	}
	if cp.Entry != nil {
		for tid := range cp.Entry.Put {
			if !entry.Has(tid) {
				n++
			}
		}
		n -= len(cp.Entry.Forget)
	}
	return max(n, 0)
}

// shareLedger refuses containers of out, a full pass's plan, by namespace until the task
// entries of those it places fit the ledger.
func (pl *planner) shareLedger(out *Plan) {
	if pl.in.LedgerTasks <= 0 {
		return
	}
	tasks := map[int]int{}     // container index -> its entries
	byNS := map[string][]int{} // namespace -> its placed containers' indexes
	perNS := map[string]int{}  // namespace -> its entries
	total := 0
	for i := range out.Containers {
		cp := &out.Containers[i]
		if cp.Result.Reason != numav1.ReasonApplied {
			continue
		}
		ns := cp.Result.Desire.Pod.Namespace
		tasks[i] = pl.ledgerTasks(cp)
		byNS[ns] = append(byNS[ns], i)
		perNS[ns] += tasks[i]
		total += tasks[i]
	}
	for total > pl.in.LedgerTasks {
		// The namespace holding most (ties: by name), its largest container (ties: by key).
		ns := slices.MaxFunc(slices.Collect(maps.Keys(byNS)), func(a, b string) int {
			return cmp.Or(cmp.Compare(perNS[a], perNS[b]), cmp.Compare(b, a))
		})
		list := byNS[ns]
		at := 0
		for j, i := range list {
			if tasks[i] > tasks[list[at]] {
				at = j
			}
		}
		i := list[at]
		pl.refuseForShare(&out.Containers[i], ns, perNS[ns])
		total -= tasks[i]
		perNS[ns] -= tasks[i]
		if byNS[ns] = slices.Delete(list, at, at+1); len(byNS[ns]) == 0 {
			delete(byNS, ns)
		}
	}
}

// refuseForShare turns cp's plan into a refusal (TooManyTasks) for the ledger's share of
// namespace ns, which holds nsTasks: no SET (their tasks released), no entry, what was set
// before undone, and its processes not followed, so that a fork pass does not place it.
func (pl *planner) refuseForShare(cp *ContainerPlan, ns string, nsTasks int) {
	for _, s := range cp.Sets {
		pl.in.IDs.Release(s.Task)
	}
	skipped := 0
	if cp.Listing != nil {
		skipped = len(cp.Listing.Tasks)
	}
	for tgid, key := range pl.tgids {
		if key == cp.Key {
			delete(pl.tgids, tgid)
		}
	}
	r := cp.Result
	*cp = ContainerPlan{Key: cp.Key, Undo: true, Result: Result{
		Desire: r.Desire, Node: r.Node, Why: r.Why, Reason: numav1.ReasonTooManyTasks, SkippedTasks: skipped,
		Message: fmt.Sprintf("the node's ledger holds at most %d tasks and its selected containers would take more: "+
			"namespace %s holds the most (%d), so its largest containers are not placed until the others fit", pl.in.LedgerTasks, ns, nsTasks),
	}}
}
