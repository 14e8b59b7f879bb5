// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package known is what the agent knows it set: the ledger's data, without its files. A
// Container is one container the agent acted on and its Tasks, each with the value it had
// before (Prev) and the values the agent may have left in the kernel (Values); Containers
// maps every such container by its key.
//
// It is a package of its own so that planning can read what the ledger holds without
// being able to write it: package ledger owns the Containers and their files, and hands
// planning a View, which answers questions and returns copies. Nothing here does I/O.
package known
