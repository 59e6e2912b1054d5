"""`drasim loadtest`: clusterloader2's DRA steady-state test (kubernetes/perf-tests
`clusterloader2/testing/dra/`) against a drasim cluster, with its SLIs measured as
clusterloader2 measures them.

The package, one concern per module:
- `workload`: the cluster file, namespaces, ResourceClaimTemplate and Jobs of the test;
- `runner`: one run's phases (fill, churn, drain) and its progress lines;
- `measure`: the watches' measurements (pod start-up, claim allocation, Jobs, devices);
- `scrape`: the services' histograms over a phase (API calls, scheduling, DRA prepare);
- `slis`: the percentile and threshold arithmetic, as clusterloader2's;
- `results`: the results document and table;
- `command`: the `drasim loadtest` command line and the cluster it starts or finds.
"""

from drasim.cli.loadtest.command import add_parser, run

__all__ = ["add_parser", "run"]
