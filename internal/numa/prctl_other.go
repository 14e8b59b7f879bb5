//go:build !linux

package numa

import "unsafe"

func rawPrctl(int, uintptr, uintptr, uintptr, unsafe.Pointer) error { return errNotLinux }
