// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	tests := map[string]struct {
		path, ns, name string
		err            string
	}{
		"pod":                 {path: "/inspect/shop/db-0", ns: "shop", name: "db-0"},
		"dotted pod name":     {path: "/inspect/shop/db.0", ns: "shop", name: "db.0"},
		"other prefix":        {path: "/metrics/shop/db-0", err: "want /inspect/"},
		"namespace only":      {path: "/inspect/shop", err: "want /inspect/"},
		"trailing slash":      {path: "/inspect/shop/db-0/", err: "want /inspect/"},
		"empty namespace":     {path: "/inspect//db-0", err: "want /inspect/"},
		"upper-case":          {path: "/inspect/Shop/db-0", err: `namespace "Shop"`},
		"dotted namespace":    {path: "/inspect/a.b/db-0", err: `namespace "a.b"`},
		"pod name with space": {path: "/inspect/shop/db 0", err: `pod name "db 0"`},
		"too long pod name":   {path: "/inspect/shop/" + strings.Repeat("a", 254), err: "pod name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns, pod, err := ParsePath(tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParsePath(%q) = %q, %q, %v; want an error containing %q", tc.path, ns, pod, err, tc.err)
				}
				return
			}
			if err != nil || ns != tc.ns || pod != tc.name {
				t.Errorf("ParsePath(%q) = %q, %q, %v; want %q, %q", tc.path, ns, pod, err, tc.ns, tc.name)
			}
		})
	}
}

type describerFunc func(ctx context.Context, ns, name string) (*Pod, error)

func (f describerFunc) Describe(ctx context.Context, ns, name string) (*Pod, error) {
	return f(ctx, ns, name)
}

// TestHandlerOnlyReads checks that no method but GET and HEAD reaches the describer, and
// that errors keep their status.
func TestHandlerOnlyReads(t *testing.T) {
	called := 0
	h := NewHandler(describerFunc(func(_ context.Context, ns, name string) (*Pod, error) {
		called++
		if name == "missing" {
			return nil, errors.Join(errors.New("not here"), ErrNotFound)
		}
		return &Pod{APIVersion: APIVersion, Kind: Kind, Namespace: ns, Name: name}, nil
	}), namespaces{"shop"})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/inspect/shop/db-0", nil))
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: status %d, Allow %q; want 405 with GET, HEAD", m, rec.Code, rec.Header().Get("Allow"))
		}
	}
	if called != 0 {
		t.Fatalf("the describer ran %d times for writes", called)
	}
	for path, want := range map[string]int{"/inspect/shop/db-0": http.StatusOK, "/inspect/shop/missing": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: status %d, want %d", path, rec.Code, want)
		}
		var body struct {
			APIVersion string `json:"apiVersion"`
			Status     int    `json:"status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if want == http.StatusOK && body.APIVersion != APIVersion || want != http.StatusOK && body.Status != want {
			t.Errorf("GET %s: body %s", path, rec.Body)
		}
	}
}

// namespaces allows get on the pods of the listed namespaces.
type namespaces []string

func (n namespaces) CanGetPod(_ context.Context, ns, _ string) (bool, string, error) {
	if ns == "broken" {
		return false, "", errors.New("the API server is away")
	}
	return slices.Contains(n, ns), "user u may not get pods in namespace " + ns, nil
}

// TestHandlerAuthorizesPerNamespace: the pod's namespace decides, before the pod is looked
// up, so a refused caller learns nothing of it, not even whether it exists.
func TestHandlerAuthorizesPerNamespace(t *testing.T) {
	var described []string
	h := NewHandler(describerFunc(func(_ context.Context, ns, name string) (*Pod, error) {
		described = append(described, ns+"/"+name)
		return &Pod{APIVersion: APIVersion, Kind: Kind, Namespace: ns, Name: name}, nil
	}), namespaces{"a"})
	tests := map[string]struct {
		path   string
		status int
		error  string
	}{
		"readable namespace":  {"/inspect/a/db-0", http.StatusOK, ""},
		"other namespace":     {"/inspect/b/db-0", http.StatusForbidden, "may not get pods in namespace b"},
		"kube-system":         {"/inspect/kube-system/etcd", http.StatusForbidden, "namespace kube-system"},
		"review unavailable":  {"/inspect/broken/db-0", http.StatusServiceUnavailable, "the API server is away"},
		"malformed, no check": {"/inspect/b", http.StatusBadRequest, "want /inspect/"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			var e Error
			_ = json.Unmarshal(rec.Body.Bytes(), &e) // a body that is no Error shows in the comparison below
			if rec.Code != tc.status || !strings.Contains(e.Error, tc.error) {
				t.Errorf("GET %s: %d %s; want %d with %q", tc.path, rec.Code, rec.Body, tc.status, tc.error)
			}
		})
	}
	if !slices.Equal(described, []string{"a/db-0"}) {
		t.Errorf("described %v; want only the pod of the readable namespace", described)
	}
}

// The cpuset's wire form is cpuset.Cpuset's JSON: a change of its fields or tags would
// change the inspect schema, which only ever gains fields.
func TestCpusetSchema(t *testing.T) {
	data, err := json.Marshal(Cpuset{Mems: []int{0, 1}, CPUs: []int{2}, Dir: "/d", ControllerMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"mems":[0,1],"cpus":[2],"dir":"/d","controllerMissing":true}`; string(data) != want {
		t.Errorf("cpuset JSON = %s, want %s", data, want)
	}
}
