// Package controllers is the parent of the controllers, which are in one package per
// process: controllers/agent is the node agent DaemonSet's, controllers/summarizer the
// summarizer Deployment's, and controllers/agentcert the agents' serving certificates,
// which the agent asks for and the summarizer signs. controllers/internal holds the little
// the two processes share.
//
// SetupDrain and DrainOptions are the agent's, named here too: cmd/numapref's state-dir
// code calls them by these names.
package controllers

import "github.com/numapref/numapref/controllers/agent"

// SetupDrain is agent.SetupDrain.
var SetupDrain = agent.SetupDrain

// DrainOptions is agent.DrainOptions.
type DrainOptions = agent.DrainOptions
