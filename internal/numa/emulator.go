package numa

import "time"

// The Emulator is a PreferredNode (and Raw) backend for kernels without the
// PR_PREFERRED_NID patch. It reproduces the patch's semantics (error codes and their
// order, num_possible_nodes(), the ptrace check, inheritance) and keeps the "kernel state"
// in a state directory, so the state outlives the process using it, as the kernel's does.
//
// What it reproduces:
//   - ERANGE for cmd >= 2, checked first; then ESRCH for an unknown pid (pid 0 is the
//     calling thread; pid and nid are truncated to 32 bits as the kernel does); then EPERM
//     unless the caller passes ptrace_may_access(PTRACE_MODE_READ_REALCREDS), for GET and
//     SET alike (uids and gids, dumpability, and the capability module's rule that,
//     without CAP_SYS_PTRACE in the caller's effective set, the target's permitted
//     capabilities must be a subset of the caller's); then EINVAL for a misaligned GET
//     pointer, EFAULT for a NULL one, and EINVAL for a SET node outside
//     [-1, num_possible_nodes()).
//   - SET n sets both numa_preferred_nid_force and numa_preferred_nid; SET -1 clears both.
//   - A task is named by (tid, start time): a recycled pid is a new task and holds -1.
//   - A fork() child starts at -1; threads and CLONE_VM children inherit their creator's
//     values, and keep them across exec.
//
// Its limits, all in the direction of "assume a fresh task" (-1), never of a wrong
// inherited value, and each counted in EmulatorStats.AssumedFresh so the agent re-applies:
//   - It learns of new tasks only from the proc connector (EmulatorOptions.ForkEvents,
//     CAP_NET_ADMIN). A task born while no emulator listened, or while events were lost,
//     and whose value it is asked for after something was forced, is assumed fresh.
//   - The fork event carries no clone flags and, for a new thread, does not name the thread
//     that called clone(). The listener reads both from the task:task_newtask tracepoint in
//     a trace instance of its own (EmulatorOptions.TracefsRoot; EmulatorStats.CloneTrace),
//     matched to the fork event by pid and time; then a CLONE_VM child is known even if it
//     has exec'ed, and a thread inherits from its creator. Without tracefs (or when the
//     trace lost events around a birth) it falls back to guessing: a new process is known
//     to be a CLONE_VM child only if kcmp(KCMP_VM) finds it still sharing its parent's
//     memory when the event is handled, so a vfork/posix_spawn child that has already
//     exec'ed by then is assumed fresh (a fork() child that has not exec'ed is recognised
//     by its unchanged memory layout); and if a new thread's group's older threads hold
//     different values, the thread is assumed fresh.
//   - An exec by a non-leader thread of a group whose threads held different values makes
//     the leader assumed fresh.
//   - A value set between a fork and the handling of its event is what the child gets.
//   - The ptrace model ignores security modules and user namespaces, and cannot see that a
//     task whose effective uid is 0 is not dumpable (it treats it as dumpable).
//   - Automatic NUMA balancing is not modelled: numa_preferred_nid is the kernel's own
//     value until a SET, then the emulated one.
//
// State directory layout: lock (flock, one writer), meta.json, listener (the listening
// process's shared page), and a read-only view of each task the emulator knows, placed and
// shaped like the kernel's: proc/<tgid>/task/<tid>/sched, with the lines
// `numa_preferred_nid_force : N` and `numa_preferred_nid : N` (plus the task's start time
// and how the value came about). ReadSchedNUMA(<StateDir>/proc/<tgid>/task, tid) reads
// it as it reads /proc; a task without a file holds -1 (or, if it started after something
// was forced, is decided on first use).

// EmulatorOptions configures NewEmulator.
type EmulatorOptions struct {
	// StateDir holds the emulated kernel state (required). Every process that emulates the
	// same machine must use the same directory.
	StateDir string
	// ProcRoot and SysRoot default to "/proc" and "/sys".
	ProcRoot, SysRoot string
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

// EmulatorStats describes the emulator's state and its guesses.
type EmulatorStats struct {
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
