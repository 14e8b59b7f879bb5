// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package mempolicy

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
)

// maskWords is the size of the node masks passed to the kernel: 1024 nodes, the most any
// kernel is built for (NODES_SHIFT 10).
const maskWords = 16

// maxNode is the maxnode argument for masks of maskWords: get_nodes and copy_nodes_to_user
// in mm/mempolicy.c take one bit less than they are given.
const maxNode = maskWords*64 + 1

// mpolFMemsAllowed is get_mempolicy's MPOL_F_MEMS_ALLOWED: the nodes the caller may use.
const mpolFMemsAllowed = 1 << 2

// Get returns the memory policy of the calling thread. Lock the goroutine to its thread
// (runtime.LockOSThread) first, or the answer is of whichever thread ran it.
func Get() (Policy, error) {
	mode, nodes, err := getMempolicy(0)
	if err != nil {
		return Policy{}, fmt.Errorf("get_mempolicy: %w", err)
	}
	return Policy{Mode: Mode(mode &^ int(allFlags)), Flags: Flags(mode) & allFlags, Nodes: nodes}, nil
}

// Set sets the memory policy of the calling thread, which its later children and threads
// inherit; p must be Soft. Lock the goroutine to its thread (runtime.LockOSThread) first,
// or the policy lands on whichever thread runs it, under other goroutines.
func Set(p Policy) error {
	if err := p.Soft(); err != nil {
		return err
	}
	if err := setMempolicy(p); err != nil {
		return fmt.Errorf("set_mempolicy %s: %w", p, err)
	}
	return nil
}

// Probe tells which soft policies this kernel takes. It sets each on a thread of its own
// (a goroutine locked to its thread and never unlocked, so that the runtime ends the
// thread with the goroutine), reads it back and restores the thread's policy: nothing the
// probe sets reaches the caller's threads, and new threads the runtime starts meanwhile
// are started from its template thread, not from the probing one.
//
// A kernel without memory policies (no CONFIG_NUMA, ENOSYS) takes none, and the answer's
// Node is -1. A refusal for another reason (a seccomp filter's EPERM) is an error.
func Probe() (Support, error) {
	type answer struct {
		s   Support
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		s, err := probeThread()
		ch <- answer{s, err}
	}()
	a := <-ch
	return a.s, a.err
}

func probeThread() (Support, error) {
	prev, err := Get()
	if errors.Is(err, unix.ENOSYS) {
		return Support{Node: -1}, nil
	}
	if err != nil {
		return Support{}, fmt.Errorf("probing memory policies: %w", err)
	}
	_, allowed, err := getMempolicy(mpolFMemsAllowed)
	if err != nil {
		return Support{}, fmt.Errorf("probing memory policies: the nodes allowed: %w", err)
	}
	ids := allowed.IDs()
	if len(ids) == 0 {
		return Support{}, errors.New("probing memory policies: no node allowed")
	}
	s := Support{Node: ids[0]}
	home := numa.NewNodeMask(s.Node)
	for _, c := range []struct {
		p  Policy
		ok *bool
	}{
		{Preferred(s.Node), &s.Preferred},
		{PreferredMany(home, false), &s.PreferredMany},
		{PreferredMany(home, true), &s.PreferredManyBalancing},
	} {
		took, err := tryPolicy(c.p)
		if rerr := setMempolicy(prev); rerr != nil {
			return Support{}, fmt.Errorf("probing memory policies: restoring %s: %w", prev, rerr)
		}
		if err != nil {
			return Support{}, fmt.Errorf("probing memory policies: %w", err)
		}
		*c.ok = took
	}
	return s, nil
}

// tryPolicy sets p on the calling thread and reads it back: false when the kernel refuses
// it as invalid (EINVAL: a mode or flag it does not know), an error for any other refusal
// or when it reads back another policy.
func tryPolicy(p Policy) (bool, error) {
	err := setMempolicy(p)
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("set_mempolicy %s: %w", p, err)
	}
	got, err := Get()
	if err != nil {
		return false, err
	}
	if !got.Equal(p) {
		return false, fmt.Errorf("set_mempolicy %s took, but get_mempolicy reads %s", p, got)
	}
	return true, nil
}

func setMempolicy(p Policy) error {
	words, err := toWords(p.Nodes)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(int(p.Mode)|int(p.Flags)),
		uintptr(unsafe.Pointer(&words[0])), maxNode)
	runtime.KeepAlive(&words)
	if errno != 0 {
		return errno
	}
	return nil
}

func getMempolicy(flags int) (int, numa.NodeMask, error) {
	var mode int32
	var words [maskWords]uint64
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)),
		uintptr(unsafe.Pointer(&words[0])), maxNode, 0, uintptr(flags), 0)
	if errno != 0 {
		return 0, numa.NodeMask{}, errno
	}
	return int(mode), fromWords(words), nil
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

func fromWords(words [maskWords]uint64) numa.NodeMask {
	var m numa.NodeMask
	for w, word := range words {
		for b := range 64 {
			if word&(1<<b) != 0 {
				m.Set(w*64 + b)
			}
		}
	}
	return m
}
