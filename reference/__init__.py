"""Upstream beside us: Kubernetes' own control plane as drasim's oracle (issue 21).

`reference/build` builds kube-apiserver, kube-scheduler, kube-controller-manager, kubectl,
etcd and kwok from the Go module proxy into a cache outside the repository (`paths`);
`reference/up` runs them with the nodes and ResourceSlices of a drasim cluster file
(`cluster`, `nodes`); `reference/compare` runs the differential scenarios (`scenarios`)
on drasim and upstream and compares what a user sees (`normalize`, `diff`);
`reference/perf_compare` runs upstream's scheduler_perf beside `drasim bench`
(`perf_compare`, built by `reference/build --perf` from `perf/`). Not part of drasim:
nothing under `drasim.*` imports this package.
"""
