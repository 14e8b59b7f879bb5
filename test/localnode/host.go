// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// The host changes a node makes outside its own directory, learned on these machines
// (../shared/LAB-NOTES.md): kubelet's sysctls, iptables chains, fixed paths kubelet and
// containerd write whatever they are told, cgroups under /kubepods in every hierarchy, the
// pods' network namespaces, the CNI bridge, and the agent's hostPath directories.
// kernel/pid_max: systemd's sysctl.d sets it, and a kind node's systemd runs on this kernel.
var (
	watchedSysctls = []string{
		"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
		"kernel/pid_max",
	}
	fixedPaths = []string{
		"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd",
		"/usr/libexec/kubernetes", "/var/lib/cni", "/run/netns", "/etc/cni",
		"/var/lib/numapref", "/run/numapref",
	}
	iptablesTables = []string{"filter", "nat", "mangle"}
)

const netnsDir = "/run/netns"

// HostWatch names what a cluster on this host changes besides the sysctls, iptables rules
// and network namespaces every snapshot covers. The local node's is localWatch; a kind
// cluster (test/kindnode) has its own.
type HostWatch struct {
	Paths        []string `json:"paths"`        // fixed host paths it may create
	Cgroups      []string `json:"cgroups"`      // cgroups it may make under every hierarchy's root
	LinkPrefixes []string `json:"linkPrefixes"` // names of the network links it may make
	Daemons      []string `json:"daemons"`      // its programs, whose command lines name its directory
}

// localWatch is what the local node changes.
var localWatch = HostWatch{Paths: fixedPaths, Cgroups: []string{"kubepods"}, LinkPrefixes: []string{bridgeName, "veth"}, Daemons: daemons}

// HostState is a snapshot of everything above, taken before a cluster starts: Restore puts
// the host back to it and Leftovers proves nothing stayed.
type HostState struct {
	Sysctls map[string]string   `json:"sysctls"`
	Rules   map[string][]string `json:"rules"` // "iptables/nat" -> `iptables -S` lines
	Links   []string            `json:"links"`
	Paths   map[string]bool     `json:"paths"`
	Netns   []string            `json:"netns"`
	Cgroups []string            `json:"cgroups"` // existing <hierarchy>/<watched cgroup> dirs
	Watch   *HostWatch          `json:"watch,omitempty"`
}

// watch is what the snapshot covers; a record written before HostWatch existed is the
// local node's.
func (s *HostState) watch() HostWatch {
	if s.Watch == nil {
		return localWatch
	}
	return *s.Watch
}

func snapshotHost() (*HostState, error) { return SnapshotHost(localWatch) }

// SnapshotHost records the host's state that a cluster described by w may change.
func SnapshotHost(w HostWatch) (*HostState, error) {
	s := &HostState{Sysctls: map[string]string{}, Rules: map[string][]string{}, Paths: map[string]bool{}, Watch: &w}
	for _, k := range watchedSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading sysctl %s: %w", k, err)
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	s.Rules = iptablesRules()
	var err error
	if s.Links, err = linkNames(); err != nil {
		return nil, err
	}
	for _, p := range w.Paths {
		_, err := os.Lstat(p)
		s.Paths[p] = err == nil
	}
	s.Netns, _ = dirNames(netnsDir)
	hiers, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	for _, h := range hiers {
		for _, c := range w.Cgroups {
			if _, err := os.Stat(filepath.Join(h, c)); err == nil {
				s.Cgroups = append(s.Cgroups, filepath.Join(h, c))
			}
		}
	}
	return s, nil
}

// iptablesRules lists every table's chains and rules, per iptables binary present.
// A table or binary that cannot be listed is left out: there is nothing of it to restore.
func iptablesRules() map[string][]string {
	out := map[string][]string{}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, t := range iptablesTables {
			b, err := exec.Command(bin, "-w", "-t", t, "-S").Output()
			if err != nil {
				continue // the table or the protocol is not there
			}
			out[bin+"/"+t] = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
	}
	return out
}

func linkNames() ([]string, error) {
	b, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("listing network links: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	return names, nil
}

func dirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, fstype string }

func mounts() ([]mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var ms []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(f[4]), fstype: g[0]})
	}
	return ms, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupHierarchies lists the mount points of every cgroup hierarchy (v1 and v2).
func cgroupHierarchies() ([]string, error) {
	ms, err := mounts()
	if err != nil {
		return nil, err
	}
	var hs []string
	for _, m := range ms {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			hs = append(hs, m.point)
		}
	}
	return hs, nil
}

