// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"time"

	"github.com/numapref/numapref/internal/numa/prctl"
)

// The Emulator is a backend as the real prctl is (Emulator is defined per system).
var (
	_ prctl.Kernel = (*Emulator)(nil)
	_ prctl.Raw    = (*Emulator)(nil)
)

// Options configures New.
type Options struct {
	// StateDir holds the emulated kernel state (required). Every process that emulates the
	// same machine must use the same directory.
	StateDir string
	// ProcRoot and SysRoot default to "/proc" and "/sys".
	ProcRoot, SysRoot string
	// TopologyRoot is the sysfs-like root whose devices/system/node says which nodes the
	// emulated machine has (default SysRoot): a fixture emulates a host of more nodes.
	TopologyRoot string
	// ForkEvents makes this emulator the machine's listener for task creation (the netlink
	// proc connector, needs CAP_NET_ADMIN) unless another process already is. Without any
	// listener, inheritance cannot be emulated: new tasks are assumed fresh.
	ForkEvents bool
	// TracefsRoot is where the listener finds tracefs, to read each new task's clone flags
	// and creator from the task:task_newtask tracepoint in a trace instance of its own.
	// Default: <SysRoot>/kernel/tracing, then <SysRoot>/kernel/debug/tracing, then a tracefs
	// mounted in a private mount namespace (needs CAP_SYS_ADMIN; nobody else sees it). Set
	// it to a directory where tracefs is not mounted to do without.
	TracefsRoot string
	// SharedState makes the state files writable by every user, for tests whose helper
	// processes run under other uids.
	SharedState bool
	// SyncTimeout bounds how long a lookup of a task the state does not know waits for the
	// listener to handle the task's birth. Default 2s.
	SyncTimeout time.Duration

	// now returns the clock tick count since boot; tests replace it.
	now func() uint64
}

// Stats describes the emulator's state and its guesses.
type Stats struct {
	// Tasks is the number of task entries in the state directory.
	Tasks int `json:"tasks"`
	// AssumedFresh counts tasks given -1 because their origin was unknown (machine-wide,
	// persisted). The agent should re-apply its values when it rises.
	AssumedFresh uint64 `json:"assumedFresh"`
	// Inherited counts tasks that got their creator's value (machine-wide, persisted).
	Inherited uint64 `json:"inherited"`
	// Listening: this emulator follows task creation. ListenerActive: some process does.
	Listening      bool `json:"listening"`
	ListenerActive bool `json:"listenerActive"`
	// KCMP: kcmp(2) works, so CLONE_VM children can be told from fork() children while
	// they have not exec'ed.
	KCMP bool `json:"kcmp"`
	// CloneTrace: the active listener reads every new task's clone flags and creator from
	// tracefs (task:task_newtask), so CLONE_VM children are known even after an exec, and a
	// new thread's creator is known.
	CloneTrace bool `json:"cloneTrace"`
	// EventsLost counts proc connector overflows seen by the active listener.
	EventsLost uint64 `json:"eventsLost"`
	// HandlingErrors counts events this emulator's listener could not handle; LastError is
	// the last such error.
	HandlingErrors uint64 `json:"handlingErrors"`
	LastError      string `json:"lastError,omitempty"`
}
