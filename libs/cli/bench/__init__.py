"""`drasim bench`: upstream scheduler_perf workloads against the apistore and the scheduler.

drasim bench ExtendedResource/fast
drasim bench ExtendedResource_25Classes/5000pods_500nodes --json result.json
drasim bench --list

The workloads live in `benchmarks/scheduler_perf/performance-config.yaml` in upstream's
shape (ops with `countParam`s, object templates with `{{.Index}}`). A run starts embedded
NATS and Postgres (or uses `--nats-url` / `--database-url`, with a fresh database and
subject prefix), then the apistore and the scheduler as their own processes, as in a real
cluster, and the controller manager too when the workload creates ResourceClaimTemplates.
Nodes, ResourceSlices and DeviceClasses are created directly through the API (no kubelets,
no drivers). Then the init pods are created and all bound, then the measured pods.

What is reported, as scheduler_perf does it:
- SchedulingThroughput: a one-second ticker counts the measured pods seen bound (through a
  pod watch); the first sample only sets the baseline, an interval with no new binding is
  merged into the next one, and the last, partial interval is dropped. Average and the
  50/90/99th percentiles (`ceil(n*q/100)`-th smallest) of those samples. A workload that
  binds everything within the first second or two has no samples (upstream: "Failed to
  measure"); `throughput_overall` (measured pods over first create → last binding) is
  given for every workload.
- attempts: the scheduler records each attempt as an Event on the pod, `Scheduled` when it
  bound the pod and `FailedScheduling` when the attempt failed (kube-scheduler's
  `scheduler_schedule_attempts_total` counts the same outcomes). An attempt that repeats
  the last one's message raises the `count` of that Event (client-go's event aggregation)
  instead of adding one, so the bench watches Events and counts, per Event, how much its
  `count` grew: an Event first seen counts its whole `count`.

At the end it checks, over every ResourceClaim in the cluster, that no device is allocated
twice, and that every measured pod is bound; either failing makes the exit code 1.

The package, one concern per module:
- `workloads`: upstream's performance-config (tests, workloads, ops, params, thresholds);
- `templates`: object templates rendered per index, and the ResourceSlice of a driver;
- `runner`: one run: its services, its ops, the checks at the end;
- `collectors`: the pod and Event watches, throughput samples and percentiles;
- `objects`: creating and listing objects as raw JSON; `views`: the fields the bench reads;
- `report`: the `Result`, its summary line and table;
- `command`: the `drasim bench` command line.
"""

from drasim.cli.bench.command import add_parser, run

__all__ = ["add_parser", "run"]
