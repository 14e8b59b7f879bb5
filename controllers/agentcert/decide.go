// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/inspect"
)

// nodeNameExtra is the user-info extra in which the apiserver names the node of a service
// account token bound to a pod with spec.nodeName (the agent's projected token is one).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// csrDecision is what the signer does with a CSR: approve it (reason CSRReasonAgentNode,
// with its parsed request) or refuse it for reason, saying why in message.
type csrDecision struct {
	reason, message string
	request         *x509.CertificateRequest // set when approved
}

func (d csrDecision) approved() bool { return d.reason == CSRReasonAgentNode }

func denyCSR(reason, format string, args ...any) csrDecision {
	return csrDecision{reason: reason, message: fmt.Sprintf(format, args...)}
}

// addressBook names, for each address any Node reports (InternalIP or ExternalIP), the
// Nodes that report it.
type addressBook map[string][]string

// addressBookOf is the address book of nodes.
func addressBookOf(nodes ...corev1.Node) addressBook {
	book := addressBook{}
	for i := range nodes {
		for _, ip := range inspect.NodeIPs(&nodes[i]) {
			book[ip.String()] = append(book[ip.String()], nodes[i].Name)
		}
	}
	return book
}

// decideCSR decides a CSR of AgentServingSigner from the CSR, the Node its requester's
// token is bound to (nil when that node does not exist) and the addresses every Node
// reports: approve only a request by requester (the agents' ServiceAccount) whose names
// are that node's, for serving.
func decideCSR(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node, requester string, book addressBook) csrDecision {
	if csr.Spec.Username != requester {
		return denyCSR(CSRReasonWrongRequester, "requested by %q, not by the agents' service account %q", csr.Spec.Username, requester)
	}
	name, ok := claimedNodeName(csr)
	if !ok {
		return denyCSR(CSRReasonNoNodeName, "the requester's token names %d nodes (extra %s), not one: it is not bound to a pod on a node",
			len(csr.Spec.Extra[nodeNameExtra]), nodeNameExtra)
	}
	if node == nil || node.Name != name {
		return denyCSR(CSRReasonUnknownNode, "node %q of the requester's token does not exist", name)
	}
	if msg := checkServingUsages(csr.Spec.Usages); msg != "" {
		return denyCSR(CSRReasonBadUsages, "%s", msg)
	}
	req, err := parseServingRequest(csr.Spec.Request)
	if err != nil {
		return denyCSR(CSRReasonBadRequest, "%v", err)
	}
	if err := checkNodeNames(req, node, book); err != nil {
		return denyCSR(CSRReasonSANsNotNodes, "%v", err)
	}
	return csrDecision{reason: CSRReasonAgentNode, request: req,
		message: fmt.Sprintf("serving certificate of the numapref agent of node %s", name)}
}

// claimedNodeName is the one node the CSR requester's token is bound to.
func claimedNodeName(csr *certificatesv1.CertificateSigningRequest) (string, bool) {
	names := csr.Spec.Extra[nodeNameExtra]
	if len(names) != 1 || names[0] == "" {
		return "", false
	}
	return names[0], true
}

// servingUsages are the key usages a serving certificate may ask for.
var servingUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
}

// checkServingUsages says what is wrong with usages, or "": they must include server auth
// and hold nothing but servingUsages.
func checkServingUsages(usages []certificatesv1.KeyUsage) string {
	for _, u := range usages {
		if !slices.Contains(servingUsages, u) {
			return fmt.Sprintf("usage %q is not one of a serving certificate's %q", u, servingUsages)
		}
	}
	if !slices.Contains(usages, certificatesv1.UsageServerAuth) {
		return fmt.Sprintf("usages %q lack %q", usages, certificatesv1.UsageServerAuth)
	}
	return ""
}

// parseServingRequest parses a PEM certificate request, checks its signature and its key:
// ECDSA P-256 or P-384, or RSA of 2048 bits or more.
func parseServingRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New(`the request is not a PEM "CERTIFICATE REQUEST"`)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("checking the request's signature: %w", err)
	}
	switch key := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if key.Curve != elliptic.P256() && key.Curve != elliptic.P384() {
			return nil, fmt.Errorf("ECDSA key on curve %s, not P-256 or P-384", key.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if key.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits, fewer than 2048", key.N.BitLen())
		}
	default:
		return nil, fmt.Errorf("%T key, not ECDSA or RSA", req.PublicKey)
	}
	return req, nil
}

// checkNodeNames checks that a request names node and nothing else: common name and DNS
// names the node's name, IP addresses (at least one) among the InternalIP addresses its
// kubelet reports and reported by no other Node (book), no URI or email.
//
// A node's own status proves little: root on the node holds its kubelet's credentials,
// which may write that status. What it cannot write is another Node's status, so an
// address another Node reports (its kubelet's, or the cloud controller's) is never signed
// for this one: root on one node cannot get a certificate for the address of another.
func checkNodeNames(req *x509.CertificateRequest, node *corev1.Node, book addressBook) error {
	if req.Subject.CommonName != node.Name {
		return fmt.Errorf("common name %q is not node %q", req.Subject.CommonName, node.Name)
	}
	for _, n := range req.DNSNames {
		if n != node.Name {
			return fmt.Errorf("DNS name %q is not node %q", n, node.Name)
		}
	}
	if len(req.URIs) > 0 {
		return fmt.Errorf("URI names %v: a node has none", req.URIs)
	}
	if len(req.EmailAddresses) > 0 {
		return fmt.Errorf("email names %v: a node has none", req.EmailAddresses)
	}
	if len(req.IPAddresses) == 0 {
		return fmt.Errorf("no IP address: node %q is dialled by its IP", node.Name)
	}
	ips := inspect.NodeInternalIPs(node)
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Errorf("IP address %s is not one of node %q's InternalIP addresses %v", ip, node.Name, ips)
		}
		if others := slices.DeleteFunc(slices.Clone(book[ip.String()]), func(n string) bool { return n == node.Name }); len(others) > 0 {
			return fmt.Errorf("IP address %s of node %q is also reported by Node %s", ip, node.Name, strings.Join(others, ", "))
		}
	}
	return nil
}
