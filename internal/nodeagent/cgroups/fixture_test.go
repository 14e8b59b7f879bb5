// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The fixture host under testdata/host: a fake /proc (testdata/host/proc) and one cgroup
// tree per cgroup version × driver × runtime (testdata/host/cgroup/v<N>-<driver>-<runtime>,
// used as ResolverOptions.CgroupRoot). Every tree holds the same three pods:
//
//	Guaranteed  API pod     container with two processes in one cgroup
//	Burstable   static pod  container with nested sub-cgroups (nested, nested/deeper);
//	                        on v1 one thread of the main process sits in nested/deeper
//	BestEffort  API pod     container with one 10-thread process; a fourth container
//	                        (fxExitedID) has exited, its cgroup is gone
//
// plus each pod's sandbox cgroup and, for CRI-O, the crio-conmon-<id> siblings holding
// conmon. v1 trees have the cpuset hierarchy, the pids hierarchy (cgroupfs driver) or only
// name=systemd (systemd driver), and an empty cgroup2 "unified" mount as on hybrid hosts.
// Special cases: in v2-systemd-crio the BestEffort container's tasks are in a "container"
// sub-cgroup of its scope (crun's layout); in v2-cgroupfs-docker the BestEffort container
// has no cpuset files (controller not enabled down to it).
//
// The tree is written by fixtureFiles; TestFixturesUpToDate keeps testdata in step:
//
//	go test ./internal/nodeagent/cgroups/ -run TestFixturesUpToDate -update-fixtures
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/host from the fixture generator")

const fixtureHost = "testdata/host"

// Fixture pods and containers.
const (
	fxUIDGuaranteed = "6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f"
	fxUIDBurstable  = "0a1b2c3d4e5f60718293a4b5c6d7e8f9" // static pod: 32 hex, no dashes
	fxUIDBestEffort = "c0ffee00-1234-4abc-9def-0123456789ab"
)

var (
	fxCtrGuaranteed = strings.Repeat("a1", 32)
	fxCtrBurstable  = strings.Repeat("b2", 32)
	fxCtrBestEffort = strings.Repeat("e3", 32)
	fxExitedID      = strings.Repeat("d4", 32)
	fxSandboxG      = strings.Repeat("51", 32)
	fxSandboxB      = strings.Repeat("52", 32)
	fxSandboxE      = strings.Repeat("53", 32)
)

type fixtureCombo struct {
	version int
	driver  string
	runtime string
}

func (c fixtureCombo) String() string {
	rt := map[string]string{RuntimeContainerd: "containerd", RuntimeCRIO: "crio", RuntimeDocker: "docker"}[c.runtime]
	return fmt.Sprintf("v%d-%s-%s", c.version, c.driver, rt)
}

func (c fixtureCombo) root() string { return filepath.Join(fixtureHost, "cgroup", c.String()) }

func fixtureCombos() []fixtureCombo {
	var combos []fixtureCombo
	for _, v := range []int{1, 2} {
		for _, d := range []string{DriverCgroupfs, DriverSystemd} {
			for _, rt := range []string{RuntimeContainerd, RuntimeCRIO, RuntimeDocker} {
				combos = append(combos, fixtureCombo{v, d, rt})
			}
		}
	}
	return combos
}

// fixtureCgroup is one cgroup directory of a fixture tree.
type fixtureCgroup struct {
	path           string // relative to the hierarchy root
	procs, threads []int  // written in this order
	cpus, mems     string // "" on v2: no cpuset files
}

// Written independently of the resolver's naming code, from the runtimes' documented
// layouts, so the fixtures check it rather than echo it.
var fixturePodDirs = map[string]map[string]string{
	DriverCgroupfs: {
		"Guaranteed": "/kubepods/pod" + fxUIDGuaranteed,
		"Burstable":  "/kubepods/burstable/pod" + fxUIDBurstable,
		"BestEffort": "/kubepods/besteffort/pod" + fxUIDBestEffort,
	},
	DriverSystemd: {
		"Guaranteed": "/kubepods.slice/kubepods-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice",
		"Burstable":  "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d4e5f60718293a4b5c6d7e8f9.slice",
		"BestEffort": "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc0ffee00_1234_4abc_9def_0123456789ab.slice",
	},
}

var fixtureLeafFormats = map[string]string{
	DriverCgroupfs + "/" + RuntimeContainerd: "%s",
	DriverCgroupfs + "/" + RuntimeCRIO:       "crio-%s",
	DriverCgroupfs + "/" + RuntimeDocker:     "%s",
	DriverSystemd + "/" + RuntimeContainerd:  "cri-containerd-%s.scope",
	DriverSystemd + "/" + RuntimeCRIO:        "crio-%s.scope",
	DriverSystemd + "/" + RuntimeDocker:      "docker-%s.scope",
}

