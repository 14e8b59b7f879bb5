// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package migrate

import (
	"errors"
	"syscall"
	"testing"

	"github.com/numapref/numapref/internal/numa"
)

// A target outside the process's cpuset.mems is refused before any move.
func TestMoveRefusesAPinnedProcess(t *testing.T) {
	m := Mover{ProcRoot: fixtureRoot}
	_, err := m.Move(4242, numa.NewNodeMask(1), 0, 0, 100)
	if !errors.Is(err, ErrPinned) {
		t.Errorf("Move to node 0 of a process on cpuset.mems 1: %v; want ErrPinned", err)
	}
	for _, bad := range []struct{ pid, to, budget int }{{0, 0, 1}, {-1, 0, 1}, {4242, -1, 1}, {4242, 1, 0}} {
		if _, err := m.Move(bad.pid, numa.NewNodeMask(0), bad.to, 0, bad.budget); !errors.Is(err, ErrInvalid) {
			t.Errorf("Move(pid %d, to %d, budget %d): %v; want ErrInvalid", bad.pid, bad.to, bad.budget, err)
		}
	}
}

// Each refusal is told by its kind and still by its errno.
func TestRefusalKinds(t *testing.T) {
	tests := map[syscall.Errno]error{
		syscall.ESRCH: ErrGone, syscall.EPERM: ErrPermission, syscall.EACCES: ErrPinned,
		syscall.EINVAL: ErrInvalid, syscall.ENODEV: ErrNoNode, syscall.ENOSYS: ErrUnsupported,
	}
	for errno, kind := range tests {
		err := refusal("move_pages", 9, errno)
		if errno == syscall.EACCES {
			if !errors.Is(err, ErrPinned) || numa.IsPermissionDenied(err) {
				t.Errorf("refusal(EACCES) = %v; want ErrPinned, not a permission", err)
			}
			continue
		}
		if !errors.Is(err, kind) || !errors.Is(err, errno) {
			t.Errorf("refusal(%v) = %v; want it to be %v and %v", errno, err, kind, errno)
		}
	}
	if !numa.IsTaskGone(refusal("x", 9, syscall.ESRCH)) || !numa.IsPermissionDenied(refusal("x", 9, syscall.EPERM)) {
		t.Error("numa.IsTaskGone / IsPermissionDenied do not read a refusal")
	}
	if err := refusal("x", 9, syscall.ENOMEM); !errors.Is(err, syscall.ENOMEM) || errors.Is(err, ErrInvalid) {
		t.Errorf("refusal(ENOMEM) = %v", err)
	}
}
