// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controllers is the parent of the controllers, which are in one package per
// process: controllers/agent is the node agent DaemonSet's, controllers/summarizer the
// summarizer Deployment's, and controllers/agentcert the agents' serving certificates,
// which the agent asks for and the summarizer signs. controllers/internal holds the little
// the two processes share.
package controllers
