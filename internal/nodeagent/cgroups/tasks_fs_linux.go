// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package cgroups

import (
	"bytes"
	"io/fs"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/fsutil"
)

// readSubdirs returns the names of dir's subdirectories (sub-cgroups), sorted. buf is
// scratch space. The listing visits every cgroup of a container, so, like
// fsutil.ReadFileInto for the files it reads, this calls the kernel directly: no Go file
// object (which on Linux also tries to register every file with the poller and sets a
// finalizer). A directory's link count is 2 and one per subdirectory (cgroupfs keeps it so,
// as ext4 and tmpfs do), so a cgroup of 2 links has none, known from one stat instead of
// reading its few dozen control files' names: most containers have no sub-cgroup, and
// every SET is bracketed by two listings of its container.
func readSubdirs(dir string, buf *[]byte) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Nlink == 2 {
		return nil, nil
	}
	fd, err := fsutil.OpenRetry(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	b := *buf
	if cap(b) < 8192 {
		b = make([]byte, 8192)
		*buf = b[:0]
	}
	b = b[:cap(b)]
	var names []string
	for {
		n, err := unix.Getdents(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n == 0 {
			break
		}
		names = appendSubdirs(names, fd, b[:n])
	}
	slices.Sort(names)
	return names, nil
}

// appendSubdirs appends the directories among the records of one getdents64 buffer, read
// from the directory fd, to names. "." and ".." are not among them.
func appendSubdirs(names []string, fd int, rec []byte) []string {
	for len(rec) > 0 {
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name NUL-terminated.
		if len(rec) < 19 {
			break
		}
		reclen := int(*(*uint16)(unsafe.Pointer(&rec[16])))
		if reclen < 19 || reclen > len(rec) {
			break
		}
		typ, name := rec[18], rec[19:reclen]
		rec = rec[reclen:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		switch typ {
		case unix.DT_DIR:
			names = append(names, string(name))
		case unix.DT_UNKNOWN: // file systems that do not fill d_type
			var st unix.Stat_t
			if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				names = append(names, string(name))
			}
		}
	}
	return names
}
