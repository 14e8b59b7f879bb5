package nodeagent

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// The automatic placement modes choose each container's node on this host, at the start of
// every full pass:
//   - FollowCPUs, per container: the node that holds most of its effective cpuset.cpus.
//     Not sticky: when the cpuset changes, the choice follows.
//   - Spread and MostFreeMemory, per pod (its selected containers go together), sticky:
//     a pod keeps the node it got while it stays selected, across passes and agent
//     restarts (choices.json beside the ledger); a pod that leaves frees its share.
//     Spread gives a new pod the node its group weighs least on (CPU requests), ties to
//     the lowest id; MostFreeMemory the node with the most MemFree.
//
// Every mode honours cpuset.mems: the candidates are the allowed online nodes the pod's
// containers may allocate on, so a container pinned to one node gets that node.

// resolution is the node the pass chose for one container, or why there is none.
type resolution struct {
	node    int
	why     string // shown in the Applied Event and inspect: "Spread: 2 of 4 pods on node 1"
	skip    string // a reason not to act, with msg
	message string
}

// choiceKey names a sticky choice: one pod in one placement group.
type choiceKey struct {
	PodUID types.UID `json:"podUID"`
	Group  string    `json:"group"`
}

// choice is a sticky choice, as the ledger's choices file keeps it.
type choice struct {
	choiceKey
	Mode numav1.PlacementMode `json:"mode"`
	Node int                  `json:"node"`
	Why  string               `json:"why"`
	// Weight is the pod's weight in its Spread group.
	Weight int64 `json:"weight,omitempty"`
}

// podMembers are the selected containers of one pod in one placement group.
type podMembers struct {
	key       choiceKey
	pod       types.NamespacedName
	placement Placement
	keys      []ContainerKey
}

// hostCgroup is a container's cgroup and cpuset as read once per pass.
type hostCgroup struct {
	cg  *cgroups.Container
	cs  cpuset.Cpuset
	err error
}

// cgroupOf returns d's cgroup and cpuset, read at most once per pass.
func (pl *planner) cgroupOf(key ContainerKey, d Desire) (*cgroups.Container, cpuset.Cpuset, error) {
	if h, ok := pl.cgroups[key]; ok {
		return h.cg, h.cs, h.err
	}
	var h hostCgroup
	h.cg, h.err = pl.resolver.Resolve(d.Ref)
	if h.err == nil {
		h.cs, h.err = pl.resolver.Cpuset(h.cg)
	}
	pl.cgroups[key] = h
	return h.cg, h.cs, h.err
}

