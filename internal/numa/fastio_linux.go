//go:build linux

package numa

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// The emulator reads several small /proc and state files per call. These helpers use plain
// system calls: an os.File also registers with the poller and checks its flags, which costs
// more than the read itself. Errors are *fs.PathError, as os would return.

// readSmallFile returns the contents of path, and its owner if st is not nil.
func readSmallFile(path string, st *unix.Stat_t) ([]byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if st != nil {
		if err := unix.Fstat(fd, st); err != nil {
			return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
	}
	buf := make([]byte, 0, 2048)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func openRetry(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// writeNewFile creates path (which must not exist) with data and mode, past the umask.
func writeNewFile(path string, data []byte, mode uint32) error {
	fd, err := openRetry(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, mode)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 && err == nil {
		var n int
		if n, err = unix.Write(fd, data); err == nil {
			data = data[n:]
		} else if err == unix.EINTR {
			err = nil
		}
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if closeErr := unix.Close(fd); err == nil {
		err = closeErr
	}
	if err != nil {
		unix.Unlink(path)
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}
