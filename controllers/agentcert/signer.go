// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// The reasons of the conditions the signer sets on a CSR: CSRReasonAgentNode approves,
// every other one denies (or fails a CSR someone else approved).
const (
	CSRReasonAgentNode      = "NumaprefAgentNode"
	CSRReasonWrongRequester = "WrongRequester"
	CSRReasonNoNodeName     = "NoNodeName"
	CSRReasonUnknownNode    = "UnknownNode"
	CSRReasonSANsNotNodes   = "SANsNotNodes"
	CSRReasonBadRequest     = "BadRequest"
	CSRReasonBadUsages      = "BadUsages"
)

// SignerOptions configure the agents' serving-certificate signer.
type SignerOptions struct {
	// CACertPEM and CAKeyPEM are the signing CA (CASecret.Ensure keeps it).
	CACertPEM, CAKeyPEM []byte
	// AgentNamespace and AgentServiceAccount name the agents' ServiceAccount: the only
	// requester whose CSRs are approved.
	AgentNamespace, AgentServiceAccount string
	// MaxTTL bounds a certificate's lifetime (default 30 days); a CSR's
	// spec.expirationSeconds may shorten it.
	MaxTTL time.Duration
	Clock  clock.PassiveClock
	// Recorder, when set, records an Event on each CSR the signer denies or signs. The
	// signer needs the rights to create events for it.
	Recorder recorder.EventRecorder
}

// AgentCertSigner approves and signs the agents' serving-certificate CSRs
// (AgentServingSigner), and denies those it cannot verify: a requester other than the
// agents' ServiceAccount, no node bound to its token, or names other than that node's.
type AgentCertSigner struct {
	client    client.Client // the CSRs and the Nodes' addresses, from the cache
	reader    client.Reader // a Node the cache does not hold yet, from the API
	ca        *signerCA
	requester string
	opts      SignerOptions
}

var _ reconcile.Reconciler = (*AgentCertSigner)(nil)

// NewAgentCertSigner makes the signer. It writes CSRs through c, reads the Nodes'
// addresses through c's cache (SignerCacheByObject) and a Node the cache does not hold yet
// through reader (a manager's API reader).
func NewAgentCertSigner(c client.Client, reader client.Reader, opts SignerOptions) (*AgentCertSigner, error) {
	if opts.AgentNamespace == "" || opts.AgentServiceAccount == "" {
		return nil, errors.New("the agent signer needs the agents' namespace and service account")
	}
	ca, err := parseSignerCA(opts.CACertPEM, opts.CAKeyPEM)
	if err != nil {
		return nil, err
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = 30 * 24 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	requester := "system:serviceaccount:" + opts.AgentNamespace + ":" + opts.AgentServiceAccount
	return &AgentCertSigner{client: c, reader: reader, ca: ca, requester: requester, opts: opts}, nil
}

// SetupAgentCertSigner registers the signer with mgr, for the CSRs of AgentServingSigner
// that are still to be decided or signed. Give the manager's cache SignerCacheByObject so
// that it holds those CSRs only.
func SetupAgentCertSigner(mgr ctrl.Manager, opts SignerOptions) error {
	r, err := NewAgentCertSigner(mgr.GetClient(), mgr.GetAPIReader(), opts)
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("agentcertsigner").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(predicate.NewPredicateFuncs(pendingAgentCSR))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the agent certificate signer: %w", err)
	}
	return nil
}

// pendingAgentCSR tells whether o is a CSR of AgentServingSigner still to be decided or
// signed.
func pendingAgentCSR(o client.Object) bool {
	csr, ok := o.(*certificatesv1.CertificateSigningRequest)
	return ok && csr.Spec.SignerName == AgentServingSigner && !csrFinished(csr)
}

// SignerCacheByObject scopes a manager's cache of CSRs to AgentServingSigner's (a field
// selector the apiserver supports), instead of every CSR of the cluster, and keeps of each
// Node its name and addresses only (nodeAddresses).
func SignerCacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&certificatesv1.CertificateSigningRequest{}: {Field: fields.OneTermEqualSelector("spec.signerName", AgentServingSigner)},
		&corev1.Node{}: {Transform: nodeAddresses},
	}
}

// maxNodeAddresses bounds the addresses the signer keeps of one Node: a node's status is
// its kubelet's to write, root on it included.
const maxNodeAddresses = 16

