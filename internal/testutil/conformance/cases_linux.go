// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

const (
	get = prctl.CmdGet
	set = prctl.CmdSet
)

// cases is the suite (Run), in order, and rootCases its cases that need root (RunAsRoot).
// Every case leaves the values it set on threads that end with it, or clears them.
var cases = []testCase{
	{"get-self-default", getSelfDefault},
	{"set-get-self", setGetSelf},
	{"pid-zero-is-the-calling-thread", pidZeroIsThread},
	{"cmd-out-of-range", cmdOutOfRange},
	{"set-node-out-of-range", setNodeOutOfRange},
	{"get-pointer", getPointer},
	{"unknown-pid", unknownPID},
	{"pid-truncated-to-pid_t", pidTruncated},
	{"other-process", otherProcess},
	{"fork-child-starts-fresh", forkChildStartsFresh},
	{"clone-vm-child-inherits-across-exec", cloneVMChildInherits},
	{"vfork-child-inherits", vforkChildInherits},
	{"threads-inherit", threadsInherit},
	{"exec-keeps-value", execKeepsValue},
}

var rootCases = []testCase{
	{"ptrace-access", ptraceAccess},
}

func getSelfDefault(c *caseRun) {
	tid := unix.Gettid()
	c.wantValue(c.get("get-pid-0", 0, "self"), -1)
	c.wantValue(c.get("get-own-tid", tid, "self"), -1)
	c.wantSched("self", tid, -1, kernelsOwn)
}

func setGetSelf(c *caseRun) {
	tid := unix.Gettid()
	for _, nid := range distinct(0, c.s.node) {
		c.wantOK(c.set(fmt.Sprintf("set-%d", nid), 0, "self", nid))
		c.wantValue(c.get(fmt.Sprintf("get-after-set-%d", nid), 0, "self"), nid)
		c.wantValue(c.get(fmt.Sprintf("get-own-tid-after-set-%d", nid), tid, "self"), nid)
		c.wantSched(fmt.Sprintf("after-set-%d", nid), tid, nid, nid)
	}
	// SET -1 clears the force and the effective preferred node with it.
	c.wantOK(c.set("set-minus-1", 0, "self", -1))
	c.wantValue(c.get("get-after-clear", 0, "self"), -1)
	c.wantSched("after-clear", tid, -1, -1)
}

func pidZeroIsThread(c *caseRun) {
	tid := unix.Gettid()
	other := startOtherThread(c.T)
	c.wantOK(c.set("set-pid-0", 0, "self", c.s.node))
	var fromOther, otherSelf CallResult
	other.do(func() {
		otherSelf = c.get("other-thread-get-pid-0", 0, "other-thread")
		fromOther = c.get("other-thread-get-first-thread", tid, "first-thread")
	})
	c.wantValue(otherSelf, -1)
	c.wantValue(fromOther, c.s.node)
	c.wantValue(c.get("get-other-thread", other.tid, "other-thread"), -1)

	c.wantOK(c.set("set-other-thread", other.tid, "other-thread", c.s.node))
	other.do(func() { otherSelf = c.get("other-thread-get-pid-0-after-set", 0, "other-thread") })
	c.wantValue(otherSelf, c.s.node)
	c.wantSched("other-thread", other.tid, c.s.node, c.s.node)
	c.wantOK(c.set("clear-other-thread", other.tid, "other-thread", -1))
	c.wantOK(c.set("clear-self", 0, "self", -1))
}

func cmdOutOfRange(c *caseRun) {
	for _, cmd := range []int{2, 3, 255, 1 << 40, -1} {
		c.want(c.call(fmt.Sprintf("cmd-%d", cmd), cmd, 0, "self", 0, prctl.PointerValid), "ERANGE", 0)
	}
	// The command is checked before the pid and everything else.
	c.want(c.call("cmd-2-unknown-pid", 2, 0x7fffffff, "unknown", 0, prctl.PointerValid), "ERANGE", 0)
	c.want(c.call("cmd-2-bad-pointer", 2, 0, "self", 1<<20, prctl.PointerMisaligned), "ERANGE", 0)
	c.want(c.call("cmd-2-nil-pointer", 2, 0, "self", 0, prctl.PointerNil), "ERANGE", 0)
	c.wantValue(c.get("get-after", 0, "self"), -1)
}

