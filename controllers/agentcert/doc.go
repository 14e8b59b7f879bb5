// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package agentcert is the one home of the agents' serving certificates: each agent asks
// for a certificate that names its own node (NodeCertificate, in the agent's process), and the
// signer approves and signs it only for the agent bound to that node (AgentCertSigner, in
// the signer's own process, `numapref signer`). Both go by the signer's name,
// AgentServingSigner.
//
//	doc.go      the signer's name
//	nodecert.go NodeCertificate: the requester, which obtains and renews its node's certificate
//	signer.go   AgentCertSigner: the reconciler that approves, denies and signs, and its RBAC
//	decide.go   what the signer decides of a CSR, from the CSR, its Node and every Node's addresses (decideCSR)
//	ca.go       the signer's CA: loading and checking it, issuing a certificate
//	cakeeper.go CASecret: the CA made once and kept in a Secret only the signer reads; CAPublisher: the CA ConfigMap
//	scrapertoken.go ScraperToken: Prometheus' expiring token, bound to the agents' audience
package agentcert

// AgentServingSigner is the signerName of the CSRs by which each node's agent asks for a
// serving certificate naming its node (NodeCertificate). The signer approves and signs
// them (AgentCertSigner); nothing else should.
const AgentServingSigner = "numapref.io/agent-serving"
