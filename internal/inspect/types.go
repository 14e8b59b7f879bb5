// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package inspect is the read-only inspect endpoint of the node agent: the JSON schema of
// its answer (shared by the agent and the kubectl-numapref plugin) and the HTTP handler.
//
// The endpoint is
//
//	GET /inspect/<namespace>/<pod>
//
// on the agent's metrics port. The agent's server authenticates the caller's token, which
// must be bound to the audience numapref-agent (TokenReview with spec.audiences), and
// authorizes get on the non-resource URL (SubjectAccessReview); the handler then asks a
// second SubjectAccessReview: get on the pod, in its namespace. The answer is a Pod (200),
// or an Error with status 400 (malformed path), 403 (the caller may not get the pod), 404
// (the pod is not on this node), 405 (not a GET), 500 (the node could not be read) or 503
// (the access review could not be made).
//
// Only a selected pod (one with a container that an annotation or a NumaPreference asks
// for) is described in detail: host cgroup paths, cpusets, task ids and their nodes. Of
// any other pod the answer says only that it is not selected (Selected false, every
// container NotSelected): the agent does not show the host side of what it does not
// manage.
//
// # Schema
//
// The schema is versioned by Pod.APIVersion ("inspect.numapref.io/v1"). Within a version,
// fields are only ever added; a field is never removed, renamed or given another meaning.
// Node ids follow the kernel: -1 is NUMA_NO_NODE ("no node"); a null pointer means the
// value could not be read, and the matching *Error field says why.
package inspect

import "github.com/numapref/numapref/internal/cpuset"

// Audience is the audience of the tokens the endpoint accepts: kubectl numapref asks the
// API server for one (TokenRequest), and the agent reviews each token for it (TokenReview
// with spec.audiences). The API server itself does not accept such a token, so an agent
// cannot replay the tokens it receives.
const Audience = "numapref-agent"

// The ConfigMap, in the agent's namespace, that publishes how to verify the agents'
// serving certificates: the CA that signed them and either the name they all carry (the
// chart's <release>-agent Service name, when every agent serves the same certificate: a
// client dials the agent's node IP and verifies this name), or, with CAConfigMapVerifyKey
// set to VerifyNode, that each agent serves a certificate of its own node: a client then
// verifies the address it dials and the node's name.
const (
	CAConfigMap          = "numapref-agent-ca"
	CAConfigMapCAKey     = "ca.crt"
	CAConfigMapNameKey   = "serverName"
	CAConfigMapVerifyKey = "verify"
	VerifyNode           = "node"
)

// APIVersion and Kind identify the schema of a Pod answer.
const (
	APIVersion = "inspect.numapref.io/v1"
	Kind       = "PodInspection"
)

// NoNode is the kernel's NUMA_NO_NODE: no preferred node.
const NoNode = -1

// Reasons of a Container that are not the agent's own (those are the API's Reason*
// constants: Applied, ContainerNotRunning, MemoryPinnedElsewhere, ...).
const (
	// ReasonNotSelected: neither an annotation nor a NumaPreference asks for the container.
	ReasonNotSelected = "NotSelected"
	// ReasonPending: the container is selected but the engine has not run a pass for this
	// desire yet (just created or changed).
	ReasonPending = "Pending"
)

// Pod is the answer to GET /inspect/<namespace>/<pod>: one pod as this node's agent sees it.
type Pod struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Node is the node whose agent answered.
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// QOSClass is status.qosClass, which places the pod's cgroup.
	QOSClass string `json:"qosClass,omitempty"`
	// Kernel is the agent's preferred-node backend, which Task.Forced is read from.
	Kernel Kernel `json:"kernel"`
	// Selected is true when a container of the pod is selected. When false, Containers
	// hold names and the reason NotSelected only. (Agents before this field did not send
	// it: a client tells an unselected pod by its containers' reasons.)
	Selected bool `json:"selected"`
	// Containers lists init containers, then app containers, in spec order.
	Containers []Container `json:"containers"`
}

// Kernel describes the agent's preferred-node backend.
type Kernel struct {
	// Backend is "prctl" (the kernel patch) or "emulator" (the agent's emulation, which
	// the scheduler does not act on).
	Backend   string `json:"backend"`
	Supported bool   `json:"supported"`
	// Reason says why the backend is or is not usable.
	Reason string `json:"reason,omitempty"`
}

