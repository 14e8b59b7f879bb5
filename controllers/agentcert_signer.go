package controllers

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
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

	"github.com/numapref/numapref/internal/inspect"
)

// AgentServingSigner is the signerName of the agents' node certificates (inspect's).
const AgentServingSigner = inspect.AgentServingSigner

// nodeNameExtra is the user-info extra in which the apiserver names the node of a service
// account token bound to a pod with spec.nodeName (the agent's projected token is one).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

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
	// CACertPEM and CAKeyPEM are the signing CA (LoadSignerCA reads them).
	CACertPEM, CAKeyPEM []byte
	// AgentNamespace and AgentServiceAccount name the agents' ServiceAccount: the only
	// requester whose CSRs are approved.
	AgentNamespace, AgentServiceAccount string
	// MaxTTL bounds a certificate's lifetime (default 30 days); a CSR's
	// spec.expirationSeconds may shorten it.
	MaxTTL time.Duration
	Clock  clock.PassiveClock
	// Recorder, when set, records an Event on each CSR the signer denies or signs. The
	// summarizer needs the rights to create events for it.
	Recorder recorder.EventRecorder
}

// AgentCertSigner approves and signs the agents' serving-certificate CSRs
// (AgentServingSigner), and denies those it cannot verify: a requester other than the
// agents' ServiceAccount, no node bound to its token, or names other than that node's.
type AgentCertSigner struct {
	client    client.Client
	reader    client.Reader // Nodes, read from the API: the signer caches none
	ca        *signerCA
	requester string
	opts      SignerOptions
}

var _ reconcile.Reconciler = (*AgentCertSigner)(nil)

// NewAgentCertSigner makes the signer. It writes CSRs through c and reads Nodes through
// reader (a manager's API reader: the signer needs a few Nodes, rarely).
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
// selector the apiserver supports), instead of every CSR of the cluster.
func SignerCacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&certificatesv1.CertificateSigningRequest{}: {Field: fields.OneTermEqualSelector("spec.signerName", AgentServingSigner)},
	}
}

// The signer's RBAC markers are in cmd/numapref/signer_rbac.go: they belong to the
// summarizer's role, and every marker under controllers/ goes into the agents' role.

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
	err = r.act(ctx, &csr, decideCSR(&csr, node, r.requester))
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
	err := r.reader.Get(ctx, client.ObjectKey{Name: name}, &node)
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

// decideCSR decides a CSR of AgentServingSigner from the CSR and the Node its requester's
// token is bound to (nil when that node does not exist): approve only a request by
// requester (the agents' ServiceAccount) whose names are that node's, for serving.
func decideCSR(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node, requester string) csrDecision {
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
	if err := checkNodeNames(req, node); err != nil {
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
// names the node's name, IP addresses (at least one) among its addresses, no URI or email.
func checkNodeNames(req *x509.CertificateRequest, node *corev1.Node) error {
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
	ips := inspect.NodeIPs(node)
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Errorf("IP address %s is not one of node %q's %v", ip, node.Name, ips)
		}
	}
	return nil
}

// signerCA is the signer's CA certificate and key.
type signerCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// LoadSignerCA reads the signer's CA from dir: tls.crt and tls.key, as a kubernetes.io/tls
// Secret mounts them. It checks that the certificate is a CA and matches the key.
func LoadSignerCA(dir string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(filepath.Join(dir, "tls.crt")); err != nil {
		return nil, nil, fmt.Errorf("reading the signer's CA certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(filepath.Join(dir, "tls.key")); err != nil {
		return nil, nil, fmt.Errorf("reading the signer's CA key: %w", err)
	}
	if _, err := parseSignerCA(certPEM, keyPEM); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	return certPEM, keyPEM, nil
}

// parseSignerCA parses a CA certificate and its key, and checks that they match and that
// the certificate may sign certificates.
func parseSignerCA(certPEM, keyPEM []byte) (*signerCA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the signer's CA: %w", err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parsing the signer's CA certificate: %w", err)
		}
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("the signer's certificate %q is not a CA", cert.Subject)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("the signer's CA %q may not sign certificates (key usage)", cert.Subject)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the signer's CA key is a %T, which cannot sign", pair.PrivateKey)
	}
	return &signerCA{cert: cert, key: key}, nil
}

// issue signs a serving certificate for req, valid from 5 minutes before now (clock skew)
// for ttl, but never past the CA's own end. Of the request it takes the public key, the
// common name, the DNS names and IP addresses: checked already, they are the node's.
func (ca *signerCA) issue(req *x509.CertificateRequest, now time.Time, ttl time.Duration) ([]byte, error) {
	notAfter := now.Add(ttl)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("the signer's CA expired at %s", ca.cert.NotAfter)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := req.PublicKey.(*rsa.PublicKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: req.Subject.CommonName},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: notAfter,
		KeyUsage: usage, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("creating the certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
