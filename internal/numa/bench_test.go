package numa

import (
	"os"
	"runtime"
	"testing"
	"unsafe"
)

// Benchmarks of GET and SET per backend, on the calling thread:
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/numa
//
// The prctl backend cannot reach the kernel here (no patch), so its figures measure the
// backend's own cost with the system call faked; PrctlSyscallFloor is one real, trivial
// prctl (PR_GET_DUMPABLE) for the kernel-entry part.

// BenchmarkEmulator measures the emulator with its state on the test's temporary directory
// and, when there is one, on tmpfs (/dev/shm): replacing a file by rename makes ext4 flush
// it (auto_da_alloc), which dominates SET on disk.
func BenchmarkEmulator(b *testing.B) {
	dirs := map[string]string{"disk": b.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "numapref-bench-")
		if err == nil {
			defer os.RemoveAll(shm)
			dirs["tmpfs"] = shm
		}
	}
	for _, where := range []string{"disk", "tmpfs"} {
		if dirs[where] != "" {
			b.Run(where, func(b *testing.B) { benchmarkEmulator(b, dirs[where]) })
		}
	}
}

func benchmarkEmulator(b *testing.B, dir string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e, err := NewEmulator(EmulatorOptions{StateDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.Run("GetDefault", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Set", func(b *testing.B) {
		for b.Loop() {
			if err := e.Set(0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GetAfterSet", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := e.Set(0, -1); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPrctl(b *testing.B) {
	// The kernel's part, faked: GET stores -1.
	fake := func(option int, cmd, pid, nid uintptr, addr unsafe.Pointer) error {
		if cmd == CmdGet {
			*(*int32)(addr) = -1
		}
		return nil
	}
	p, support := newPrctl(DefaultPrctlOption, "testdata/proc/patched", fake)
	if !support.Supported {
		b.Fatal(support.Reason)
	}
	b.Run("GetFakeSyscall", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SetFakeSyscall", func(b *testing.B) {
		for b.Loop() {
			if err := p.Set(0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	unsupported, _ := newPrctl(DefaultPrctlOption, "testdata/proc/unpatched", fake)
	b.Run("GetUnsupported", func(b *testing.B) {
		for b.Loop() {
			_, _ = unsupported.Get(0)
		}
	})
}
