// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agent runs the numapref agent binary (cmd/numapref, --kernel=auto) inside the
// kernel lab VM against a real kube-apiserver and etcd on the host (test/kernellab/apihost),
// reached through qemu's user network with restrict=on and one guestfwd. The tests play
// kubelet: they create the Node's pods in the API and their kubepods-shaped cgroups and
// workloads in the VM. TestAgent checks what the agent does on the patched kernel (placed,
// forks, metrics, inspect, idle cost, undo) and on the control kernel (KernelUnsupported,
// no prctl 78); TestEffect measures what the preference does to a workload's memory in the
// seed's four scenarios and a fifth, the preference set before the workload's first touch
// (as NRI sets it at the container's start); TestCRIPod runs containerd and runc in the
// patched VM with the agent as their NRI plugin, starts pods through CRI (crictl), and
// checks that the selected pod's container reads its preferred node at its first
// instruction. hack/kernel/lab.sh runs them (make kernel-lab).
package agent