func (c fixtureCombo) leaf(id string) string {
	return fmt.Sprintf(fixtureLeafFormats[c.driver+"/"+c.runtime], id)
}

func (c fixtureCombo) conmonLeaf(id string) string {
	if c.driver == DriverSystemd {
		return "crio-conmon-" + id + ".scope"
	}
	return "crio-conmon-" + id
}

func fixtureTree(c fixtureCombo) []fixtureCgroup {
	const allCPUs, allMems = "0-7", "0-1"
	pods := fixturePodDirs[c.driver]
	cg := func(path string, procs, threads []int, cpus, mems string) fixtureCgroup {
		return fixtureCgroup{path: path, procs: procs, threads: threads, cpus: cpus, mems: mems}
	}
	shared := func(path string, procs, threads []int) fixtureCgroup {
		return cg(path, procs, threads, allCPUs, allMems)
	}
	var tree []fixtureCgroup
	if c.driver == DriverSystemd {
		tree = append(tree,
			shared("/kubepods.slice", nil, nil),
			shared("/kubepods.slice/kubepods-burstable.slice", nil, nil),
			shared("/kubepods.slice/kubepods-besteffort.slice", nil, nil))
	} else {
		tree = append(tree,
			shared("/kubepods", nil, nil),
			shared("/kubepods/burstable", nil, nil),
			shared("/kubepods/besteffort", nil, nil))
	}
	type pod struct {
		qos, sandbox, ctr string
		sandboxPID        int
		conmonPID         int
	}
	for _, p := range []pod{
		{"Guaranteed", fxSandboxG, fxCtrGuaranteed, 100, 190},
		{"Burstable", fxSandboxB, fxCtrBurstable, 300, 390},
		{"BestEffort", fxSandboxE, fxCtrBestEffort, 500, 590},
	} {
		dir := pods[p.qos]
		tree = append(tree,
			shared(dir, nil, nil),
			shared(dir+"/"+c.leaf(p.sandbox), ints(p.sandboxPID), ints(p.sandboxPID)))
		if c.runtime == RuntimeCRIO {
			tree = append(tree, shared(dir+"/"+c.conmonLeaf(p.ctr), ints(p.conmonPID), ints(p.conmonPID)))
		}
		ctr := dir + "/" + c.leaf(p.ctr)
		switch p.qos {
		case "Guaranteed":
			tree = append(tree, cg(ctr, ints(210, 200), ints(210, 200, 201, 211, 202), "2-3", "1"))
		case "Burstable":
			if c.version == 1 {
				tree = append(tree,
					cg(ctr, ints(400), ints(400, 401), "0-1,4-7", allMems),
					cg(ctr+"/nested", ints(410), ints(410, 411, 412), "0-1,4-7", allMems),
					cg(ctr+"/nested/deeper", ints(420, 400), ints(420, 402), "0-1,4-7", allMems))
			} else {
				tree = append(tree,
					cg(ctr, ints(400), ints(400, 401, 402), "0-1,4-7", allMems),
					cg(ctr+"/nested", ints(410), ints(410, 411, 412), "0-1,4-7", allMems),
					cg(ctr+"/nested/deeper", ints(420), ints(420), "0-1,4-7", allMems))
			}
		case "BestEffort":
			threads := ints(600, 601, 602, 603, 604, 605, 606, 607, 608, 609)
			switch c {
			case fixtureCombo{2, DriverSystemd, RuntimeCRIO}:
				tree = append(tree,
					shared(ctr, nil, nil),
					shared(ctr+"/container", ints(600), threads))
			case fixtureCombo{2, DriverCgroupfs, RuntimeDocker}:
				tree = append(tree, cg(ctr, ints(600), threads, "", ""))
			default:
				tree = append(tree, shared(ctr, ints(600), threads))
			}
		}
	}
	return tree
}

func ints(v ...int) []int { return v }

func idLines(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.Itoa(id))
		b.WriteByte('\n')
	}
	return b.String()
}

// fixtureProcesses maps every fixture process to its threads.
var fixtureProcesses = map[int][]int{
	100: {100}, 300: {300}, 500: {500}, 190: {190}, 390: {390}, 590: {590},
	200: {200, 201, 202}, 210: {210, 211},
	400: {400, 401, 402}, 410: {410, 411, 412}, 420: {420},
	600: {600, 601, 602, 603, 604, 605, 606, 607, 608, 609},
}

// fixtureStartTime is the start time (clock ticks) of fixture task tid.
func fixtureStartTime(tid int) uint64 { return 100000 + uint64(tid) }

