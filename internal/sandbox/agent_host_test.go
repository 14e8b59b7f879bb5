// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux && (amd64 || arm64)

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The agent's sandbox as the agent installs it (Landlock where the kernel offers it, then
// the seccomp filter), in a child of the test binary, beside each layer alone and neither:
// every refusal below is made by the layer the table names, and by no lack of privilege.
// The test binary imports no package that links cgo, so the Go runtime can make a call on
// every thread (Landlock before ABI 8 confines one thread at a time).
const agentChildEnv = "NUMAPREF_SANDBOX_AGENT"

// agentChild is what a child is told: which layers to install, and where the agent's
// paths, sockets and ports are.
type agentChild struct {
	Layers     string // none, seccomp, landlock, agent (both, as Install does)
	NRI        bool   // the NRI plugin is on: unix sockets are allowed
	Target     int    // a sleeping sibling
	ProcRoot   string
	SysRoot    string
	CgroupRoot string
	StateDir   string
	Drained    string // an empty directory beside the state dir, which a drain removes
	NRISocket  string
	OtherUnix  string // a unix socket outside the NRI socket's directory
	Abstract   string // an abstract unix socket of the parent
	Outside    string // a directory outside the ruleset
	HostRoot   string // a host process's root: /proc/1/root, or a sibling's
	CgroupFile string // a cgroup's cgroup.procs under CgroupRoot
	APIPort    int    // the one port the child may connect to
	OtherPort  int    // a port it may not
	BindPort   int    // the one port it may bind
}

// options is the sandbox of the agent for c: the paths and ports the agent passes.
func (c agentChild) options() Options {
	return Options{
		AllowUnixSockets: c.NRI,
		Landlock: &Landlock{
			ReadOnly:    []string{c.ProcRoot, c.SysRoot, c.CgroupRoot},
			ReadWrite:   []string{c.StateDir},
			RemoveDirs:  []string{filepath.Dir(c.StateDir)},
			UnixSockets: []string{filepath.Dir(c.NRISocket)},
			TCP:         true, BindTCP: []uint16{uint16(c.BindPort)}, ConnectTCP: []uint16{uint16(c.APIPort)},
		},
	}
}

