// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/numapref/numapref/internal/numa"
)

// readLimit bounds how much of a numa_maps ReadTaskPolicy reads. The kernel walks the page
// tables of each mapping it prints, so a whole numa_maps of a large process costs; the
// first mappings are the program's own file and its libraries, which show the task policy.
const readLimit = 32 << 10

// ReadTaskPolicy reads the memory policy of process pid (its thread group leader, the
// thread whose id is pid) from procRoot/<pid>/numa_maps (see TaskPolicy). A process that is
// gone gives an error wrapping numa.ErrTaskGone; a kernel thread or an exiting process
// ErrNoMappings.
func ReadTaskPolicy(procRoot string, pid int) (Policy, error) {
	return readPolicy(filepath.Join(procRoot, strconv.Itoa(pid), "numa_maps"), pid)
}

// ReadThreadPolicy reads the memory policy of thread tid of process pid, from
// procRoot/<pid>/task/<tid>/numa_maps: each thread has its own.
func ReadThreadPolicy(procRoot string, pid, tid int) (Policy, error) {
	return readPolicy(filepath.Join(procRoot, strconv.Itoa(pid), "task", strconv.Itoa(tid), "numa_maps"), tid)
}

func readPolicy(path string, tid int) (Policy, error) {
	text, err := readHead(path, readLimit)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			err = numa.ErrTaskGone
		}
		return Policy{}, fmt.Errorf("reading the memory policy of task %d: %w", tid, err)
	}
	p, err := TaskPolicy(text)
	if err != nil {
		return Policy{}, fmt.Errorf("reading the memory policy of task %d from %s: %w", tid, path, err)
	}
	return p, nil
}

// readHead reads up to limit bytes of path and returns its whole lines.
func readHead(path string, limit int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, limit)
	n, err := io.ReadFull(f, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return string(buf[:n]), nil
	case err != nil:
		return "", err
	}
	text := string(buf[:n])
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		return text[:i+1], nil
	}
	return "", fmt.Errorf("reading %s: a line longer than %d bytes", path, limit)
}
