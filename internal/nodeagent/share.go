// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import "github.com/numapref/numapref/internal/nodeagent/ledger"

// What the agent keeps per task is shared by every container of the node: the ledger (one
// file, of a bounded size) and the pidfds a pass holds (bounded by the open files limit).
// A container whose tasks would take more than its share gets TooManyTasks: planning
// refuses it before it identifies a task, so it has no ledger entry past the share and
// holds no pidfd, and what the agent set in it before is undone. Only that container
// stops being placed; the node's others keep theirs.

// DefaultMaxTasksPerContainer is one container's share unless the agent is told another
// (--max-tasks-per-container): nine containers at their share fit in the ledger's bound.
const DefaultMaxTasksPerContainer = 32768

// taskShare is one container's share of tasks: share (DefaultMaxTasksPerContainer when
// not positive), and never more than a ledger of ledgerLimit bytes holds.
func taskShare(share, ledgerLimit int) int {
	if share <= 0 {
		share = DefaultMaxTasksPerContainer
	}
	return max(1, min(share, ledger.TaskCapacity(ledgerLimit)))
}
