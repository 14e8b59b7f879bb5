// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Container runtimes, as the scheme of a status containerID ("containerd://<id>").
const (
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimeDocker     = "docker"
)

// containerIDLen is the length of the ids containerd's CRI plugin, CRI-O and Docker
// (cri-dockerd) generate: 32 random bytes in lowercase hex.
const containerIDLen = 64

// ParseContainerID splits a status containerID ("containerd://<id>", "cri-o://<id>",
// "docker://<id>") into runtime and id. A bare id yields runtime "". The id must be 64
// lowercase hex digits, which also keeps it from naming any other path.
func ParseContainerID(s string) (runtime, id string, err error) {
	id = s
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch scheme {
		case RuntimeContainerd, RuntimeCRIO, RuntimeDocker:
		default:
			return "", "", fmt.Errorf("container id %q: unsupported runtime %q (want %s, %s or %s): %w",
				s, scheme, RuntimeContainerd, RuntimeCRIO, RuntimeDocker, ErrInvalidContainerRef)
		}
		runtime, id = scheme, rest
	}
	if len(id) != containerIDLen || !isLowerHex(id) {
		return "", "", fmt.Errorf("container id %q: want %d lowercase hex digits after the runtime: %w",
			s, containerIDLen, ErrInvalidContainerRef)
	}
	return runtime, id, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validatePodUID accepts API pod UIDs (RFC 4122, with dashes) and static pod UIDs
// (32 hex digits): letters, digits, '-' and '_', at most 128 characters.
func validatePodUID(uid string) error {
	if uid == "" || len(uid) > 128 {
		return fmt.Errorf("pod uid %q: want 1 to 128 characters: %w", uid, ErrInvalidContainerRef)
	}
	for i := 0; i < len(uid); i++ {
		c := uid[i]
		if !isNameChar(c) || c == '.' {
			return fmt.Errorf("pod uid %q: unexpected character %q: %w", uid, c, ErrInvalidContainerRef)
		}
	}
	return nil
}

// isNameChar reports whether c may appear in a cgroup or unit name component we build or
// accept: letters, digits, '-', '_' and '.'.
func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// qosLevels returns the kubelet's QoS cgroup component for a class ("" for Guaranteed,
// which has none); an empty class yields all three, Guaranteed first.
func qosLevels(qos corev1.PodQOSClass) ([]string, error) {
	switch qos {
	case corev1.PodQOSGuaranteed:
		return []string{""}, nil
	case corev1.PodQOSBurstable:
		return []string{"burstable"}, nil
	case corev1.PodQOSBestEffort:
		return []string{"besteffort"}, nil
	case "":
		return []string{"", "burstable", "besteffort"}, nil
	default:
		return nil, fmt.Errorf("qos class %q: want %s, %s or %s: %w", qos,
			corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort, ErrInvalidContainerRef)
	}
}

// podCgroupName returns kubelet's cgroup name of a pod: the components of the kubelet
// cgroup root, then kubepods, the QoS level (none for Guaranteed) and pod<uid>.
func podCgroupName(rootNames []string, qosLevel, uid string) []string {
	name := append(make([]string, 0, len(rootNames)+3), rootNames...)
	name = append(name, "kubepods")
	if qosLevel != "" {
		name = append(name, qosLevel)
	}
	return append(name, "pod"+uid)
}

// cgroupfsName turns a kubelet cgroup name into its cgroupfs path: "/a/b/c".
func cgroupfsName(name []string) string {
	return "/" + strings.Join(name, "/")
}

// systemdName turns a kubelet cgroup name into the systemd driver's path: every
// component's '-' becomes '_', the components join with '-' into one slice name, and the
// slice expands into its parents: {kubepods, burstable, pod1-2} ->
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
func systemdName(name []string) (string, error) {
	escaped := make([]string, len(name))
	for i, part := range name {
		escaped[i] = strings.ReplaceAll(part, "-", "_")
	}
	return expandSlice(strings.Join(escaped, "-") + ".slice")
}

// expandSlice turns a systemd slice unit name into its cgroup path:
// "a-b-c.slice" -> "/a.slice/a-b.slice/a-b-c.slice"; "-.slice" is the root, "/".
func expandSlice(slice string) (string, error) {
	base, ok := strings.CutSuffix(slice, ".slice")
	if !ok || base == "" {
		return "", fmt.Errorf("slice %q: want <name>.slice: %w", slice, ErrInvalidContainerRef)
	}
	if base == "-" {
		return "/", nil
	}
	for i := 0; i < len(base); i++ {
		if !isNameChar(base[i]) {
			return "", fmt.Errorf("slice %q: unexpected character %q: %w", slice, base[i], ErrInvalidContainerRef)
		}
	}
	var b strings.Builder
	b.Grow(len(base) * 3)
	prefix := 0
	for _, comp := range strings.Split(base, "-") {
		if comp == "" {
			return "", fmt.Errorf("slice %q: empty component: %w", slice, ErrInvalidContainerRef)
		}
		if prefix > 0 {
			prefix++ // the '-' before comp
		}
		prefix += len(comp)
		b.WriteByte('/')
		b.WriteString(base[:prefix])
		b.WriteString(".slice")
	}
	return b.String(), nil
}

