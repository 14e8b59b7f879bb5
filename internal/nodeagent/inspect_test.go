package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/numapref/numapref/internal/inspect"
)

// podMap is the agent's pod cache in these tests: the pods it holds, by namespace/name.
func podMap(pods ...*corev1.Pod) PodGetter {
	return func(_ context.Context, ns, name string) (*corev1.Pod, error) {
		for _, p := range pods {
			if p.Namespace == ns && p.Name == name {
				return p.DeepCopy(), nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
}

func getInspect(t *testing.T, h http.Handler, method, path string) (*httptest.ResponseRecorder, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return rec, rec.Body.Bytes()
}

// TestInspectErrors: requests that fail before the host is read (the engine has nothing
// to tell about them).
func TestInspectErrors(t *testing.T) {
	e := newFakeHost(t).engine(EngineConfig{})
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "elsewhere"}, Spec: corev1.PodSpec{NodeName: "node-b"}}
	pods := podMap(elsewhere)
	failing := func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
		if name == "broken" {
			return nil, errors.New("cache not synced")
		}
		return pods(ctx, ns, name)
	}
	h := inspect.NewHandler(NewPodInspector("node-a", failing, e))
	tests := map[string]struct {
		method, path string
		status       int
		errContains  string
	}{
		"unknown pod":         {http.MethodGet, "/inspect/ns/nope", http.StatusNotFound, "not known on node node-a"},
		"pod on another node": {http.MethodGet, "/inspect/ns/elsewhere", http.StatusNotFound, `runs on node "node-b"`},
		"no pod name":         {http.MethodGet, "/inspect/ns", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"empty pod name":      {http.MethodGet, "/inspect/ns/", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"too many parts":      {http.MethodGet, "/inspect/ns/db/main", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"invalid namespace":   {http.MethodGet, "/inspect/Not_A_Namespace/db", http.StatusBadRequest, "namespace"},
		"invalid pod name":    {http.MethodGet, "/inspect/ns/db..x", http.StatusBadRequest, "pod name"},
		"not read-only":       {http.MethodPost, "/inspect/ns/elsewhere", http.StatusMethodNotAllowed, "read-only"},
		"cache failure":       {http.MethodGet, "/inspect/ns/broken", http.StatusInternalServerError, "cache not synced"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec, body := getInspect(t, h, tc.method, tc.path)
			var got inspect.Error
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			if rec.Code != tc.status || got.Status != tc.status || !strings.Contains(got.Error, tc.errContains) {
				t.Errorf("%s %s = %d %+v, want %d with error containing %q", tc.method, tc.path, rec.Code, got, tc.status, tc.errContains)
			}
		})
	}
}
