// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package desire

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// The names spec.devices takes, as its markers check them: the annotations that stand for
// it are checked alike.
var (
	resourceNamePattern    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	deviceClassNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// deviceFilterAnnotations is the filter the pod's follow annotations name for the
// containers its annotations place in FollowDevices: every device when it has neither,
// an error for a list that spec.devices would refuse.
func deviceFilterAnnotations(pod *corev1.Pod) (DeviceFilter, error) {
	resources, err := nameList(pod, numav1.AnnotationFollowResourceNames, resourceNamePattern, numav1.MaxResourceNameLength, "a resource name (example.com/gpu)")
	if err != nil {
		return DeviceFilter{}, err
	}
	classes, err := nameList(pod, numav1.AnnotationFollowDeviceClassNames, deviceClassNamePattern, numav1.MaxDeviceClassNameLength, "a device class name (gpu.example.com)")
	if err != nil {
		return DeviceFilter{}, err
	}
	return NewDeviceFilter(resources, classes), nil
}

// nameList parses the comma-separated names of annotation key: at most
// MaxFollowedNames, each matching pattern and at most max long.
func nameList(pod *corev1.Pod, key string, pattern *regexp.Regexp, maxLen int, what string) ([]string, error) {
	v, ok := pod.Annotations[key]
	if !ok {
		return nil, nil
	}
	// Counted before it is split: a value of 256 KiB of commas splits into no slice.
	if n := strings.Count(v, ",") + 1; n > numav1.MaxFollowedNames {
		return nil, fmt.Errorf("annotation %s: %d names, more than %d", key, n, numav1.MaxFollowedNames)
	}
	parts := strings.Split(v, ",")
	names := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if len(p) > maxLen || !pattern.MatchString(p) {
			return nil, fmt.Errorf("annotation %s: %s is not %s", key, quoteBounded(p), what)
		}
		names = append(names, p)
	}
	return names, nil
}