func under(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// unmountUnder detaches every mount at or below the prefixes, deepest first.
func unmountUnder(prefixes []string) error {
	ms, err := mounts()
	if err != nil {
		return err
	}
	var points []string
	for _, m := range ms {
		if under(m.point, prefixes) {
			points = append(points, m.point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Restore puts the host back to the snapshot: everything a cluster added goes, every value
// it changed is written back; mounts at or below prefixes are detached. Processes must be
// gone first.
func (s *HostState) Restore(prefixes []string) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(s.restoreNetns())
	add(unmountUnder(prefixes))
	add(s.restoreCgroups())
	add(s.restoreRules())
	add(s.restoreLinks())
	for _, p := range s.watch().Paths {
		if !s.Paths[p] {
			add(os.RemoveAll(p))
		}
	}
	for k, v := range s.Sysctls {
		if cur, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil && strings.TrimSpace(string(cur)) != v {
			add(os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644))
		}
	}
	return errors.Join(errs...)
}

func (s *HostState) restoreNetns() error {
	names, _ := dirNames(netnsDir)
	var errs []error
	for _, n := range names {
		if slices.Contains(s.Netns, n) {
			continue
		}
		p := filepath.Join(netnsDir, n)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restoreCgroups removes every watched cgroup tree that did not exist before, deepest first.
func (s *HostState) restoreCgroups() error {
	hiers, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hiers {
		for _, c := range s.watch().Cgroups {
			errs = append(errs, s.removeCgroupTree(filepath.Join(h, c)))
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes root and every cgroup below it, deepest first, unless root
// existed before.
func (s *HostState) removeCgroupTree(root string) error {
	if slices.Contains(s.Cgroups, root) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error { // no error: the callback skips what it cannot read
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// restoreRules deletes every iptables rule, then every chain, the node added.
func (s *HostState) restoreRules() error {
	now := iptablesRules()
	var errs []error
	for key, lines := range now {
		bin, table, _ := strings.Cut(key, "/")
		before := s.Rules[key]
		var chains []string
		for _, l := range lines {
			if slices.Contains(before, l) {
				continue
			}
			switch {
			case strings.HasPrefix(l, "-A "):
				args := append([]string{"-w", "-t", table, "-D"}, strings.Fields(l)[1:]...)
				if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, out))
				}
			case strings.HasPrefix(l, "-N "):
				chains = append(chains, strings.TrimPrefix(l, "-N "))
			}
		}
		for _, c := range chains {
			_ = exec.Command(bin, "-w", "-t", table, "-F", c).Run()
			if out, err := exec.Command(bin, "-w", "-t", table, "-X", c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", bin, table, c, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// linkExists says whether the host has a link named name.
func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// restoreLinks deletes the links the cluster made (for the local node: its CNI bridge and
// any veth left over).
func (s *HostState) restoreLinks() error {
	names, err := linkNames()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if slices.Contains(s.Links, n) || !slices.ContainsFunc(s.watch().LinkPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
			continue
		}
		if out, err := exec.Command("ip", "link", "delete", n).CombinedOutput(); err != nil && linkExists(n) {
			// A veth whose pod's network namespace is being torn down goes by itself, and
			// may go between the listing and the delete.
			errs = append(errs, fmt.Errorf("deleting link %s: %v: %s", n, err, out))
		}
	}
	return errors.Join(errs...)
}

// Leftovers compares the host with the snapshot and says what differs: the proof that a
// teardown was complete. Processes whose command line names the cluster's directory and
// mounts under its prefixes count too.
func (s *HostState) Leftovers(dir string, prefixes []string) []string {
	var out []string
	now, err := SnapshotHost(s.watch())
	if err != nil {
		return []string{"snapshot: " + err.Error()}
	}
	for k, v := range s.Sysctls {
		if now.Sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s = %s, was %s", k, now.Sysctls[k], v))
		}
	}
	for key, lines := range now.Rules {
		for _, l := range lines {
			if !slices.Contains(s.Rules[key], l) {
				out = append(out, fmt.Sprintf("%s: %s", key, l))
			}
		}
	}
	for _, l := range now.Links {
		if !slices.Contains(s.Links, l) {
			out = append(out, "network link "+l)
		}
	}
	for p, ok := range now.Paths {
		if ok && !s.Paths[p] {
			out = append(out, "path "+p)
		}
	}
	for _, n := range now.Netns {
		if !slices.Contains(s.Netns, n) {
			out = append(out, "netns "+n)
		}
	}
	for _, c := range now.Cgroups {
		if !slices.Contains(s.Cgroups, c) {
			out = append(out, "cgroup "+c)
		}
	}
	if ms, err := mounts(); err == nil {
		for _, m := range ms {
			if under(m.point, prefixes) {
				out = append(out, "mount "+m.point)
			}
		}
	}
	for _, pid := range ProcessesNaming(dir, s.watch().Daemons) {
		out = append(out, fmt.Sprintf("process %d", pid))
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	sort.Strings(out)
	return out
}

// daemons are the programs a node runs on the host.
var daemons = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "containerd", "containerd-shim-runc-v2"}

// processesNaming lists the local node's daemons whose command line mentions dir: every
// daemon of a node gets its configuration from there, and containerd's shims its socket.
func processesNaming(dir string) []int { return ProcessesNaming(dir, daemons) }

// ProcessesNaming lists the processes running one of the programs named in daemons whose
// command line mentions dir.
func ProcessesNaming(dir string, daemons []string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !slices.Contains(daemons, filepath.Base(exe)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
