// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// BenchmarkLedgerWrite is the ledger write of a fork pass: the ledger holds containers ×
// tasks (10,000 tasks: a forking server's exited backends, which stay until the next full
// pass forgets them), and each op records one new task in one container (forgetting the previous
// op's, so the ledger keeps its size) and writes it ahead, on the disk of the test's
// temporary directory, as a fork pass that SETs does.
func BenchmarkLedgerWrite(b *testing.B) {
	for _, size := range []struct{ containers, tasks int }{{10, 10}, {110, 10}, {1, 10000}} {
		containers := size.containers
		b.Run(fmt.Sprintf("containers=%d,tasks=%d", containers, size.tasks), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "ledger.json"), Options{Log: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			ref := func(c int) (desire.ContainerKey, cgroups.ContainerRef) {
				uid := fmt.Sprintf("pod-%04d", c)
				return desire.ContainerKey{PodUID: types.UID(uid), Container: "main"},
					cgroups.ContainerRef{PodUID: uid, ContainerID: fmt.Sprintf("containerd://%064d", c)}
			}
			for c := range containers {
				key, r := ref(c)
				tasks := map[int]*known.Task{}
				for t := range size.tasks {
					tid := 1000 + c*size.tasks + t
					tasks[tid] = &known.Task{Start: uint64(tid) * 7, Prev: -1, Values: []int{1}}
				}
				s.Record(key, known.Change{Ref: r, Put: tasks})
			}
			if err := s.Write(); err != nil {
				b.Fatal(err)
			}
			key, r := ref(0)
			b.ResetTimer()
			for i := range b.N {
				tid := 1 << 20
				s.Record(key, known.Change{Ref: r, Put: map[int]*known.Task{tid + i: {Start: uint64(i), Prev: -1, Values: []int{1}}},
					Forget: []int{tid + i - 1}})
				if err := s.Write(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
