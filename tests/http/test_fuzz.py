"""The short fuzz run CI makes: schemathesis over the main kinds' operations, seeded.

benchmarks/fuzz_http.py is the full run (every operation, every phase, more examples);
this one keeps to the fuzzing phase and a few examples per operation so that it takes
well under a minute, and asserts what the full run reports: no answer is a 5xx, and every
4xx is a Kubernetes Status.
"""

from __future__ import annotations

import json

from benchmarks import fuzz_http
from tests.http.conftest import TOKEN

MAX_EXAMPLES = 10
SEED = 1


def _findings(records: list[dict]) -> str:
    return "\n".join(
        f"{fuzz_http._curl(r)} -> {r['status']} {r.get('problem', '')} {r['response'][:300]}"
        for r in records
    )


async def test_fuzz_main_operations(cluster, tmp_path):
    report = await fuzz_http.fuzz(
        fuzz_http.Target(cluster.url, cluster.ca_cert, TOKEN),
        tmp_path,
        max_examples=MAX_EXAMPLES,
        seed=SEED,
        resources=fuzz_http.MAIN_RESOURCES,
        phases="fuzzing",
    )
    summary = json.dumps({k: report[k] for k in ("requests", "operations", "statuses")})
    # Every operation of the five kinds answered, and most requests got past the parsing
    # of parameters and bodies to validation or further.
    assert report["operations"] >= 40, summary
    assert report["server_errors"] == 0, _findings(report["first_server_errors"])
    assert report["bad_client_errors"] == 0, _findings(report["first_bad_client_errors"])
