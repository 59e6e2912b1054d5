// Package perf only anchors the module: reference/build --perf compiles the test binaries
// of k8s.io/kubernetes/test/integration/scheduler_perf from it (go test -c).
package perf

import _ "k8s.io/kubernetes/test/integration/scheduler_perf"