func setNodeOutOfRange(c *caseRun) {
	n := c.s.possible
	c.observed["numPossibleNodes"] = n
	// The patch compares with num_possible_nodes(), a count.
	c.want(c.set(fmt.Sprintf("set-%d", n), 0, "self", n), "EINVAL", 0)
	c.want(c.set("set-minus-2", 0, "self", -2), "EINVAL", 0)
	c.want(c.set("set-huge", 0, "self", 1<<20), "EINVAL", 0)
	c.want(c.set("set-int-min", 0, "self", -1<<31), "EINVAL", 0)
	c.wantValue(c.get("get-after-refusals", 0, "self"), -1)

	c.wantOK(c.set("set-valid", 0, "self", c.s.node))
	c.want(c.set("set-invalid-after-valid", 0, "self", n), "EINVAL", 0)
	c.wantValue(c.get("get-keeps-valid", 0, "self"), c.s.node)

	// The kernel takes the node as an int: the upper 32 bits of the argument are dropped.
	c.wantOK(c.set("set-2^32-1-is-minus-1", 0, "self", 1<<32-1))
	c.wantValue(c.get("get-after-2^32-1", 0, "self"), -1)
	c.wantOK(c.set("set-2^32-plus-node", 0, "self", 1<<32+c.s.node))
	c.wantValue(c.get("get-after-2^32-plus-node", 0, "self"), c.s.node)
	c.wantOK(c.set("clear", 0, "self", -1))
}

func getPointer(c *caseRun) {
	c.want(c.call("get-misaligned", get, 0, "self", 0, prctl.PointerMisaligned), "EINVAL", 0)
	c.want(c.call("get-nil", get, 0, "self", 0, prctl.PointerNil), "EFAULT", 0)
	// SET ignores the pointer.
	c.wantOK(c.call("set-with-misaligned-pointer", set, 0, "self", c.s.node, prctl.PointerMisaligned))
	c.wantValue(c.get("get-after", 0, "self"), c.s.node)
	c.wantOK(c.call("clear-with-valid-pointer", set, 0, "self", -1, prctl.PointerValid))
	// The pid is checked before the pointer.
	c.want(c.call("get-nil-unknown-pid", get, 0x7fffffff, "unknown", 0, prctl.PointerNil), "ESRCH", 0)
}

func unknownPID(c *caseRun) {
	gone := goneTID(c.T)
	for _, p := range []struct {
		name string
		pid  int
	}{{"reaped", gone}, {"above-pid-max", 0x7fffffff}, {"minus-1", -1}, {"negative", -12345}} {
		c.want(c.get("get-"+p.name, p.pid, p.name), "ESRCH", 0)
		c.want(c.set("set-"+p.name, p.pid, p.name, 0), "ESRCH", 0)
		// The pid is checked before the node.
		c.want(c.set("set-bad-node-"+p.name, p.pid, p.name, 1<<20), "ESRCH", 0)
	}
}

func pidTruncated(c *caseRun) {
	tid := unix.Gettid()
	c.wantOK(c.set("set-self", 0, "self", c.s.node))
	// pid is a pid_t: the upper 32 bits of the argument are dropped.
	c.wantValue(c.get("get-2^32-plus-tid", 1<<32+tid, "self"), c.s.node)
	c.wantOK(c.set("clear-via-2^32-plus-tid", 1<<32+tid, "self", -1))
	c.wantValue(c.get("get-after", 0, "self"), -1)
}

func otherProcess(c *caseRun) {
	// The sleeper is spawned with CLONE_VM (os/exec), so it starts with the value of the
	// thread that spawns it: this case's. A thread the Go runtime made while another case
	// had a value set on its own thread inherited that value (threads inherit), and may
	// run this case: clear it first, or the sleeper starts at that value (CI saw 0).
	c.wantOK(c.set("clear-self-before-spawn", 0, "self", -1))
	sl := startSleeper(c.T, c.s.test, nil, false)
	c.wantValue(c.get("get-sleeper", sl.pid, "root-sleeper"), -1)
	c.wantOK(c.set("set-sleeper", sl.pid, "root-sleeper", c.s.node))
	c.wantValue(c.get("get-sleeper-after-set", sl.pid, "root-sleeper"), c.s.node)
	c.wantSched("root-sleeper", sl.pid, c.s.node, c.s.node)
	c.wantOK(c.set("clear-sleeper", sl.pid, "root-sleeper", -1))
	c.wantSched("root-sleeper-cleared", sl.pid, -1, -1)
}

