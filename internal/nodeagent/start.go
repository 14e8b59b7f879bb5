package nodeagent

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// PlanStart decides for one container that the runtime is about to start, before the
// kubelet has posted its status: the same PlanPod decides, on pod as if the container
// were already running with containerID (the runtime's form, "containerd://<id>"). pod is
// the agent's cached pod, whose spec holds the container's kind (init or app) and the
// requests a Spread weighs; a pod the cache does not hold yet is made from the runtime's
// sandbox (its metadata and labels only), where the container counts as an app container.
// ok is false when nothing asks for the container.
func PlanStart(pod *corev1.Pod, prefs []numav1.NumaPreference, container, containerID string) (d Desire, ok bool) {
	pod = pod.DeepCopy()
	if !slices.ContainsFunc(podContainers(pod), func(c podContainer) bool { return c.name == container }) {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: container})
	}
	started := corev1.ContainerStatus{Name: container, ContainerID: containerID,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	statuses := &pod.Status.ContainerStatuses
	if slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == container }) {
		statuses = &pod.Status.InitContainerStatuses
	}
	*statuses = slices.DeleteFunc(*statuses, func(s corev1.ContainerStatus) bool { return s.Name == container })
	*statuses = append(*statuses, started)
	for _, d := range PlanPod(pod, prefs).Desires {
		if d.Container == container {
			return d, true
		}
	}
	return Desire{}, false
}

// DefaultStartGrace is how long a desire learnt at a container's start counts while the
// API does not report the container running: the kubelet posts a new container's status
// within seconds, or, with many starts at once, tens of seconds (issue 23: 4.5 s for 30
// replicas on the local node).
const DefaultStartGrace = 2 * time.Minute

// startDesire is a desire PlaceAtStart learnt, at the time it did.
type startDesire struct {
	Desire
	at time.Time
	// placing is true until PlaceAtStart returns: the runtime waits for it before it
	// starts the container, so whatever pass sets the container meanwhile (a full pass
	// that took the pass lock first) places it at its start.
	placing bool
}

// PlaceAtStart places a container the runtime is about to start (NRI's StartContainer:
// internal/nodeagent/nri), before the API reports it running. d is its desire (PlanStart),
// whose Ref names the container the runtime starts. At once a one-container pass sets its
// tasks (at the start: the init, whose thread execs the program and keeps the node across
// exec), the ledger written ahead as ever. The desire counts until the API's desired
// state holds the same container (its Ref.ContainerID) or for StartGrace of the API
// answering (SetAPIReachable), whichever comes first: from then on the API's desired
// state alone rules, and a container it does not select is undone. ok is false when the engine did nothing: before it is synced (the
// first desired state, the API's or the persisted one) and once draining.
func (e *Engine) PlaceAtStart(d Desire) (r ContainerResult, ok bool) {
	key := d.Key()
	e.mu.Lock()
	if !e.synced || e.draining.Load() {
		e.mu.Unlock()
		return ContainerResult{}, false
	}
	e.starts[key] = startDesire{Desire: d, at: e.cfg.Clock.Now(), placing: true}
	e.mergeStarts()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if s, ok := e.starts[key]; ok {
			s.placing = false
			e.starts[key] = s
		}
		e.mu.Unlock()
	}()
	return e.startPass(key)
}

// SetAPIReachable tells the engine whether the API server answers the agent. While it
// does not, the agent's cache stands still and cannot confirm any start, so no start
// lapses: a container placed at its start during an outage stays placed through it. When
// the API answers again, each start's grace begins anew, for the kubelet to post the
// statuses it could not.
func (e *Engine) SetAPIReachable(reachable bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.apiDown == !reachable {
		return
	}
	e.apiDown = !reachable
	if reachable {
		now := e.cfg.Clock.Now()
		for key, s := range e.starts {
			s.at = now
			e.starts[key] = s
		}
	}
}

// placingAtStart says whether PlaceAtStart is placing container key: the runtime has not
// started it yet.
func (e *Engine) placingAtStart(key ContainerKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.starts[key].placing
}

// mergeStarts makes desired the API's desire with the starts it does not hold yet, and
// drops the starts it holds (the same container ID) or that are older than StartGrace
// while the API answers. It reports whether desired changed (then its generation moved
// on). e.mu is held.
func (e *Engine) mergeStarts() bool {
	now := e.cfg.Clock.Now()
	for key, s := range e.starts {
		lapsed := !e.apiDown && now.Sub(s.at) >= e.cfg.StartGrace
		if a, ok := e.api[key]; ok && sameContainer(a.Ref.ContainerID, s.Ref.ContainerID) || lapsed {
			delete(e.starts, key)
		}
	}
	merged := e.api
	if len(e.starts) > 0 {
		merged = maps.Clone(e.api)
		for key, s := range e.starts {
			merged[key] = s.Desire
		}
	}
	if e.synced && maps.EqualFunc(merged, e.desired, desireEqual) {
		return false
	}
	e.desired = merged
	e.desiredGen++
	return true
}

// sameContainer says whether two container IDs name one container: the API's has the
// runtime's scheme ("containerd://<id>"), the runtime's own, at a start, may not.
func sameContainer(a, b string) bool {
	bare := func(id string) string {
		if _, rest, ok := strings.Cut(id, "://"); ok {
			return rest
		}
		return id
	}
	return a != "" && bare(a) == bare(b)
}

// startPass checks the one container key at its start: none of its tasks is trusted and
// each has its start time read (a reused tid's ledger entry is refreshed). An automatic
// mode's node is chosen as a full pass chooses (resolve), with every other container's
// choice kept.
func (e *Engine) startPass(key ContainerKey) (ContainerResult, bool) {
	if e.draining.Load() {
		return ContainerResult{}, false
	}
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(nil, true)
	if !ok {
		return ContainerResult{}, false
	}
	e.persistDesired(p.desired, p.gen)
	d, ok := p.desired[key]
	if !ok {
		return ContainerResult{}, false // the API's desire came first and does not select it
	}
	pl := e.planner(p, e.resolved)
	choicesDirty := false
	if _, chosen := e.resolved[key]; d.Placement.Automatic() && !chosen {
		choicesDirty = pl.resolve(p.desired)
		e.resolved = pl.resolved
	}
	cp := pl.planContainer(key, d, nil)
	e.finish(p, plan{containers: []containerPlan{cp}}, choicesDirty)
	return p.results[key], true
}