// fixtureStat is a /proc/<tid>/stat line with 52 fields, starttime (22) set.
func fixtureStat(tid, tgid int, start uint64) string {
	f := make([]string, 52)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[1], f[2], f[3], f[4] = strconv.Itoa(tid), "(fx app)", "S", "1", strconv.Itoa(tgid)
	f[19] = strconv.Itoa(len(fixtureProcesses[tgid]))
	f[21] = strconv.FormatUint(start, 10)
	return strings.Join(f, " ") + "\n"
}

// fixtureFiles returns every file of the fixture host, by path relative to it.
func fixtureFiles() map[string]string {
	files := map[string]string{}
	for tgid, tids := range fixtureProcesses {
		for _, tid := range tids {
			stat := fixtureStat(tid, tgid, fixtureStartTime(tid))
			files[fmt.Sprintf("proc/%d/stat", tid)] = stat
			files[fmt.Sprintf("proc/%d/task/%d/stat", tgid, tid)] = stat
		}
	}
	for _, c := range fixtureCombos() {
		root := "cgroup/" + c.String()
		tree := fixtureTree(c)
		if c.version == 2 {
			files[root+"/cgroup.controllers"] = "cpuset cpu io memory hugetlb pids rdma misc\n"
			files[root+"/cgroup.procs"] = "1\n"
			files[root+"/cgroup.threads"] = "1\n"
			files[root+"/cpuset.cpus.effective"] = "0-7\n"
			files[root+"/cpuset.mems.effective"] = "0-1\n"
			for _, g := range tree {
				dir := root + g.path
				files[dir+"/cgroup.controllers"] = "cpuset cpu io memory pids\n"
				files[dir+"/cgroup.procs"] = idLines(g.procs)
				files[dir+"/cgroup.threads"] = idLines(g.threads)
				if g.cpus != "" {
					files[dir+"/cpuset.cpus.effective"] = g.cpus + "\n"
					files[dir+"/cpuset.mems.effective"] = g.mems + "\n"
				}
			}
			continue
		}
		tasksHierarchy := "pids"
		if c.driver == DriverSystemd {
			tasksHierarchy = "systemd"
		}
		files[root+"/unified/cgroup.controllers"] = ""
		files[root+"/unified/cgroup.procs"] = "1\n"
		for _, h := range []string{tasksHierarchy, "cpuset"} {
			files[root+"/"+h+"/tasks"] = "1\n"
			files[root+"/"+h+"/cgroup.procs"] = "1\n"
			if h == "cpuset" {
				files[root+"/cpuset/cpuset.effective_cpus"] = "0-7\n"
				files[root+"/cpuset/cpuset.effective_mems"] = "0-1\n"
			}
			for _, g := range tree {
				dir := root + "/" + h + g.path
				files[dir+"/cgroup.procs"] = idLines(g.procs)
				files[dir+"/tasks"] = idLines(g.threads)
				if h == "cpuset" {
					files[dir+"/cpuset.cpus"] = g.cpus + "\n"
					files[dir+"/cpuset.mems"] = g.mems + "\n"
					files[dir+"/cpuset.effective_cpus"] = g.cpus + "\n"
					files[dir+"/cpuset.effective_mems"] = g.mems + "\n"
				}
			}
		}
	}
	return files
}

func writeFixtureFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFixtureFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil && (!os.IsNotExist(err) || !*updateFixtures) {
		t.Fatalf("reading fixtures: %v", err)
	}
	return files
}

func TestFixturesUpToDate(t *testing.T) {
	want := fixtureFiles()
	if *updateFixtures {
		if err := os.RemoveAll(fixtureHost); err != nil {
			t.Fatal(err)
		}
		writeFixtureFiles(t, fixtureHost, want)
	}
	got := readFixtureFiles(t, fixtureHost)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("testdata/host is stale; run go test -run TestFixturesUpToDate -update-fixtures (-generator +testdata):\n%s", diff)
	}
}

// copyFixture copies one fixture cgroup tree and the fixture /proc into a temporary host
// root that a test may change; it returns the host root and the cgroup root.
func copyFixture(t testing.TB, c fixtureCombo) (hostRoot, cgroupRoot string) {
	t.Helper()
	hostRoot = t.TempDir()
	files := map[string]string{}
	prefix := "cgroup/" + c.String() + "/"
	for name, content := range fixtureFiles() {
		if strings.HasPrefix(name, "proc/") || strings.HasPrefix(name, prefix) {
			files[name] = content
		}
	}
	writeFixtureFiles(t, hostRoot, files)
	return hostRoot, filepath.Join(hostRoot, "cgroup", c.String())
}
