// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package migrate

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
)

// maskWords is the size of the node masks passed to the kernel: 1024 nodes, the most any
// kernel is built for (NODES_SHIFT 10). maxNode is the maxnode argument for them: the
// kernel's get_nodes takes one bit less than it is given.
const (
	maskWords = 16
	maxNode   = maskWords*64 + 1
)

// mpolMFMove is MPOL_MF_MOVE: move only the pages the process alone maps.
const mpolMFMove = 1 << 1

// Pages moves the pages of process pid that lie on the nodes in from to the nodes in to,
// with migrate_pages(2), and returns how many the kernel did not move (pages, or huge
// pages counted once each, that it could not isolate or copy: the target full, a page
// busy). Pages on a node in both masks stay. The call returns only when the kernel has
// tried every page. Refusals wrap the errno and ErrGone, ErrPermission, ErrInvalid or
// ErrUnsupported.
func Pages(pid int, from, to numa.NodeMask) (notMoved int, err error) {
	if pid <= 0 {
		return 0, &Error{Op: "migrate_pages", Pid: pid, Errno: unix.EINVAL, Kind: ErrInvalid}
	}
	old, err := toWords(from)
	if err != nil {
		return 0, err
	}
	dest, err := toWords(to)
	if err != nil {
		return 0, err
	}
	r, _, errno := unix.Syscall6(unix.SYS_MIGRATE_PAGES, uintptr(pid), maxNode,
		uintptr(unsafe.Pointer(&old[0])), uintptr(unsafe.Pointer(&dest[0])), 0, 0)
	runtime.KeepAlive(&old)
	runtime.KeepAlive(&dest)
	if errno != 0 {
		return 0, refusal("migrate_pages", pid, errno)
	}
	return int(r), nil
}

// Permitted checks that the caller may move process pid's pages with Mover.Move: a
// move_pages(2) of no page, which makes the kernel's access check and nothing else.
func Permitted(pid int) error {
	if pid <= 0 {
		return &Error{Op: "move_pages", Pid: pid, Errno: unix.EINVAL, Kind: ErrInvalid}
	}
	if errno := movePages(pid, nil, nil, nil); errno != 0 {
		return refusal("move_pages", pid, errno)
	}
	return nil
}

func refusal(op string, pid int, errno unix.Errno) error {
	e := &Error{Op: op, Pid: pid, Errno: errno}
	switch errno {
	case unix.ESRCH:
		e.Kind = ErrGone
	case unix.EPERM:
		e.Kind = ErrPermission
	case unix.EACCES:
		e.Kind = ErrPinned
	case unix.EINVAL:
		e.Kind = ErrInvalid
	case unix.ENODEV:
		e.Kind = ErrNoNode
	case unix.ENOSYS:
		e.Kind = ErrUnsupported
	}
	return e
}

// movePages is move_pages(2) of process pid with MPOL_MF_MOVE: with nodes nil it only
// reads where each page is into status. It returns the call's errno; a positive return
// (pages the kernel gave up on) is not an error: the caller reads where the pages are.
func movePages(pid int, pages []uintptr, nodes, status []int32) unix.Errno {
	var pp, np, sp unsafe.Pointer
	if len(pages) > 0 {
		pp, sp = unsafe.Pointer(&pages[0]), unsafe.Pointer(&status[0])
	}
	flags := 0
	if nodes != nil {
		np, flags = unsafe.Pointer(&nodes[0]), mpolMFMove
	}
	_, _, errno := unix.Syscall6(unix.SYS_MOVE_PAGES, uintptr(pid), uintptr(len(pages)),
		uintptr(pp), uintptr(np), uintptr(sp), uintptr(flags))
	runtime.KeepAlive(pages)
	runtime.KeepAlive(nodes)
	runtime.KeepAlive(status)
	return errno
}

