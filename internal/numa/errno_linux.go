//go:build linux

package numa

import "golang.org/x/sys/unix"

// errESRCH is what reading /proc/<pid>/... returns when the task exits mid-read.
var errESRCH error = unix.ESRCH
