package main

// The summarizer's rights as the signer of the agents' serving certificates
// (controllers.AgentCertSigner, signer numapref.io/agent-serving): read the CSRs, approve
// or deny them, write the certificate, for this one signer only, and read the Node a CSR
// names. They are the summarizer's role's, not the agents': markers under controllers/
// go into the agents' role.

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/status,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,verbs=approve;sign,resourceNames=numapref.io/agent-serving
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