// Move moves pages of process pid that lie on the nodes in from to node to, starting at
// address cursor (0 for the start), and stops after budget pages found on the from nodes,
// after ScanFactor*budget addresses, or at the end of the address space. Pages on to stay
// (to is taken out of from). A target node outside the process's cpuset.mems is refused
// with ErrPinned before anything moves. Other refusals wrap the errno and ErrGone,
// ErrPermission, ErrInvalid or ErrNoNode. A Mover is not safe for concurrent use.
func (m *Mover) Move(pid int, from numa.NodeMask, to int, cursor uint64, budget int) (Step, error) {
	procRoot := m.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	if pid <= 0 || to < 0 || budget <= 0 {
		return Step{}, &Error{Op: "move_pages", Pid: pid, Errno: unix.EINVAL, Kind: ErrInvalid}
	}
	allowed, err := MemsAllowed(procRoot, pid)
	if err != nil {
		return Step{}, err
	}
	if !allowed.Has(to) {
		return Step{}, &Error{Op: "move_pages", Pid: pid, Errno: unix.EACCES, Kind: ErrPinned}
	}
	spans, err := readSpans(procRoot, pid)
	if numa.IsPermissionDenied(err) {
		// maps needs the same ptrace read access as move_pages.
		return Step{}, &Error{Op: "move_pages", Pid: pid, Errno: unix.EACCES, Kind: ErrPermission}
	}
	if err != nil {
		return Step{}, err
	}
	src := numa.NewNodeMask()
	for _, id := range from.IDs() {
		if id != to {
			src.Set(id)
		}
	}
	batch, scanLimit := m.Batch, m.ScanFactor
	if batch <= 0 {
		batch = 512
	}
	if scanLimit <= 0 {
		scanLimit = 64
	}
	scanLimit *= budget
	page := uint64(os.Getpagesize())
	step := Step{Next: cursor}
	for step.Found < budget && step.Scanned < scanLimit {
		n := min(batch, budget-step.Found, scanLimit-step.Scanned)
		var done bool
		m.pages, step.Next, done = addresses(m.pages, spans, step.Next, page, hugePageSize(page), n)
		got, err := m.moveBatch(pid, src, to)
		if err != nil {
			return step, err
		}
		step.Add(got)
		if done {
			step.Next, step.Done = 0, true
			break
		}
	}
	return step, nil
}

// moveBatch moves the pages of m.pages that lie on src to node to.
func (m *Mover) moveBatch(pid int, src numa.NodeMask, to int) (Step, error) {
	step := Step{Scanned: len(m.pages)}
	if len(m.pages) == 0 {
		return step, nil
	}
	m.status = grow(m.status, len(m.pages))
	if errno := movePages(pid, m.pages, nil, m.status); errno != 0 {
		return step, refusal("move_pages", pid, errno)
	}
	m.moved = m.moved[:0]
	for i, node := range m.status {
		if node >= 0 && src.Has(int(node)) {
			m.moved = append(m.moved, m.pages[i])
		}
	}
	step.Found = len(m.moved)
	if step.Found == 0 {
		return step, nil
	}
	m.nodes = grow(m.nodes, len(m.moved))
	for i := range m.nodes {
		m.nodes[i] = int32(to)
	}
	m.status = grow(m.status, len(m.moved))
	if errno := movePages(pid, m.moved, m.nodes, m.status); errno != 0 {
		return step, refusal("move_pages", pid, errno)
	}
	m.after = grow(m.after, len(m.moved))
	if errno := movePages(pid, m.moved, nil, m.after); errno != 0 {
		return step, refusal("move_pages", pid, errno)
	}
	for i, node := range m.after {
		switch {
		case int(node) == to:
			step.Moved++
		case node < 0: // freed meanwhile (ENOENT, EFAULT): nothing to move
		case m.status[i] == -int32(unix.EACCES):
			step.Shared++
		default:
			step.Failed++
		}
	}
	return step, nil
}

// hugePageSize is the size of the transparent huge pages a batch must hold whole (the
// kernel's hpage_pmd_size: 2 MiB on x86-64 and on arm64 with 4 KiB pages), or page when
// the kernel has none or does not say.
var hugePageSize = func() func(page uint64) uint64 {
	size := sync.OnceValue(func() uint64 {
		b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
		if err != nil {
			return 0
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0
		}
		return n
	})
	return func(page uint64) uint64 {
		if n := size(); n > page && n%page == 0 {
			return n
		}
		return page
	}
}()

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func toWords(m numa.NodeMask) ([maskWords]uint64, error) {
	var words [maskWords]uint64
	for _, id := range m.IDs() {
		if id >= maskWords*64 {
			return words, fmt.Errorf("node %d: beyond the %d nodes a kernel has", id, maskWords*64)
		}
		words[id/64] |= 1 << (id % 64)
	}
	return words, nil
}