func runAgentChild(spec string) int {
	var c agentChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, "bad spec:", err)
		return 2
	}
	opts := c.options()
	var err error
	switch c.Layers {
	case "none":
	case "seccomp":
		_, err = installSeccomp(opts)
	case "landlock":
		var st LandlockStatus
		if st, err = applyLandlock(*opts.Landlock); err == nil && !st.Applied {
			err = errors.New(st.String())
		}
	case "agent":
		var st Status
		if st, err = Install(opts); err == nil && !st.Landlock.Applied {
			err = errors.New(st.Landlock.String())
		}
	default:
		err = fmt.Errorf("unknown layers %q", c.Layers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	got := map[string]string{}
	for _, p := range c.probes() {
		got[p.name] = errName(p.call())
	}
	if err := json.NewEncoder(os.Stdout).Encode(got); err != nil {
		return 4
	}
	return 0
}

type probe struct {
	name string
	call func() error
}

// probes are what the child tries, in order: what the sandbox must refuse, then what the
// agent needs.
func (c agentChild) probes() []probe {
	return []probe{
		{"create a file through /proc/<pid>/root", func() error {
			return createFile(filepath.Join(c.HostRoot, c.Outside, "via-proc-root"))
		}},
		{"create a file outside the ruleset", func() error { return createFile(filepath.Join(c.Outside, "direct")) }},
		{"create a file outside the ruleset, from 8 threads", func() error {
			return onThreads(8, func(i int) error { return createFile(filepath.Join(c.Outside, fmt.Sprintf("thread-%d", i))) })
		}},
		{"open /proc/<other>/mem for writing", func() error {
			return openWrite(fmt.Sprintf("/proc/%d/mem", c.Target))
		}},
		// Opened for writing, and closed without a write: nothing changes either way.
		{"open a sysctl for writing", func() error {
			return openWrite(filepath.Join(c.ProcRoot, "sys/kernel/numa_balancing"))
		}},
		{"open a sysfs file for writing", func() error {
			return openWrite(filepath.Join(c.SysRoot, "kernel/mm/transparent_hugepage/enabled"))
		}},
		{"open a cgroup's cgroup.procs for writing", func() error { return openWrite(c.CgroupFile) }},
		{"execve /bin/true", func() error {
			// Its standard files are the child's own: with none, os/exec would open
			// /dev/null, which the ruleset refuses before any execve.
			cmd := exec.Command("/bin/true")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stderr, os.Stderr
			return cmd.Run()
		}},
		{"socket(AF_NETLINK, NETLINK_ROUTE)", func() error {
			return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE))
		}},
		{"socket(AF_PACKET)", func() error { return closeFD(unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)) }},
		{"connect an abstract unix socket", func() error { return connectUnix("@" + c.Abstract) }},
		{"connect a unix socket beside the NRI one", func() error { return connectUnix(c.OtherUnix) }},
		{"connect another TCP port", func() error { return connectTCP(c.OtherPort) }},
		{"bind another TCP port", func() error { return bindTCP(0) }},
		{"kcmp(self, other)", func() error {
			_, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(os.Getpid()), uintptr(c.Target), 1 /* KCMP_VM */, 0, 0, 0)
			return errnoErr(errno)
		}},

		{"read /proc/self/stat", func() error { return readFile("/proc/self/stat") }},
		{"read /proc/<other>/stat", func() error { return readFile(filepath.Join(c.ProcRoot, strconv.Itoa(c.Target), "stat")) }},
		{"read sysfs", func() error { return readFile(filepath.Join(c.SysRoot, "devices/system/cpu/online")) }},
		{"list the cgroup root", func() error { return listDir(c.CgroupRoot) }},
		{"write a state file atomically", func() error { return writeAtomically(filepath.Join(c.StateDir, "ledger.json")) }},
		{"make and remove a directory in the state dir", func() error {
			dir := filepath.Join(c.StateDir, "emulator")
			return errors.Join(os.Mkdir(dir, 0o700), os.Remove(dir))
		}},
		{"remove an empty directory beside the state dir", func() error { return os.Remove(c.Drained) }},
		{"open the proc connector", openProcConnector},
		{"connect the NRI socket", func() error { return connectUnix(c.NRISocket) }},
		{"connect the API port", func() error { return connectTCP(c.APIPort) }},
		{"bind the metrics port", func() error { return bindTCP(c.BindPort) }},
	}
}

func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(path))
}

// onThreads calls f(0..n-1) on n goroutines, each locked to a thread of its own, and
// returns the first error any returned, or nil.
func onThreads(n int, f func(i int) error) error {
	errs := make(chan error, n)
	release := make(chan struct{})
	for i := range n {
		go func() {
			runtime.LockOSThread() // kept locked: the thread exits with the goroutine
			<-release
			errs <- f(i)
		}()
	}
	close(release)
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func openWrite(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	return closeFD(fd, err)
}

func readFile(path string) error {
	_, err := os.ReadFile(path)
	return err
}

func listDir(path string) error {
	_, err := os.ReadDir(path)
	return err
}

// writeAtomically writes path as the agent's state files are: a temporary file, synced,
// renamed over it, the directory synced; then reads it back.
func writeAtomically(path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(`{"version":1}`)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := errors.Join(dir.Sync(), dir.Close()); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err == nil && string(data) != `{"version":1}` {
		err = fmt.Errorf("read back %q", data)
	}
	return err
}

// openProcConnector opens and binds a proc connector socket, as the agent does at start
// and the emulated kernel's listener when it starts.
func openProcConnector() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 /* CN_IDX_PROC */})
}