// ptraceAccess: the patch checks ptrace_may_access(PTRACE_MODE_READ_REALCREDS) for GET and
// SET alike, before it looks at the node or the pointer.
func ptraceAccess(c *caseRun) {
	user := &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}
	// Its sleepers and helpers start with this thread's value (see otherProcess).
	c.wantOK(c.set("clear-self-before-spawn", 0, "self", -1))
	root := startSleeper(c.T, c.s.test, nil, false)
	userDumpable := startSleeper(c.T, c.s.test, user, false)
	userNotDumpable := startSleeper(c.T, c.s.test, user, true)

	// As uid 1000.
	calls := []callSpec{
		{Label: "get-pid-1", Cmd: get, PID: 1, Target: "pid-1", Ptr: prctl.PointerValid},
		{Label: "get-root-process", Cmd: get, PID: root.pid, Target: "root-sleeper", Ptr: prctl.PointerValid},
		{Label: "set-root-process", Cmd: set, PID: root.pid, Target: "root-sleeper", Nid: c.s.node, Ptr: prctl.PointerNil},
		{Label: "set-root-process-bad-node", Cmd: set, PID: root.pid, Target: "root-sleeper", Nid: 1 << 20, Ptr: prctl.PointerNil},
		{Label: "get-root-process-nil-pointer", Cmd: get, PID: root.pid, Target: "root-sleeper", Ptr: prctl.PointerNil},
		{Label: "get-self", Cmd: get, Target: "self", Ptr: prctl.PointerValid},
		{Label: "set-self", Cmd: set, Target: "self", Nid: c.s.node, Ptr: prctl.PointerNil},
		{Label: "get-self-after-set", Cmd: get, Target: "self", Ptr: prctl.PointerValid},
		{Label: "clear-self", Cmd: set, Target: "self", Nid: -1, Ptr: prctl.PointerNil},
		{Label: "get-same-uid-dumpable", Cmd: get, PID: userDumpable.pid, Target: "uid1000-sleeper", Ptr: prctl.PointerValid},
		{Label: "get-same-uid-not-dumpable", Cmd: get, PID: userNotDumpable.pid, Target: "uid1000-nondumpable-sleeper", Ptr: prctl.PointerValid},
	}
	r := c.reportOf(c.helper(helperRequest{Role: roleCalls, Calls: calls}, user, "uid1000"), roleCalls)
	c.want(c.helperCall(r, "get-pid-1"), "EPERM", 0)
	c.want(c.helperCall(r, "get-root-process"), "EPERM", 0)
	c.want(c.helperCall(r, "set-root-process"), "EPERM", 0)
	c.want(c.helperCall(r, "set-root-process-bad-node"), "EPERM", 0)
	c.want(c.helperCall(r, "get-root-process-nil-pointer"), "EPERM", 0)
	c.wantValue(c.helperCall(r, "get-self"), -1)
	c.wantOK(c.helperCall(r, "set-self"))
	c.wantValue(c.helperCall(r, "get-self-after-set"), c.s.node)
	c.wantOK(c.helperCall(r, "clear-self"))
	c.wantValue(c.helperCall(r, "get-same-uid-dumpable"), -1)
	c.want(c.helperCall(r, "get-same-uid-not-dumpable"), "EPERM", 0)

	// As root without CAP_SYS_PTRACE (dropped from its permitted and effective sets): just
	// another uid to __ptrace_may_access, and the capability module's
	// cap_ptrace_access_check refuses a target whose permitted set is not a subset of the
	// caller's (permitted, as the mode is not FSCREDS): a root process holding
	// CAP_SYS_PTRACE is out of reach.
	calls = []callSpec{
		{Label: "get-uid1000-process", Cmd: get, PID: userDumpable.pid, Target: "uid1000-sleeper", Ptr: prctl.PointerValid},
		{Label: "set-uid1000-process", Cmd: set, PID: userDumpable.pid, Target: "uid1000-sleeper", Nid: c.s.node, Ptr: prctl.PointerNil},
		{Label: "get-root-process", Cmd: get, PID: root.pid, Target: "root-sleeper", Ptr: prctl.PointerValid},
		{Label: "set-root-process", Cmd: set, PID: root.pid, Target: "root-sleeper", Nid: c.s.node, Ptr: prctl.PointerNil},
	}
	r = c.reportOf(c.helper(helperRequest{Role: roleCalls, Calls: calls, DropPtraceCap: true}, nil, "root-without-cap_sys_ptrace"), roleCalls)
	c.want(c.helperCall(r, "get-uid1000-process"), "EPERM", 0)
	c.want(c.helperCall(r, "set-uid1000-process"), "EPERM", 0)
	c.want(c.helperCall(r, "get-root-process"), "EPERM", 0)
	c.want(c.helperCall(r, "set-root-process"), "EPERM", 0)

	// As root with CAP_SYS_PTRACE permitted but not effective: the uid check and the
	// capability subset check (permitted sets) pass for a root target; a uid 1000 target
	// still needs the effective capability.
	calls = []callSpec{
		{Label: "get-root-process", Cmd: get, PID: root.pid, Target: "root-sleeper", Ptr: prctl.PointerValid},
		{Label: "get-uid1000-process", Cmd: get, PID: userDumpable.pid, Target: "uid1000-sleeper", Ptr: prctl.PointerValid},
	}
	r = c.reportOf(c.helper(helperRequest{Role: roleCalls, Calls: calls, DropPtraceCapEffective: true}, nil, "root-with-cap_sys_ptrace-not-effective"), roleCalls)
	c.wantValue(c.helperCall(r, "get-root-process"), -1)
	c.want(c.helperCall(r, "get-uid1000-process"), "EPERM", 0)

	// As root with CAP_SYS_PTRACE (this process).
	c.wantValue(c.get("root-get-uid1000-process", userDumpable.pid, "uid1000-sleeper"), -1)
	c.wantValue(c.get("root-get-uid1000-not-dumpable", userNotDumpable.pid, "uid1000-nondumpable-sleeper"), -1)
}

