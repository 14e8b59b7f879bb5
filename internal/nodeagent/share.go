package nodeagent

import "fmt"

// What the agent keeps per task is shared by every container of the node: the ledger (one
// file, of a bounded size) and the pidfds a pass holds (bounded by the open files limit).
// A container whose tasks would take more than its share gets TooManyTasks: the planner
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
	return max(1, min(share, ledgerTaskCapacity(ledgerLimit)))
}

// tooManyTasks is the message of a container past its share. It leaves out how many tasks
// the container has (SkippedTasks and the metrics have it): a message that changed with
// every thread would make every pass a change of the node's results.
func tooManyTasks(share int) string {
	return fmt.Sprintf("the container has more than the %d tasks one container may have placed on this node "+
		"(the agent's --max-tasks-per-container): the ledger and the pidfds the agent keeps per task are shared by "+
		"every container of the node, so this one alone is not placed", share)
}