// connectUnix connects a stream socket to path ("@name": the abstract name).
func connectUnix(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: path})
}

func connectTCP(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// listenUnix listens on path ("@name": the abstract name) until the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatalf("binding %s: %v", path, err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		t.Fatal(err)
	}
}

// listenTCP listens on a free port of 127.0.0.1 until the test ends and returns it.
func listenTCP(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*unix.SockaddrInet4).Port
}

// freeTCPPort is a port of 127.0.0.1 nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*unix.SockaddrInet4).Port
}

// newAgentChild lays out an agent's paths under a temporary directory, with the parent's
// listeners, and a sleeping target.
func newAgentChild(t *testing.T) agentChild {
	t.Helper()
	dir := t.TempDir()
	c := agentChild{
		ProcRoot: "/proc", SysRoot: "/sys", CgroupRoot: "/sys/fs/cgroup",
		StateDir:  filepath.Join(dir, "lib", "numapref", "ns_release"),
		Drained:   filepath.Join(dir, "lib", "numapref", "ns_other"),
		NRISocket: filepath.Join(dir, "run", "nri", "nri.sock"),
		OtherUnix: filepath.Join(dir, "run", "containerd.sock"),
		Abstract:  fmt.Sprintf("numapref-sandbox-test-%d", os.Getpid()),
		Outside:   filepath.Join(dir, "etc", "cron.d"),
	}
	for _, d := range []string{c.StateDir, c.Drained, filepath.Dir(c.NRISocket), c.Outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	listenUnix(t, c.NRISocket)
	listenUnix(t, c.OtherUnix)
	listenUnix(t, "@"+c.Abstract)
	c.APIPort, c.OtherPort, c.BindPort = listenTCP(t), listenTCP(t), freeTCPPort(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	c.Target = sleeper.Process.Pid
	// The child reaches the host's files through another process's root, as code in the
	// agent would through /proc/1/root: pid 1's own when this test may follow it (it runs
	// in pid 1's mount namespace, and pid 1 is in no Landlock domain of the test's), else
	// the sleeper's, the same root.
	c.HostRoot = "/proc/1/root"
	if _, err := os.Stat(filepath.Join(c.HostRoot, c.Outside)); err != nil {
		t.Logf("%v; the sleeper's root instead", err)
		c.HostRoot = fmt.Sprintf("/proc/%d/root", c.Target)
	}
	testenv.RequireFile(t, filepath.Join(c.HostRoot, c.Outside), "run the host tier in the host's mount namespace")
	for _, f := range []string{"/proc/sys/kernel/numa_balancing", "/sys/kernel/mm/transparent_hugepage/enabled"} {
		testenv.RequireFile(t, f, "a kernel with CONFIG_NUMA_BALANCING and CONFIG_TRANSPARENT_HUGEPAGE")
	}
	procs, _ := filepath.Glob(filepath.Join(c.CgroupRoot, "*", "cgroup.procs"))
	if _, err := os.Stat(filepath.Join(c.CgroupRoot, "cgroup.procs")); err == nil {
		procs = append([]string{filepath.Join(c.CgroupRoot, "cgroup.procs")}, procs...)
	}
	testenv.Require(t, len(procs) > 0, "a cgroup.procs under "+c.CgroupRoot, "mount the cgroup filesystems")
	c.CgroupFile = procs[0]
	return c
}

func runAgentProbes(t *testing.T, c agentChild) map[string]string {
	t.Helper()
	// A drained state dir's sibling is made again for each child.
	if err := os.MkdirAll(c.Drained, 0o700); err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), agentChildEnv+"="+string(spec))
	var stderr strings.Builder
	child.Stderr = &stderr
	out, err := child.Output()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", c.Layers, err, stderr.String())
	}
	got := map[string]string{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child %s: %v\n%s", c.Layers, err, out)
	}
	return got
}

