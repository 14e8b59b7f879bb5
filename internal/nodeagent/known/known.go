// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package known

import (
	"iter"
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// Task is one task the agent gave a preferred node.
type Task struct {
	Start uint64 `json:"start"`
	// Prev is the value the task had before; undo restores it (normally -1).
	Prev int `json:"prev"`
	// Values are the nodes the agent may have left in the kernel for this task: the one it
	// set, plus, while a change is in flight, the one it is about to set. Undo acts only
	// when the task's value is one of these, so a value the application chose is left alone.
	Values []int `json:"values"`
}

// Clone is a copy of t that shares nothing with it.
func (t *Task) Clone() *Task {
	c := *t
	c.Values = slices.Clone(t.Values)
	return &c
}

// Equal says whether t and o record the same (nil only as nil).
func (t *Task) Equal(o *Task) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.Start == o.Start && t.Prev == o.Prev && slices.Equal(t.Values, o.Values)
}

// Container is one container the agent acted on.
type Container struct {
	// PodUID and Container are the key (the API's pod UID).
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	// Ref locates its cgroup (for a static pod, with the kubelet's pod UID).
	Ref   cgroups.ContainerRef `json:"ref"`
	Tasks map[int]*Task        `json:"tasks"`
}

// Apply makes change ch to the entry.
func (c *Container) Apply(ch Change) {
	c.Ref = ch.Ref
	for tid, t := range ch.Put {
		c.Tasks[tid] = t.Clone()
	}
	for _, tid := range ch.Forget {
		delete(c.Tasks, tid)
	}
}

// TakeValue takes node off the values task tid may hold: the kernel refused to set it.
func (c *Container) TakeValue(tid, node int) {
	if t := c.Tasks[tid]; t != nil {
		t.Values = slices.DeleteFunc(t.Values, func(v int) bool { return v == node })
	}
}

// Confirm records that task tid holds node, set by the agent and confirmed: the only
// value it may hold.
func (c *Container) Confirm(tid, node int) {
	if t := c.Tasks[tid]; t != nil {
		t.Values = []int{node}
	}
}

// Key is the container's key.
func (c *Container) Key() desire.ContainerKey {
	return desire.ContainerKey{PodUID: types.UID(c.PodUID), Container: c.Container}
}

// Clone is a copy of c that shares nothing with it.
func (c *Container) Clone() *Container {
	cc := *c
	cc.Tasks = make(map[int]*Task, len(c.Tasks))
	for tid, t := range c.Tasks {
		cc.Tasks[tid] = t.Clone()
	}
	return &cc
}

// Containers maps containers to what the agent set in them.
type Containers map[desire.ContainerKey]*Container

// Clone is a copy of the containers that shares nothing with them.
func (l Containers) Clone() Containers {
	out := make(Containers, len(l))
	for k, c := range l {
		out[k] = c.Clone()
	}
	return out
}

// Sorted returns the entries in a stable order (pod UID, then container), as the ledger's
// file lists them.
func (l Containers) Sorted() []*Container {
	out := make([]*Container, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.PodUID < b.PodUID || a.PodUID == b.PodUID && a.Container < b.Container
	})
	return out
}

// View reads containers without a way to change them: its methods answer questions or
// return copies. It sees the containers as they are when it is read, so a holder reads it
// only while their owner does not change them (within one pass).
type View struct{ c Containers }

// NewView is a read-only view of c.
func NewView(c Containers) View { return View{c: c} }

// Len is the number of containers.
func (v View) Len() int { return len(v.c) }

// Keys yields every container's key, in no order.
func (v View) Keys() iter.Seq[desire.ContainerKey] { return maps.Keys(v.c) }

// Entry is the view of container key's entry (one that does not exist when the agent
// knows nothing of key).
func (v View) Entry(key desire.ContainerKey) Entry { return Entry{c: v.c[key]} }

// Clone is a copy of every container.
func (v View) Clone() Containers { return v.c.Clone() }

// Entry reads one container's entry without a way to change it.
type Entry struct{ c *Container }

// Exists says whether the agent knows the container.
func (e Entry) Exists() bool { return e.c != nil }

// Ref is the container's reference as last recorded (the zero one when it does not exist).
func (e Entry) Ref() cgroups.ContainerRef {
	if e.c == nil {
		return cgroups.ContainerRef{}
	}
	return e.c.Ref
}

// Has says whether the entry knows task tid.
func (e Entry) Has(tid int) bool { return e.c != nil && e.c.Tasks[tid] != nil }

// Task is a copy of task tid's entry; ok is false when the entry does not know it.
func (e Entry) Task(tid int) (t Task, ok bool) {
	if e.c == nil || e.c.Tasks[tid] == nil {
		return Task{}, false
	}
	return *e.c.Tasks[tid].Clone(), true
}

// TIDs yields the tasks the entry knows, in no order.
func (e Entry) TIDs() iter.Seq[int] {
	return func(yield func(int) bool) {
		if e.c == nil {
			return
		}
		for tid := range e.c.Tasks {
			if !yield(tid) {
				return
			}
		}
	}
}

// Copy is a copy of the whole entry; ok is false when it does not exist.
func (e Entry) Copy() (c *Container, ok bool) {
	if e.c == nil {
		return nil, false
	}
	return e.c.Clone(), true
}

// Change is a change to one container's entry, as a pass plans it: its Ref, the task
// entries to Put (new tasks, or known ones with a value about to be set), and the tasks to
// Forget.
type Change struct {
	Ref    cgroups.ContainerRef
	Put    map[int]*Task
	Forget []int
}
