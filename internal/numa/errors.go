// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import "errors"

// IsTaskGone reports whether err says the task it names is gone: ErrTaskGone (from /proc
// reads and pidfd_open) or ESRCH (from the preferred-node backends, the prctl and the
// emulator alike). It is the one spelling of "task gone" for callers of this package.
func IsTaskGone(err error) bool {
	return errors.Is(err, ErrTaskGone) || errors.Is(err, errESRCH)
}

// IsPermissionDenied reports whether the kernel refused a call for lack of a right
// (EPERM or EACCES).
func IsPermissionDenied(err error) bool {
	return errors.Is(err, errEPERM) || errors.Is(err, errEACCES)
}
