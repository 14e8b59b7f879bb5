// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/numa"
)

func printJSON(w io.Writer, pod *inspect.Pod) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(pod)
}

// printTable prints the pod header, one row per container, then one row per task.
func printTable(w io.Writer, pod *inspect.Pod) error {
	printPodHeader(w, pod)
	if !selected(pod) {
		fmt.Fprintln(w, "Not selected: no annotation or NumaPreference asks for a container of this pod, so the agent")
		fmt.Fprintln(w, "does not describe it (no cgroups, tasks or host ids of pods it does not manage).")
		return nil
	}
	if err := printContainers(w, pod); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printTasks(w, pod)
}

func printPodHeader(w io.Writer, pod *inspect.Pod) {
	kernel := pod.Kernel.Backend
	if kernel == "" {
		kernel = "unknown"
	}
	if !pod.Kernel.Supported {
		kernel += " (unsupported: " + pod.Kernel.Reason + ")"
	}
	fmt.Fprintf(w, "Pod:     %s/%s (uid %s, %s)\n", pod.Namespace, pod.Name, pod.UID, orDash(pod.QOSClass))
	fmt.Fprintf(w, "Node:    %s\n", pod.Node)
	fmt.Fprintf(w, "Kernel:  %s\n\n", kernel)
}

// printContainers prints one row per container, then each container's notes (its mode,
// message and the errors of reading its cgroup, cpuset and tasks).
func printContainers(w io.Writer, pod *inspect.Pod) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tDESIRED\tSOURCE\tREASON\tBY\tPLACED\tTASKS\tCPUSET MEMS\tCGROUP")
	var notes []string
	for _, c := range pod.Containers {
		name := c.Name
		if c.Init {
			name += " (init)"
		}
		tasks := strconv.Itoa(len(c.Tasks))
		if c.DesiredNode != nil {
			tasks = fmt.Sprintf("%d/%d", c.ManagedTasks, len(c.Tasks))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, desired(c.DesiredNode), orDash(c.Source), c.Reason, orDash(c.Mechanism),
			orDash(c.PlacedAt), tasks, cpusetMems(c), cgroupPath(c))
		notes = append(notes, containerNotes(c)...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

func cgroupPath(c inspect.Container) string {
	if c.Cgroup == nil {
		return "-"
	}
	return c.Cgroup.Path
}

func cpusetMems(c inspect.Container) string {
	switch {
	case c.Cpuset == nil:
		return "-"
	case c.Cpuset.ControllerMissing:
		return "all (no cpuset controller)"
	default:
		return numa.FormatList(c.Cpuset.Mems)
	}
}

// containerNotes are the lines printed under the container table for c.
func containerNotes(c inspect.Container) []string {
	mode := ""
	if c.Mode != "" && c.Mode != "Static" {
		mode = "mode " + c.Mode
		if c.Why != "" {
			mode = c.Why
		}
	}
	var notes []string
	for _, n := range []struct{ what, msg string }{
		{"", mode}, {"", c.Message}, {"devices followed: ", devicesNote(c.Devices)}, {"memory policy ", c.MemoryPolicy}, {"page migration: ", migrationNote(c.Migration)},
		{"cgroup: ", c.CgroupError}, {"cpuset: ", c.CpusetError}, {"tasks: ", c.TasksError},
	} {
		if n.msg != "" {
			notes = append(notes, fmt.Sprintf("  %s: %s%s", c.Name, n.what, n.msg))
		}
	}
	return notes
}

// migrationNote says where the move of a container's pages stands; "" for none.
func migrationNote(m *inspect.Migration) string {
	if m == nil {
		return ""
	}
	state := m.State
	if m.Ended != "" {
		state += " (" + m.Ended + ")"
	}
	note := fmt.Sprintf("to node %d, %s, %d pages moved, %d not moved", m.Node, state, m.PagesMoved, m.PagesNotMoved)
	if m.Error != "" {
		note += ": " + m.Error
	}
	return note
}

// devicesNote names each device FollowDevices follows and its NUMA nodes:
// "example.com/gpu g0 on node 1, gpu.example.com claim ns/c (gpu.example.com pool-a g1) on no node".
func devicesNote(ds []inspect.Device) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		what := d.ResourceName + " " + d.ID
		if d.Driver != "" {
			what = fmt.Sprintf("%s %s (claim %s, driver %s, pool %s)", orDash(d.DeviceClassName), d.ID, d.Claim, d.Driver, d.Pool)
		}
		where := "no NUMA node"
		if len(d.Nodes) > 0 {
			where = "node " + numa.FormatList(d.Nodes)
		}
		parts = append(parts, what+" on "+where)
	}
	return strings.Join(parts, ", ")
}

// printTasks prints one row per task of each container.
func printTasks(w io.Writer, pod *inspect.Pod) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tTID\tTGID\tFORCED\tEFFECTIVE\tDESIRED")
	for _, c := range pod.Containers {
		// The engine lists the tasks of the containers it acts on: there, a task it did not
		// list is new since its last pass.
		acted := slices.ContainsFunc(c.Tasks, func(t inspect.Task) bool { return t.Listed })
		for _, t := range c.Tasks {
			tid := strconv.Itoa(t.TID)
			if acted && !t.Listed {
				tid += "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", c.Name, tid, t.TGID, node(t.Forced), node(t.Effective), desired(c.DesiredNode))
		}
	}
	return tw.Flush()
}

// node prints a kernel node value: -1 is "none", an unread value "?".
func node(v *int) string {
	switch {
	case v == nil:
		return "?"
	case *v == inspect.NoNode:
		return "none"
	}
	return strconv.Itoa(*v)
}

func desired(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// selected reports whether the agent described pod in detail: Pod.Selected, or, from an
// agent that predates the field, a container with another reason than NotSelected.
func selected(pod *inspect.Pod) bool {
	return pod.Selected || slices.ContainsFunc(pod.Containers, func(c inspect.Container) bool { return c.Reason != inspect.ReasonNotSelected })
}
