// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package migrate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// helperEnv makes the test binary a process that touches the MiB it names, says where they
// are on its stdout, and waits for its stdin to close.
const helperEnv = "NUMAPREF_MIGRATE_HELPER_MIB"

// hugeEnv makes the helper ask for transparent huge pages (MADV_HUGEPAGE) before its touch,
// as a kernel whose THP setting is "always" gives a large anonymous mapping unasked.
const hugeEnv = "NUMAPREF_MIGRATE_HELPER_HUGE"

func TestMain(m *testing.M) {
	if mib := os.Getenv(helperEnv); mib != "" {
		runHelper(mib)
	}
	os.Exit(m.Run())
}

func runHelper(mib string) {
	n, err := strconv.Atoi(mib)
	if err != nil {
		os.Exit(2)
	}
	mem, err := unix.Mmap(-1, 0, n<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		os.Exit(3)
	}
	if os.Getenv(hugeEnv) != "" {
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // a kernel without THP says EINVAL: small pages
	}
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 1
	}
	fmt.Printf("%x %d\n", uintptr(unsafe.Pointer(&mem[0])), len(mem))
	_, _ = io.Copy(io.Discard, os.Stdin)
	runtime.KeepAlive(mem)
	os.Exit(0)
}

// helper is a child process holding touched memory.
type helper struct {
	pid  int
	addr uintptr
	size int
}

func startHelper(t *testing.T, mib int, env ...string) helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+strconv.Itoa(mib)), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper's address: %v", err)
	}
	var h helper
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "%x %d", &h.addr, &h.size); err != nil {
		t.Fatalf("the helper's address %q: %v", line, err)
	}
	h.pid = cmd.Process.Pid
	return h
}

func node0Pages(t *testing.T, pid int) uint64 {
	t.Helper()
	pages, err := NodePages("/proc", pid, uint64(os.Getpagesize()))
	if err != nil {
		t.Fatal(err)
	}
	return pages[0]
}

// On this one-node machine migrate_pages from node 0 to node 0 reaches the kernel, passes
// its checks and moves nothing (do_migrate_pages skips a node mapped to itself). This
// proves the call and its masks, not that pages move between nodes: the kernel lab's two
// nodes do.
func TestPagesFromANodeToItself(t *testing.T) {
	h := startHelper(t, 32)
	before := node0Pages(t, h.pid)
	if want := uint64(32 << 20 / os.Getpagesize()); before < want {
		t.Fatalf("the helper has %d pages on node 0; want at least the %d it touched", before, want)
	}
	notMoved, err := Pages(h.pid, numa.NewNodeMask(0), numa.NewNodeMask(0))
	if err != nil || notMoved != 0 {
		t.Fatalf("Pages(0 -> 0) = %d, %v; want 0, nil", notMoved, err)
	}
	if after := node0Pages(t, h.pid); after < before*9/10 {
		t.Errorf("after Pages(0 -> 0) node 0 holds %d pages, before %d", after, before)
	}
	// A node the machine lacks: with CAP_SYS_NICE the kernel gets past the cpuset check,
	// then finds no target the caller may use.
	if _, err := Pages(h.pid, numa.NewNodeMask(0), numa.NewNodeMask(1000)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Pages(0 -> 1000) = %v; want ErrInvalid", err)
	}
	if err := Permitted(h.pid); err != nil {
		t.Errorf("Permitted(a child) = %v", err)
	}
}

// A step's batch reads where the helper's touched pages are, moves those on the source
// nodes and reads again: here all are on node 0 and stay there, so each counts as moved.
func TestMoveBatchCountsFromWhereThePagesAre(t *testing.T) {
	h := startHelper(t, 8)
	var m Mover
	page := os.Getpagesize()
	for a := h.addr; a < h.addr+uintptr(h.size); a += uintptr(page) {
		m.pages = append(m.pages, a)
	}
	step, err := m.moveBatch(h.pid, numa.NewNodeMask(0), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := h.size / page
	if step.Scanned != n || step.Found != n || step.Moved != n || step.Failed != 0 || step.Shared != 0 {
		t.Errorf("moveBatch of %d touched pages on node 0 = %+v; want all found and on node 0", n, step)
	}
	if step, err = m.moveBatch(h.pid, numa.NewNodeMask(1), 0); err != nil || step.Found != 0 {
		t.Errorf("moveBatch from node 1 = %+v, %v; want nothing found", step, err)
	}
}

// Steps walk the whole address space from cursor to cursor, each within its scan limit and
// the end of a huge page; moving to the node the pages are on moves nothing.
func TestMoveStepsCoverTheAddressSpace(t *testing.T) {
	h := startHelper(t, 8)
	m := Mover{Batch: 64, ScanFactor: 1}
	var total Step
	cursor, steps := uint64(0), 0
	for {
		step, err := m.Move(h.pid, numa.NewNodeMask(0), 0, cursor, 1024)
		if err != nil {
			t.Fatal(err)
		}
		// A step stops at its scan limit, or past it only to the end of the huge page
		// it reached.
		if most := 1024 + int(hugePageSize(uint64(os.Getpagesize())))/os.Getpagesize() - 1; step.Scanned > most {
			t.Fatalf("a step of budget 1024 and scan factor 1 looked at %d addresses, want at most %d", step.Scanned, most)
		}
		total.Add(step)
		steps++
		if step.Done {
			break
		}
		if step.Next <= cursor {
			t.Fatalf("step %d went from %#x to %#x", steps, cursor, step.Next)
		}
		cursor = step.Next
	}
	if total.Found != 0 || total.Moved != 0 {
		t.Errorf("moving to node 0 the pages on node 0: %+v; want nothing found on the source", total)
	}
	if min := h.size / os.Getpagesize(); total.Scanned < min || steps < 2 {
		t.Errorf("the steps looked at %d addresses in %d steps; want at least the %d touched, in several", total.Scanned, steps, min)
	}
}

// asNobody runs f on a thread of its own whose credentials are uid 65534 and no
// capability: a raw setresuid changes only the calling thread's.
func asNobody(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, 65534, 65534, 65534); errno != 0 {
			t.Errorf("setresuid: %v", errno)
			return
		}
		f()
	}()
	<-done
}