// Container is one container of the pod: what the agent wants for it, its cgroup and
// cpuset, and its tasks.
type Container struct {
	Name string `json:"name"`
	// Init is true for an init (or sidecar) container.
	Init bool `json:"init,omitempty"`
	// ContainerID is status.containerStatuses[].containerID; empty while not started.
	ContainerID string `json:"containerID,omitempty"`

	// DesiredNode is the NUMA node the agent wants the container's tasks to prefer; null
	// when nothing asks for one (Reason NotSelected) or the request is invalid.
	DesiredNode *int `json:"desiredNode"`
	// Source is where DesiredNode comes from: "NumaPreference/<name>" or
	// "annotation/<key>"; empty when DesiredNode is null.
	Source string `json:"source,omitempty"`
	// Mode is how the node is chosen: Static, Spread, FollowCPUs, MostFreeMemory or
	// FollowDevices. For
	// the automatic modes DesiredNode is the node chosen on this host (null until the
	// engine chose), and Why says how it was chosen ("Spread: 2 of 4 pods on node 1").
	Mode string `json:"mode,omitempty"`
	Why  string `json:"why,omitempty"`
	// Reason is the outcome of the engine's last pass for the container: Applied, or why
	// it was skipped or failed (the API's reasons), or NotSelected, or Pending.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// ManagedTasks is how many of the container's tasks had DesiredNode after the
	// engine's last pass (0 unless Reason is Applied or a failure reason).
	ManagedTasks int `json:"managedTasks"`
	// PlacedAt says how the agent first placed the container: "Start" (by the container
	// runtime's NRI, before the container's first instruction), "AfterStart" (after it
	// started: through the API's pod status, a fork event or a rescan) or
	// "BeforeAgentStart" (by an earlier run of the agent); empty while the engine has not
	// set any of its tasks, or when Reason is not the engine's.
	PlacedAt string `json:"placedAt,omitempty"`
	// Mechanism says what gave the container its home: "prctl", "memoryPolicy" (a memory
	// policy the runtime set at its creation), "migrate" (its pages were moved home), or
	// several joined by "+" ("prctl+migrate"); "" while nothing did.
	Mechanism string `json:"mechanism,omitempty"`
	// MemoryPolicy is the memory policy the container's init holds, as numa_maps spells it
	// ("prefer:1"), when the agent read it: the container should hold its home's.
	MemoryPolicy string `json:"memoryPolicy,omitempty"`
	// Migration is where the move of the container's pages to its home stands, when its
	// NumaPreference asks for one (spec.pageMigration) and the node moves pages; null
	// otherwise.
	Migration *Migration `json:"migration,omitempty"`
	// Devices are the devices mode FollowDevices follows for the container, as the
	// kubelet allocated them, with their NUMA nodes; empty for the other modes and while
	// they are not read.
	Devices []Device `json:"devices,omitempty"`

	// Cgroup is the container's cgroup on this node; null when it could not be found
	// (CgroupError says why: not running, exited, unreadable).
	Cgroup      *Cgroup `json:"cgroup"`
	CgroupError string  `json:"cgroupError,omitempty"`
	// Cpuset is the container's effective cpuset; null when it could not be read.
	Cpuset      *Cpuset `json:"cpuset"`
	CpusetError string  `json:"cpusetError,omitempty"`
	// Tasks are the threads in the container's cgroups now, by TID; TasksError says why
	// the list is missing.
	Tasks      []Task `json:"tasks"`
	TasksError string `json:"tasksError,omitempty"`
}

// Device is one device the kubelet allocated to a container: a device plugin's
// (ResourceName) or a DRA driver's (Driver, Pool, Claim).
type Device struct {
	ResourceName    string `json:"resourceName,omitempty"`
	Driver          string `json:"driver,omitempty"`
	Pool            string `json:"pool,omitempty"`
	Claim           string `json:"claim,omitempty"`
	DeviceClassName string `json:"deviceClassName,omitempty"`
	// ID is the device plugin's device ID, or the DRA device's name in its pool.
	ID string `json:"id"`
	// Nodes are the NUMA nodes the device sits on; empty when it reports none.
	Nodes []int `json:"nodes,omitempty"`
}

// Cgroup locates a container's cgroup.
type Cgroup struct {
	// Path is the cgroup path relative to a hierarchy's root, as /proc/<pid>/cgroup shows
	// it.
	Path string `json:"path"`
	// TasksDir is the host directory whose task files (with its sub-cgroups') list the
	// container's tasks.
	TasksDir string `json:"tasksDir"`
	// CpusetDir is the container's directory in the cpuset hierarchy.
	CpusetDir string `json:"cpusetDir,omitempty"`
}

// Cpuset is a container's effective cpuset: the agent's own reading (cpuset.Cpuset), whose
// JSON form is this schema's too; TestCpusetSchema pins it, so a change there is seen.
type Cpuset = cpuset.Cpuset

// Task is one thread of the container.
type Task struct {
	TID  int `json:"tid"`
	TGID int `json:"tgid"`
	// Listed is true when the engine's last pass listed the task; a task of a selected
	// container that is not listed was born (or moved in) since, and gets the preference
	// on the engine's next pass.
	Listed bool `json:"listed"`
	// Forced is the task's forced preferred node as the agent's kernel backend reports it
	// (PR_PREFERRED_NID GET, or the emulator's): -1 for none, null when it could not be
	// read (ForcedError).
	Forced      *int   `json:"forced"`
	ForcedError string `json:"forcedError,omitempty"`
	// Effective is numa_preferred_nid of /proc/<tid>/sched: the node the kernel's NUMA
	// balancing prefers for the task now, -1 for none; null when the kernel does not show
	// it (built without NUMA balancing or scheduler debug) or the task exited
	// (EffectiveError). With the emulator backend it is the real kernel's own value,
	// which the emulated Forced does not change.
	Effective      *int   `json:"effective"`
	EffectiveError string `json:"effectiveError,omitempty"`
}

// Error is the body of every answer that is not 200.
type Error struct {
	// Status is the HTTP status code, repeated for clients that only see the body.
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// Migration is where the move of a container's pages to its home stands.
type Migration struct {
	// Node is the home the pages are moved to; State is Queued, Moving, Waiting or Ended,
	// and Ended, once it ended, why: Moved, PagesStayed, ProcessesGone,
	// PermissionDenied, CpusetPinned, Failed, Replaced or Cancelled.
	Node  int    `json:"node"`
	State string `json:"state"`
	Ended string `json:"ended,omitempty"`
	// PagesMoved and PagesNotMoved count the pages moved, and those the kernel left where
	// they were at each try.
	PagesMoved    int64 `json:"pagesMoved"`
	PagesNotMoved int64 `json:"pagesNotMoved"`
	// Error is the last error of a step, if any.
	Error string `json:"error,omitempty"`
}