// forkChildStartsFresh: a child made without CLONE_VM starts at -1 (init_numa_balancing).
func forkChildStartsFresh(c *caseRun) {
	requireHeldSpawn(c)
	results := c.helper(helperRequest{Role: roleSpawn, Spawn: spawnFork, Nid: c.s.node}, nil, "spawner")
	parent := c.reportOf(results, roleSpawn)
	c.wantValue(c.helperCall(parent, "get-child-before-exec"), -1)
	child := c.reportOf(results, roleReportSelf)
	c.wantValue(c.helperCall(child, "get-self"), -1)
	if child.Sched != nil {
		c.checkSched("child-after-exec", *child.Sched, -1, -1)
	}
}

// cloneVMChildInherits: a CLONE_VM child keeps its parent's values, across exec.
func cloneVMChildInherits(c *caseRun) {
	requireHeldSpawn(c)
	before := c.assumedFresh()
	results := c.helper(helperRequest{Role: roleSpawn, Spawn: spawnCloneVM, Nid: c.s.node}, nil, "spawner")
	parent := c.reportOf(results, roleSpawn)
	if parent.Error != "" && c.Failed() {
		return
	}
	strict := c.s.target.AssumedFresh == nil || c.s.target.TracksBirths
	c.wantInherited(c.helperCall(parent, "get-child-before-exec"), c.s.node, strict, before)
	child := c.reportOf(results, roleReportSelf)
	got := c.helperCall(child, "get-self")
	c.wantInherited(got, c.s.node, strict, before)
	if child.Sched != nil && got.Value == c.s.node {
		c.checkSched("child-after-exec", *child.Sched, c.s.node, c.s.node)
	}
}

// vforkChildInherits: Go's os/exec uses clone(CLONE_VM|CLONE_VFORK), like posix_spawn.
// The child execs at once, so an emulator that does not learn the clone flags may only
// guess.
func vforkChildInherits(c *caseRun) {
	before := c.assumedFresh()
	results := c.helper(helperRequest{Role: roleSpawn, Spawn: spawnOSExec, Nid: c.s.node}, nil, "spawner")
	child := c.reportOf(results, roleReportSelf)
	strict := c.s.target.AssumedFresh == nil || c.s.target.KnowsCloneFlags
	c.wantInherited(c.helperCall(child, "get-self"), c.s.node, strict, before)
}

func threadsInherit(c *caseRun) {
	before := c.assumedFresh()
	strict := c.s.target.AssumedFresh == nil || c.s.target.TracksBirths
	r := c.reportOf(c.helper(helperRequest{Role: roleSpawn, Spawn: spawnThreads, Nid: c.s.node}, nil, "spawner"), roleSpawn)
	c.observed["newThreads"] = r.Observed["newThreads"]
	for _, call := range r.Calls {
		c.wantInherited(call, c.s.node, strict, before)
	}
}

func execKeepsValue(c *caseRun) {
	before := c.assumedFresh()
	strict := c.s.target.AssumedFresh == nil || c.s.target.TracksBirths
	results := c.helper(helperRequest{Role: roleSpawn, Spawn: spawnExec, Nid: c.s.node}, nil, "spawner")
	r := c.reportOf(results, roleReportSelf)
	got := c.helperCall(r, "get-self")
	c.wantInherited(got, c.s.node, strict, before)
	if r.Sched != nil && got.Value == c.s.node {
		c.checkSched("after-exec", *r.Sched, c.s.node, c.s.node)
	}
}

func requireHeldSpawn(c *caseRun) {
	testenv.Require(c.T, heldSpawn,
		fmt.Sprintf("amd64 (making a fork() or CLONE_VM child held before exec needs assembly written for amd64 only, not %s)", runtime.GOARCH),
		"run the suite on amd64")
}

func distinct(ids ...int) []int {
	var out []int
	seen := map[int]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