// An unprivileged caller may not move another user's process.
func TestAnotherUsersProcessIsRefused(t *testing.T) {
	testenv.RequireRoot(t) // a process of another user than the caller's thread
	h := startHelper(t, 1)
	asNobody(t, func() {
		if _, err := Pages(h.pid, numa.NewNodeMask(0), numa.NewNodeMask(0)); !errors.Is(err, ErrPermission) || !numa.IsPermissionDenied(err) {
			t.Errorf("Pages as nobody of root's process: %v; want ErrPermission", err)
		}
		if err := Permitted(h.pid); !errors.Is(err, ErrPermission) {
			t.Errorf("Permitted as nobody of root's process: %v; want ErrPermission", err)
		}
		var m Mover
		if _, err := m.Move(h.pid, numa.NewNodeMask(1), 0, 0, 10); !errors.Is(err, ErrPermission) {
			t.Errorf("Move as nobody of root's process: %v; want ErrPermission", err)
		}
	})
}

func TestAGoneProcess(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if _, err := Pages(pid, numa.NewNodeMask(0), numa.NewNodeMask(0)); !errors.Is(err, ErrGone) || !numa.IsTaskGone(err) {
		t.Errorf("Pages of a reaped process: %v; want ErrGone", err)
	}
	var m Mover
	if _, err := m.Move(pid, numa.NewNodeMask(1), 0, 0, 10); !numa.IsTaskGone(err) {
		t.Errorf("Move of a reaped process: %v; want it gone", err)
	}
}

// anonHugeKiB is process pid's AnonHugePages (proc(5)), in KiB.
func anonHugeKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("AnonHugePages %q: %v", v, err)
			}
			return kib
		}
	}
	return 0
}

// Steps move a process's memory held in transparent huge pages to the other node, and count
// what moved: the kernel moves a huge page whole at its first address and answers EBUSY
// for the others of the same huge page, which are then on the target all the same. It
// needs two nodes: the kernel lab's control kernel (Debian's, THP always) runs it.
func TestMoveHugePagesToAnotherNode(t *testing.T) {
	online, err := numa.ReadOnline("/sys")
	if err != nil || len(online.Nodes) < 2 || online.Nodes[0] != 0 || online.Nodes[1] != 1 {
		t.Skipf("needs online nodes 0 and 1 (the kernel lab's); this host has %v (%v)", online.Nodes, err)
	}
	const mib = 64
	h := startHelper(t, mib, hugeEnv+"=1")
	huge := anonHugeKiB(t, h.pid)
	page := uint64(os.Getpagesize())
	before, err := NodePages("/proc", h.pid, page)
	if err != nil {
		t.Fatal(err)
	}
	from, to := 0, 1 // the helper's pages are where it ran: move them to the other node
	if before[1] > before[0] {
		from, to = 1, 0
	}
	var m Mover
	var total Step
	cursor := uint64(0)
	for steps := 0; ; steps++ {
		if steps > 10000 {
			t.Fatal("the steps never reached the end of the address space")
		}
		step, err := m.Move(h.pid, numa.NewNodeMask(from), to, cursor, 4096)
		if err != nil {
			t.Fatalf("step %d from %#x: %v (so far %+v)", steps, cursor, err, total)
		}
		total.Add(step)
		if step.Done {
			break
		}
		cursor = step.Next
	}
	after, err := NodePages("/proc", h.pid, page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("AnonHugePages %d KiB of the helper's %d MiB; pages per node before %v, after %v; steps %+v", huge, mib, before, after, total)
	want := uint64(mib<<20) / page
	if after[to] < want*9/10 {
		t.Errorf("%d of the helper's %d pages are on node %d after the move (node %d %d): the steps said %+v", after[to], want, to, from, after[from], total)
	}
	arrived := int(after[to]) - int(before[to])
	if d := total.Moved - arrived; d < -arrived/10 || d > arrived/10 {
		t.Errorf("the steps counted %d pages moved, and %d arrived on node %d: %+v", total.Moved, arrived, to, total)
	}
}
