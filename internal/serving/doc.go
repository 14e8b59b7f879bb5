// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package serving is the node agent's HTTPS server: /metrics for scrapers and /inspect
// for kubectl numapref, on one port (8443 in the chart).
//
// It replaces controller-runtime's metrics server, which cannot be given HTTP timeouts
// nor told which token audiences a path accepts, and which falls back silently to a
// self-signed certificate when the one it was given is missing. Here:
//
//   - TLS: the certificate is tls.crt/tls.key in Options.CertDir, re-read when the files
//     change (controller-runtime's certwatcher: inotify, and a poll every 10 s), so a
//     Secret volume rotated by cert-manager or helm upgrade is served without a restart. A
//     missing or broken file fails the start; only an empty CertDir means a self-signed
//     certificate made at start, which no client can verify. HTTP/1.1 only, TLS 1.2+.
//   - Limits: header, read, write and idle timeouts, header and body sizes, a deadline on
//     every request and a bound on requests in flight (Limits), checked before any
//     TokenReview is spent on a request.
//   - Authentication: the bearer token is first checked locally (TokenPolicy: a JWT of a
//     signing algorithm of the API server, current, for the audience and of the cluster's
//     issuer, signed with one of the issuer's public keys, which the API server publishes
//     and KeySet keeps), so junk and forgeries cost no review. Then it is reviewed by the
//     API server (TokenReview) for the audiences the route accepts (Route.Audiences):
//     spec.audiences is set, and the answer counts only when status.audiences holds the
//     audience asked for. The review tells what no signature can: a revoked token, one of
//     a deleted pod or service account.
//   - Authorization: a SubjectAccessReview of the non-resource URL (verb: the method in
//     lower case), then whatever the handler checks itself with Access (the inspect
//     handler: get on the pod).
//
// Review answers are cached for a short while (CacheTTLs), keyed by a hash of the token, in
// bounded LRUs that keep positive and negative answers apart. A review the caches cannot
// answer takes a token from its client's bucket (ReviewRate, per source IP): past it, 429.
package serving