// nodeAddresses is what the signer keeps of a Node: its name and its InternalIP and
// ExternalIP addresses, to tell whether another Node reports an address a CSR names.
func nodeAddresses(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
	for _, a := range n.Status.Addresses {
		if (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) && len(out.Status.Addresses) < maxNodeAddresses {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out, nil
}

// The signer's rights: read the CSRs, approve or deny them, write the certificate, for
// this one signer only (AgentServingSigner), and read the Nodes' addresses. make generate
// writes them into the signer's own ClusterRole (config/rbac/signer, the chart's
// files/signer-role.yaml); what it keeps in its namespace (its CA Secret, the CA
// ConfigMap, the scraper's token) is the chart's signer Role, by name. The agents' rights
// to ask are the agent's role's (controllers/agent).
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/status,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,verbs=approve;sign,resourceNames=numapref.io/agent-serving
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile decides one CSR from the CSR and its Node, approves or denies it, and signs
// what it approved. A CSR approved by someone else is signed only if it passes the same
// checks; otherwise it is marked Failed.
func (r *AgentCertSigner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var csr certificatesv1.CertificateSigningRequest
	if err := r.client.Get(ctx, req.NamespacedName, &csr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pendingAgentCSR(&csr) {
		return reconcile.Result{}, nil
	}
	node, err := r.claimedNode(ctx, &csr)
	if err != nil {
		return reconcile.Result{}, err
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the Nodes' addresses: %w", err)
	}
	err = r.act(ctx, &csr, decideCSR(&csr, node, r.requester, addressBookOf(nodes.Items...)))
	if apierrors.IsConflict(err) {
		// Another replica, or this one a moment ago, changed the CSR since the cache
		// showed it: the change's watch event brings it back.
		ctrl.LoggerFrom(ctx).V(2).Info("CSR changed meanwhile", "csr", klog.KObj(&csr), "err", err)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// act does what d decided: deny (or fail) the CSR, or approve it if need be and sign it.
func (r *AgentCertSigner) act(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d csrDecision) error {
	if !d.approved() {
		return r.refuse(ctx, csr, d)
	}
	if !hasCSRCondition(csr, certificatesv1.CertificateApproved) {
		if err := r.approve(ctx, csr, d); err != nil {
			return err
		}
	}
	return r.sign(ctx, csr, d)
}

// claimedNode reads the Node the CSR's requester is bound to, or nil when the requester is
// not the agents' or names no node, or that node does not exist.
func (r *AgentCertSigner) claimedNode(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*corev1.Node, error) {
	name, ok := claimedNodeName(csr)
	if !ok || csr.Spec.Username != r.requester {
		return nil, nil
	}
	var node corev1.Node
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, &node)
	if apierrors.IsNotFound(err) { // a node just joined, before the cache has it
		err = r.reader.Get(ctx, client.ObjectKey{Name: name}, &node)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s of CSR %s: %w", name, csr.Name, err)
	}
	return &node, nil
}

// approve adds the Approved condition, through the approval subresource.
func (r *AgentCertSigner) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d csrDecision) error {
	csr.Status.Conditions = append(csr.Status.Conditions, r.condition(certificatesv1.CertificateApproved, d))
	if err := r.client.SubResource("approval").Update(ctx, csr); err != nil {
		return fmt.Errorf("approving CSR %s: %w", csr.Name, err)
	}
	return nil
}

// refuse denies a CSR through the approval subresource or, when someone else approved it
// already, marks it Failed through the status: the signer never signs what it did not
// verify.
func (r *AgentCertSigner) refuse(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d csrDecision) error {
	if hasCSRCondition(csr, certificatesv1.CertificateApproved) {
		csr.Status.Conditions = append(csr.Status.Conditions, r.condition(certificatesv1.CertificateFailed, d))
		if err := r.client.Status().Update(ctx, csr); err != nil {
			return fmt.Errorf("failing CSR %s: %w", csr.Name, err)
		}
	} else {
		csr.Status.Conditions = append(csr.Status.Conditions, r.condition(certificatesv1.CertificateDenied, d))
		if err := r.client.SubResource("approval").Update(ctx, csr); err != nil {
			return fmt.Errorf("denying CSR %s: %w", csr.Name, err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Refused an agent serving certificate", "csr", klog.KObj(csr), "reason", d.reason, "message", d.message)
	r.event(csr, corev1.EventTypeWarning, d.reason, "Deny", d.message)
	return nil
}

// sign issues the certificate of an approved CSR into its status.
func (r *AgentCertSigner) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d csrDecision) error {
	certPEM, err := r.ca.issue(d.request, r.opts.Clock.Now(), certLifetime(csr.Spec.ExpirationSeconds, r.opts.MaxTTL))
	if err != nil {
		return fmt.Errorf("signing CSR %s: %w", csr.Name, err)
	}
	csr.Status.Certificate = certPEM
	if err := r.client.Status().Update(ctx, csr); err != nil {
		return fmt.Errorf("writing the certificate of CSR %s: %w", csr.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Signed an agent serving certificate", "csr", klog.KObj(csr), "node", d.request.Subject.CommonName)
	r.event(csr, corev1.EventTypeNormal, "Issued", "Sign", d.message)
	return nil
}

// certLifetime is how long a certificate lasts: the CSR's spec.expirationSeconds, when
// set, up to maxTTL.
func certLifetime(expirationSeconds *int32, maxTTL time.Duration) time.Duration {
	if expirationSeconds != nil && *expirationSeconds > 0 && time.Duration(*expirationSeconds)*time.Second < maxTTL {
		return time.Duration(*expirationSeconds) * time.Second
	}
	return maxTTL
}

func (r *AgentCertSigner) condition(t certificatesv1.RequestConditionType, d csrDecision) certificatesv1.CertificateSigningRequestCondition {
	now := metav1.NewTime(r.opts.Clock.Now())
	return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue,
		Reason: d.reason, Message: d.message, LastUpdateTime: now, LastTransitionTime: now}
}

func (r *AgentCertSigner) event(csr *certificatesv1.CertificateSigningRequest, kind, reason, action, msg string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(csr, nil, kind, reason, action, "%s", msg)
	}
}

// csrFinished tells whether nothing is left to do on a CSR: it was signed, denied or failed.
func csrFinished(csr *certificatesv1.CertificateSigningRequest) bool {
	return len(csr.Status.Certificate) > 0 ||
		hasCSRCondition(csr, certificatesv1.CertificateDenied) || hasCSRCondition(csr, certificatesv1.CertificateFailed)
}

func hasCSRCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}
