// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import "strings"

// ChartValues are the chart's values (key=value, for helm --set) that a local node needs,
// beyond the image: no kube-proxy, so the agent (host network) reaches the API server at
// 127.0.0.1, and so does the summarizer, on the host network too (one replica: two on one
// node would want the same health port); every listener of the agent stays on 127.0.0.1.
func ChartValues() []string {
	repo, tag, _ := strings.Cut(AgentImage, ":")
	return []string{"image.repository=" + repo, "image.tag=" + tag, "image.pullPolicy=Never",
		"apiServer.host=127.0.0.1", "apiServer.port=6443", "bindAddress=127.0.0.1",
		"summarizer.hostNetwork=true", "summarizer.replicas=1"}
}