// resolve chooses the node of every container whose mode is automatic, updating the sticky
// choices, and reports whether the choices changed.
func (pl *planner) resolve(desired map[ContainerKey]Desire) bool {
	pl.resolved = map[ContainerKey]resolution{}
	groups := map[choiceKey]*podMembers{}
	for key, d := range desired {
		if d.Refusal != "" || !d.Placement.Automatic() || !pl.support.Supported {
			continue
		}
		if d.Placement.Mode == numav1.PlacementModeFollowCPUs {
			pl.resolved[key] = pl.followCPUs(key, d)
			continue
		}
		ck := choiceKey{PodUID: d.PodUID, Group: d.Placement.Group}
		m := groups[ck]
		if m == nil {
			m = &podMembers{key: ck, pod: d.Pod, placement: d.Placement}
			groups[ck] = m
		}
		m.keys = append(m.keys, key)
	}
	dirty := false
	for ck := range pl.choices {
		if m, ok := groups[ck]; !ok || m.placement.Mode != pl.choices[ck].Mode {
			delete(pl.choices, ck) // the pod left, or its preference changed mode: its share is free
			dirty = true
		}
	}
	// Kept choices first, so that they count in the loads before any new pod is placed;
	// then new pods in a stable order.
	pods := make([]*podMembers, 0, len(groups))
	for _, m := range groups {
		pods = append(pods, m)
	}
	slices.SortFunc(pods, func(a, b *podMembers) int {
		_, ka := pl.choices[a.key]
		_, kb := pl.choices[b.key]
		return cmp.Or(-cmp.Compare(boolInt(ka), boolInt(kb)), cmp.Compare(a.pod.Namespace, b.pod.Namespace),
			cmp.Compare(a.pod.Name, b.pod.Name), cmp.Compare(a.key.PodUID, b.key.PodUID), cmp.Compare(a.key.Group, b.key.Group))
	})
	sizes := map[string]int{} // pods per group, for the Spread message
	for _, m := range pods {
		sizes[m.key.Group]++
	}
	memFree := map[int]uint64{}
	for _, m := range pods {
		slices.SortFunc(m.keys, func(a, b ContainerKey) int { return cmp.Compare(a.Container, b.Container) })
		res, changed := pl.choosePod(m, desired, sizes[m.key.Group], memFree)
		dirty = dirty || changed
		for _, k := range m.keys {
			if r, ok := res[k]; ok {
				pl.resolved[k] = r
			}
		}
	}
	return dirty
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// choosePod resolves the containers of one pod of a Spread or MostFreeMemory group.
func (pl *planner) choosePod(m *podMembers, desired map[ContainerKey]Desire, groupSize int, memFree map[int]uint64) (map[ContainerKey]resolution, bool) {
	out := map[ContainerKey]resolution{}
	candidates, skip, msg := pl.candidates(m.placement)
	var usable []ContainerKey
	for _, k := range m.keys {
		if skip != "" {
			out[k] = resolution{skip: skip, message: msg}
			continue
		}
		_, cs, err := pl.cgroupOf(k, desired[k])
		if err != nil {
			out[k] = resolution{skip: cgroupReason(err), message: err.Error()}
			continue
		}
		if len(cs.Mems) > 0 {
			within := intersect(candidates, cs.Mems)
			if len(within) == 0 {
				out[k] = resolution{skip: numav1.ReasonMemoryPinnedElsewhere,
					message: fmt.Sprintf("cpuset.mems of the container is %s, and %s", numa.FormatList(cs.Mems), describeCandidates(m.placement, candidates))}
				continue
			}
			candidates = within
		}
		usable = append(usable, k)
	}
	if len(usable) == 0 {
		return out, false
	}
	c, kept := pl.choices[m.key]
	changed := false
	if !kept || !slices.Contains(candidates, c.Node) {
		delete(pl.choices, m.key) // a choice that no longer fits weighs nowhere
		c = choice{choiceKey: m.key, Mode: m.placement.Mode, Weight: m.placement.Weight}
		switch {
		case len(candidates) == 1 && len(pl.topo.nodes) > 1:
			c.Node = candidates[0]
			c.Why = fmt.Sprintf("%s: the only node the pod may use here", m.placement.Mode)
		case m.placement.Mode == numav1.PlacementModeSpread:
			c.Node, c.Why = pl.spreadNode(m, candidates, groupSize)
		default:
			c.Node, c.Why = pl.freestNode(candidates, memFree)
		}
		pl.choices[m.key] = c
		changed = true
	}
	for _, k := range usable {
		out[k] = resolution{node: c.Node, why: c.Why}
	}
	return out, changed
}

// candidates are the online nodes the placement allows, or why there are none.
func (pl *planner) candidates(p Placement) ([]int, string, string) {
	online := pl.topo.nodes
	if p.Allowed == "" {
		return slices.Clone(online), "", ""
	}
	allowed, err := numa.ParseList(p.Allowed)
	if err != nil { // Allowed is formatted by the agent: cannot happen
		return nil, numav1.ReasonNodeNotPresent, fmt.Sprintf("allowed nodes %q: %v", p.Allowed, err)
	}
	c := intersect(online, allowed)
	if len(c) == 0 {
		return nil, numav1.ReasonNodeNotPresent, fmt.Sprintf("none of the allowed NUMA nodes (%s) is online on this host (online: %s)",
			p.Allowed, numa.FormatList(online))
	}
	return c, "", ""
}

func describeCandidates(p Placement, candidates []int) string {
	if p.Allowed == "" {
		return fmt.Sprintf("the host's nodes are %s", numa.FormatList(candidates))
	}
	return fmt.Sprintf("the allowed online nodes are %s", numa.FormatList(candidates))
}

// spreadNode gives a new pod of a Spread group the candidate its group weighs least on.
func (pl *planner) spreadNode(m *podMembers, candidates []int, groupSize int) (int, string) {
	load := map[int]int64{}
	pods := map[int]int{}
	for _, c := range pl.choices {
		if c.Group == m.key.Group {
			load[c.Node] += c.Weight
			pods[c.Node]++
		}
	}
	best := candidates[0]
	for _, n := range candidates[1:] {
		if load[n] < load[best] {
			best = n
		}
	}
	return best, fmt.Sprintf("Spread: %d of %d pods on node %d", pods[best]+1, groupSize, best)
}

// freestNode gives a new pod the candidate with the most free memory now.
func (pl *planner) freestNode(candidates []int, memFree map[int]uint64) (int, string) {
	for _, n := range candidates {
		if _, ok := memFree[n]; !ok {
			free, err := pl.memFree(n)
			if err != nil {
				pl.log.Error(err, "Reading free memory; counting it as none", "numaNode", n)
			}
			memFree[n] = free
		}
	}
	best := candidates[0]
	for _, n := range candidates[1:] {
		if memFree[n] > memFree[best] {
			best = n
		}
	}
	return best, fmt.Sprintf("MostFreeMemory: %d MiB free on node %d, the most of %s", memFree[best]>>20, best, numa.FormatList(candidates))
}

// followCPUs prefers the node holding most of the container's effective cpuset.cpus.
func (pl *planner) followCPUs(key ContainerKey, d Desire) resolution {
	candidates, skip, msg := pl.candidates(d.Placement)
	if skip != "" {
		return resolution{skip: skip, message: msg}
	}
	_, cs, err := pl.cgroupOf(key, d)
	if err != nil {
		return resolution{skip: cgroupReason(err), message: err.Error()}
	}
	perNode := map[int]int{}
	for _, cpu := range cs.CPUs {
		if n, ok := pl.topo.cpuNode[cpu]; ok {
			perNode[n]++
		}
	}
	touched := 0
	for _, n := range pl.topo.nodes {
		if perNode[n] > 0 {
			touched++
		}
	}
	if len(cs.CPUs) == 0 || (len(pl.topo.nodes) > 1 && touched == len(pl.topo.nodes)) {
		cpus := numa.FormatList(cs.CPUs)
		if len(cs.CPUs) == 0 {
			cpus = "every CPU (no cpuset)"
		}
		return resolution{skip: numav1.ReasonCPUsNotPinned,
			message: fmt.Sprintf("cpuset.cpus %s spans every NUMA node (%s): there is no node to follow", cpus, numa.FormatList(pl.topo.nodes))}
	}
	if len(cs.Mems) > 0 {
		candidates = intersect(candidates, cs.Mems)
	}
	best, most := -1, 0
	for _, n := range candidates {
		if perNode[n] > most {
			best, most = n, perNode[n]
		}
	}
	if best < 0 {
		return resolution{skip: numav1.ReasonCPUsPinnedElsewhere,
			message: fmt.Sprintf("cpuset.cpus %s lies on no node the container may prefer (%s)", numa.FormatList(cs.CPUs), describeCandidates(d.Placement, candidates))}
	}
	return resolution{node: best, why: fmt.Sprintf("FollowCPUs: %d of %d CPUs of cpuset.cpus %s are on node %d", most, len(cs.CPUs), numa.FormatList(cs.CPUs), best)}
}

// intersect returns the ids of a that are in b, in a's order.
func intersect(a, b []int) []int {
	var out []int
	for _, n := range a {
		if slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}