func TestAgentSandboxInAChild(t *testing.T) {
	testenv.RequireRoot(t) // /proc/<other>/mem, the proc connector and packet sockets need privileges: their refusal must be the sandbox's
	abi := LandlockABI()
	testenv.Require(t, abi >= 6, fmt.Sprintf("Landlock ABI 6 or later (the kernel offers %d)", abi), "a kernel with Landlock enabled (lsm=...,landlock)")
	c := newAgentChild(t)
	// Before ABI 9 Landlock does not confine unix sockets by path: only the NRI plugin's
	// being off keeps the agent from the runtime's own socket.
	otherUnix := "ok"
	if abi >= 9 {
		otherUnix = "EACCES"
	}
	// What each layer refuses, and with which error (seccomp: EPERM; Landlock: EACCES,
	// EPERM for its scopes and ptrace access). Columns: none, seccomp, landlock, agent.
	refused := map[string][4]string{
		"create a file through /proc/<pid>/root":            {"ok", "ok", "EACCES", "EACCES"},
		"create a file outside the ruleset":                 {"ok", "ok", "EACCES", "EACCES"},
		"create a file outside the ruleset, from 8 threads": {"ok", "ok", "EACCES", "EACCES"},
		"open /proc/<other>/mem for writing":                {"ok", "ok", "EACCES", "EACCES"},
		"open a sysctl for writing":                         {"ok", "ok", "EACCES", "EACCES"},
		"open a sysfs file for writing":                     {"ok", "ok", "EACCES", "EACCES"},
		"open a cgroup's cgroup.procs for writing":          {"ok", "ok", "EACCES", "EACCES"},
		"execve /bin/true":                                  {"ok", "EPERM", "EACCES", "EPERM"},
		"socket(AF_NETLINK, NETLINK_ROUTE)":                 {"ok", "EPERM", "ok", "EPERM"},
		"socket(AF_PACKET)":                                 {"ok", "EPERM", "ok", "EPERM"},
		"connect an abstract unix socket":                   {"ok", "ok", "EPERM", "EPERM"},
		"connect a unix socket beside the NRI one":          {"ok", "ok", otherUnix, otherUnix},
		"connect another TCP port":                          {"ok", "ok", "EACCES", "EACCES"},
		"bind another TCP port":                             {"ok", "ok", "EACCES", "EACCES"},
		// Landlock refuses ptrace access outside its domain, whatever the capabilities:
		// the check kcmp makes is the one the preferred-node prctl makes.
		"kcmp(self, other)": {"ok", "EPERM", "EPERM", "EPERM"},
	}
	needed := []string{"read /proc/self/stat", "read /proc/<other>/stat", "read sysfs", "list the cgroup root",
		"write a state file atomically", "make and remove a directory in the state dir",
		"remove an empty directory beside the state dir", "open the proc connector", "connect the NRI socket",
		"connect the API port", "bind the metrics port"}
	for i, layers := range []string{"none", "seccomp", "landlock", "agent"} {
		t.Run(layers, func(t *testing.T) {
			c := c
			c.Layers, c.NRI = layers, true
			want := map[string]string{}
			for name, col := range refused {
				want[name] = col[i]
			}
			for _, name := range needed {
				want[name] = "ok"
			}
			if diff := cmp.Diff(want, runAgentProbes(t, c)); diff != "" {
				t.Errorf("calls under %s (-want +got):\n%s", layers, diff)
			}
		})
	}
	// Without the NRI plugin no unix socket can be made at all.
	t.Run("agent without NRI", func(t *testing.T) {
		c := c
		c.Layers = "agent"
		got := runAgentProbes(t, c)
		for _, name := range []string{"connect the NRI socket", "connect a unix socket beside the NRI one", "connect an abstract unix socket"} {
			if got[name] != "EPERM" {
				t.Errorf("%s: %s, want EPERM", name, got[name])
			}
		}
		if got["connect the API port"] != "ok" || got["write a state file atomically"] != "ok" {
			t.Errorf("the agent's own work is refused: %v", got)
		}
	})
}
