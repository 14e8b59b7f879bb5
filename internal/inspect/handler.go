// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// PathPrefix is where the handler is mounted; a request names <namespace>/<pod> after it.
const PathPrefix = "/inspect/"

// ErrNotFound means the pod is not known on this node: it does not exist, runs on
// another node, or is not scheduled yet.
var ErrNotFound = errors.New("pod not found on this node")

// Describer describes one pod of this node. It must only read.
type Describer interface {
	Describe(ctx context.Context, namespace, name string) (*Pod, error)
}

// PodAuthorizer decides whether the caller of a request (in ctx) may read a pod; reason
// says why not. An error means the decision could not be made.
type PodAuthorizer interface {
	CanGetPod(ctx context.Context, namespace, name string) (allowed bool, reason string, err error)
}

// NewHandler serves GET <PathPrefix><namespace>/<pod> with d's description as JSON, to a
// caller whom a allows to get that pod (a SubjectAccessReview in the pod's namespace), so
// a user sees the pods of the namespaces they may read, not every pod of the node. The
// check comes before the pod is looked up: a refused caller does not learn whether the
// pod exists. It never changes anything: it answers GET (and HEAD) only, and d only reads.
func NewHandler(d Describer, a PodAuthorizer) http.Handler {
	if d == nil || a == nil {
		panic("inspect.NewHandler: a Describer and a PodAuthorizer are required")
	}
	return &handler{d: d, a: a}
}

type handler struct {
	d Describer
	a PodAuthorizer
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: the inspect endpoint is read-only", req.Method))
		return
	}
	ns, name, err := ParsePath(req.URL.Path)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	allowed, reason, err := h.a.CanGetPod(req.Context(), ns, name)
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "checking access to the pod: "+err.Error())
		return
	case !allowed:
		writeError(w, http.StatusForbidden, fmt.Sprintf("forbidden: %s (inspecting a pod needs get on it)", reason))
		return
	}
	pod, err := h.d.Describe(req.Context(), ns, name)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, pod)
}

// ParsePath splits <PathPrefix><namespace>/<pod> and validates both names as the API
// server would (a namespace is a DNS-1123 label, a pod name a DNS-1123 subdomain).
func ParsePath(path string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return "", "", fmt.Errorf("path %q: want %s<namespace>/<pod>", path, PathPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", fmt.Errorf("path %q: want %s<namespace>/<pod>", path, PathPrefix)
	}
	if errs := validation.IsDNS1123Label(parts[0]); len(errs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", parts[0], strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(parts[1]); len(errs) > 0 {
		return "", "", fmt.Errorf("pod name %q: %s", parts[1], strings.Join(errs, "; "))
	}
	return parts[0], parts[1], nil
}

// Path returns the endpoint path of a pod.
func Path(namespace, name string) string { return PathPrefix + namespace + "/" + name }

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, Error{Status: status, Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(Error{Status: status, Error: "encoding the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n')) // the status is sent: a client gone now cannot be told
}