// parseKubeletCgroupRoot splits kubelet's cgroupRoot ("/", "/kubelet", "a/b") into name
// components.
func parseKubeletCgroupRoot(root string) ([]string, error) {
	var names []string
	for _, part := range strings.Split(root, "/") {
		if part == "" {
			continue
		}
		if err := validateUnitPart(part); err != nil {
			return nil, fmt.Errorf("kubelet cgroup root %q: component %v: %w", root, err, ErrUnknownLayout)
		}
		names = append(names, part)
	}
	return names, nil
}

// containerLeaves returns the name a runtime gives a container's cgroup inside its pod's
// cgroup under a driver; runtime "" yields every runtime's name.
//
//	driver    containerd                   CRI-O              Docker (cri-dockerd)
//	cgroupfs  <id>                         crio-<id>          <id>
//	systemd   cri-containerd-<id>.scope    crio-<id>.scope    docker-<id>.scope
//
// CRI-O also makes crio-conmon-<id>[.scope] beside the container for its monitor
// process; that cgroup is not the container's and is never returned.
func containerLeaves(driver, runtime, id string) []string {
	if driver == DriverSystemd {
		switch runtime {
		case RuntimeContainerd:
			return []string{"cri-containerd-" + id + ".scope"}
		case RuntimeCRIO:
			return []string{"crio-" + id + ".scope"}
		case RuntimeDocker:
			return []string{"docker-" + id + ".scope"}
		}
		return []string{"cri-containerd-" + id + ".scope", "crio-" + id + ".scope", "docker-" + id + ".scope"}
	}
	switch runtime {
	case RuntimeContainerd, RuntimeDocker:
		return []string{id}
	case RuntimeCRIO:
		return []string{"crio-" + id}
	}
	return []string{id, "crio-" + id}
}

// ParseCgroupsPath turns a runtime-reported cgroups path into a cgroup path relative to a
// hierarchy's root ("/kubepods/..."). Accepted forms:
//
//	systemd  "<slice>:<prefix>:<name>"  -> expanded slice + "/<prefix>-<name>.scope"
//	         (a <name> ending in .slice is itself the unit, as runc does it)
//	cgroupfs "/kubepods/burstable/pod<uid>/<id>" (leading '/' optional)
//	/proc/<pid>/cgroup line "<n>:<controllers>:/path"
//
// '.' and '..' components are refused, so the result never leaves the hierarchy.
func ParseCgroupsPath(s string) (string, error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 3 && strings.HasPrefix(parts[2], "/"):
		return cleanCgroupPath(parts[2], s)
	case len(parts) == 3:
		slice, prefix, name := parts[0], parts[1], parts[2]
		dir, err := expandSlice(slice)
		if err != nil {
			return "", fmt.Errorf("cgroups path %q: %w", s, err)
		}
		if err := validateUnitPart(prefix); err != nil {
			return "", fmt.Errorf("cgroups path %q: prefix: %w", s, err)
		}
		if err := validateUnitPart(name); err != nil {
			return "", fmt.Errorf("cgroups path %q: name: %w", s, err)
		}
		unit := prefix + "-" + name + ".scope"
		if strings.HasSuffix(name, ".slice") {
			unit = name
		}
		if dir == "/" {
			return "/" + unit, nil
		}
		return dir + "/" + unit, nil
	case len(parts) == 1:
		return cleanCgroupPath(s, s)
	default:
		return "", fmt.Errorf("cgroups path %q: want <slice>:<prefix>:<name> or a path: %w", s, ErrInvalidContainerRef)
	}
}

func validateUnitPart(s string) error {
	if s == "" {
		return fmt.Errorf("empty: %w", ErrInvalidContainerRef)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("%q: %w", s, ErrInvalidContainerRef)
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return fmt.Errorf("%q: unexpected character %q: %w", s, s[i], ErrInvalidContainerRef)
		}
	}
	return nil
}

// cleanCgroupPath checks a cgroupfs path and returns it with one leading '/' and no
// empty components.
func cleanCgroupPath(p, orig string) (string, error) {
	var b strings.Builder
	for _, part := range strings.Split(p, "/") {
		if part == "" {
			continue
		}
		if part == "." || part == ".." {
			return "", fmt.Errorf("cgroups path %q: component %q: %w", orig, part, ErrInvalidContainerRef)
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; c < 0x20 || c == 0x7f {
				return "", fmt.Errorf("cgroups path %q: control character: %w", orig, ErrInvalidContainerRef)
			}
		}
		b.WriteByte('/')
		b.WriteString(part)
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("cgroups path %q: names the root: %w", orig, ErrInvalidContainerRef)
	}
	return b.String(), nil
}
