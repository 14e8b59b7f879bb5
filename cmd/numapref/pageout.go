// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The agent's start touches most of its executable's read-only pages once: the init of
// every API group client-go's scheme registers, the flags, the manager's setup, and the
// kernel maps the 64 KiB around each page that faults. Those pages stay mapped, and make
// most of its resident set (RssFile), though the running agent executes a fraction of
// them. Once the start is over, the agent hands them back to the kernel (MADV_PAGEOUT);
// what it runs afterwards faults back in from the file.
const (
	// pageOutAfterSync is how long after the cache has synced the agent pages out: the
	// first reconciles, passes and Events of the start are done by then.
	pageOutAfterSync = 10 * time.Second
	// pageOutSyncPatience bounds the wait for the cache: an agent that starts during an
	// API outage pages out too.
	pageOutSyncPatience = 2 * time.Minute
)

// addPageOut adds to mgr the agent's one page-out of its executable after the start.
func addPageOut(mgr ctrl.Manager) error {
	log := ctrl.Log.WithName("pageout")
	run := manager.RunnableFunc(func(ctx context.Context) error {
		syncCtx, cancel := context.WithTimeout(ctx, pageOutSyncPatience)
		mgr.GetCache().WaitForCacheSync(syncCtx)
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pageOutAfterSync):
		}
		n, err := pageOutExecutable("/proc/self/exe", "/proc/self/maps")
		if err != nil {
			// A kernel before 5.4 has no MADV_PAGEOUT: the pages stay, nothing else changes.
			log.Info("the executable's pages stay resident", "error", err.Error())
			return nil
		}
		log.V(1).Info("paged out the executable's read-only mappings", "bytes", n)
		return nil
	})
	if err := mgr.Add(run); err != nil {
		return fmt.Errorf("agent: adding the page-out: %w", err)
	}
	return nil
}

// pageOutExecutable asks the kernel to reclaim the pages of the read-only mappings of the
// executable exe (as /proc/self/exe names it) listed in the maps file: the text and the
// read-only data, never a writable mapping. MADV_PAGEOUT loses no content: a clean file
// page is read again from the file at its next touch. MADV_RANDOM first, so that such a
// touch reads that page alone, not the 128 KiB around it (1.5 MiB less text resident at
// 110 pods). It returns the bytes it advised.
func pageOutExecutable(exe, maps string) (int64, error) {
	path, err := os.Readlink(exe)
	if err != nil {
		return 0, fmt.Errorf("reading the executable's path: %w", err)
	}
	ranges, err := readOnlyMappingsOf(maps, path)
	if err != nil {
		return 0, err
	}
	if len(ranges) == 0 {
		return 0, fmt.Errorf("no read-only mapping of %s in %s", path, maps)
	}
	var total int64
	for _, r := range ranges {
		for _, advice := range []int{unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, uintptr(advice)); errno != 0 {
				return total, fmt.Errorf("madvise(%d) of %#x-%#x: %w", advice, r.start, r.end, errno)
			}
		}
		total += int64(r.end - r.start)
	}
	return total, nil
}

// addrRange is one mapping's [start, end).
type addrRange struct{ start, end uintptr }

// readOnlyMappingsOf reads the maps file (proc(5)) for the mappings of the file at path
// with no write permission.
func readOnlyMappingsOf(maps, path string) ([]addrRange, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []addrRange
	s := bufio.NewScanner(f)
	for s.Scan() {
		// address perms offset dev inode pathname; the pathname may hold spaces.
		fields := strings.SplitN(s.Text(), " ", 6)
		if len(fields) < 6 || strings.TrimLeft(fields[5], " ") != path || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("%s: a mapping's address range %q", maps, fields[0])
		}
		out = append(out, addrRange{start: uintptr(start), end: uintptr(end)})
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", maps, err)
	}
	return out, nil
}
