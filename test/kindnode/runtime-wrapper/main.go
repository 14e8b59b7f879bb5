// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command runtime-wrapper is the OCI runtime dockerd runs kind's node containers with on
// hosts whose capability bounding set lacks CAP_SYS_RESOURCE (these Firecracker VMs).
// Docker 20.10 gives a --privileged container every capability it knows, and runc fails
// to apply one the bounding set lacks ("unable to apply caps: operation not permitted").
// The wrapper removes the missing capabilities from the bundle's config.json (runc create
// and run) and from the --process file (runc exec), then executes runc with the same
// arguments. Everything else passes through untouched.
//
//	dockerd --add-runtime numapref-runc=/path/runtime-wrapper --default-runtime numapref-runc
//
// RUNTIME_WRAPPER_RUNC names the real runc (default /usr/bin/runc, else runc on PATH).
// `runtime-wrapper --missing-caps` prints the capabilities the bounding set lacks, one a
// line, and exits: nothing printed means the host needs no wrapper.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--missing-caps" {
		for _, c := range missingCaps() {
			fmt.Println(c)
		}
		return
	}
	runc := os.Getenv("RUNTIME_WRAPPER_RUNC")
	if runc == "" {
		runc = "/usr/bin/runc"
		if _, err := os.Stat(runc); err != nil {
			if p, err := exec.LookPath("runc"); err == nil {
				runc = p
			}
		}
	}
	if err := rewrite(os.Args[1:], missingCaps()); err != nil {
		fmt.Fprintln(os.Stderr, "runtime-wrapper:", err)
		os.Exit(1)
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runtime-wrapper: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// rewrite strips caps from the OCI files the runc command in args reads.
func rewrite(args []string, caps []string) error {
	if len(caps) == 0 {
		return nil
	}
	cmd, rest := command(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "bundle", "b")
		if bundle == "" {
			bundle = "."
		}
		return stripFile(filepath.Join(bundle, "config.json"), caps, func(doc map[string]any) map[string]any {
			p, _ := doc["process"].(map[string]any)
			return p
		})
	case "exec":
		if f := flagValue(rest, "process", "p"); f != "" {
			return stripFile(f, caps, func(doc map[string]any) map[string]any { return doc })
		}
	}
	return nil
}

// globalWithValue are runc's global flags that take a separate value.
var globalWithValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// command finds runc's subcommand after the global flags.
func command(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalWithValue[a] {
			i++
		}
	}
	return "", nil
}

// flagValue returns the value of --long or -short in args (either "--long v" or "--long=v").
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		for _, f := range []string{"--" + long, "-" + long, "-" + short} {
			if a == f && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v
			}
		}
	}
	return ""
}

// stripFile removes caps from every capability set of the process object that proc finds
// in the JSON file, and writes the file back only if something changed.
func stripFile(path string, caps []string, proc func(map[string]any) map[string]any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	p := proc(doc)
	if p == nil {
		return nil
	}
	sets, _ := p["capabilities"].(map[string]any)
	changed := false
	for name, v := range sets {
		list, _ := v.([]any)
		kept := list[:0:0]
		for _, c := range list {
			if s, _ := c.(string); contains(caps, s) {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		sets[name] = kept
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, st.Mode().Perm())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// capNames are the capabilities a privileged container may ask for, by number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// missingCaps lists the known capabilities this process's bounding set lacks (on these
// VMs: CAP_SYS_RESOURCE), read from /proc/self/status.
func missingCaps() []string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		v, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil
		}
		return Missing(bnd)
	}
	return nil
}

// Missing lists the known capabilities absent from the bounding set bnd.
func Missing(bnd uint64) []string {
	var out []string
	for i, name := range capNames {
		if bnd&(1<<uint(i)) == 0 {
			out = append(out, name)
		}
	}
	return out
}
