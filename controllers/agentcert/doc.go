// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agentcert is the one home of the agents' serving certificates: each agent asks
// for a certificate that names its own node (NodeCertificate, in the agent's process), and
// the elected summarizer approves and signs it only for the agent bound to that node
// (AgentCertSigner, in the summarizer's process). Both go by the signer's name,
// AgentServingSigner.
//
//	doc.go      the signer's name
//	nodecert.go NodeCertificate: the requester, which obtains and renews its node's certificate
//	signer.go   AgentCertSigner: the reconciler that approves, denies and signs, and its RBAC
//	decide.go   what the signer decides of a CSR, from the CSR and its Node (decideCSR)
//	ca.go       the signer's CA: loading and checking it, issuing a certificate
package agentcert

// AgentServingSigner is the signerName of the CSRs by which each node's agent asks for a
// serving certificate naming its node (NodeCertificate). The summarizer approves and signs
// them (AgentCertSigner); nothing else should.
const AgentServingSigner = "numapref.io/agent-serving"
