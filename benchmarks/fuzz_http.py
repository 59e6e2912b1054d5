"""Fuzz run of the HTTP API from its own OpenAPI v3 documents, with schemathesis.

    python benchmarks/fuzz_http.py [--max-examples 50] [--seed 1] [--resources pods,nodes]
                                   [--workers 1] [--json benchmarks/results/fuzz.json]

Starts embedded NATS and Postgres and an apistore with its HTTP API (HTTPS, bearer token)
in this process, creates one object of each kind (named `fuzz`, namespaced ones in
`default`) for requests to aim at, fetches `/openapi/v3` and every group-version document
it lists, and runs `st run` (schemathesis' CLI, every phase: examples, coverage, fuzzing,
stateful; valid and invalid data) against them, `--max-examples` per operation, seeded.
Every request is logged by benchmarks/fuzz_hooks.py and judged here:

- `server_errors`: answers 5xx, with the first few (method, path, body, answer);
- `slow`: answers that took longer than 1 s;
- `bad_client_errors`: 4xx answers that are no Kubernetes `Status` (JSON, `kind: Status`,
  the HTTP code as `code`, a `reason`), which clients need to tell what went wrong.

The served documents describe no request bodies (upstream's do), so the run adds them from
each operation's kind: the object for POST/PUT (as JSON or YAML), the four patch types for
PATCH (JSON patch as a list of operations), DeleteOptions for DELETE. `watch` is left out:
a watch is a long-running request by design (tests/http/test_watch.py covers it); so is
deleting the collection of namespaces, which would leave nowhere to create objects.

Exits 1 if the run found a 5xx, a slow request or a bad 4xx. CI runs a short version
(tests/http/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from drasim.apistore.server import ApiServer
from drasim.cli import kubeconfig, launch

HERE = Path(__file__).resolve().parent
HOOKS = HERE / "fuzz_hooks.py"
TOKEN = "fuzz-token"
SLOW_S = 1.0
NAMESPACE = "default"
NAME = "fuzz"
# What CI fuzzes: the kinds KEP-5004's path goes through.
MAIN_RESOURCES = ("pods", "deviceclasses", "resourceclaims", "nodes", "deployments")
# Findings kept in full in the report, per kind of finding.
FIRST = 5

_REF = "#/components/schemas/"
_META = {"$ref": f"{_REF}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
_ANY: dict[str, Any] = {}
_DELETE_OPTIONS = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["DeleteOptions"]},
        "apiVersion": {"type": "string"},
        "gracePeriodSeconds": {"type": "integer", "format": "int64"},
        "propagationPolicy": {"type": "string", "enum": ["Orphan", "Background", "Foreground"]},
        "orphanDependents": {"type": "boolean"},
        "dryRun": {"type": "array", "items": {"type": "string"}},
        "preconditions": {
            "type": "object",
            "properties": {"uid": {"type": "string"}, "resourceVersion": {"type": "string"}},
        },
    },
}
_JSON_PATCH = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["op", "path"],
        "properties": {
            "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
            "path": {"type": "string"},
            "from": {"type": "string"},
            "value": _ANY,
        },
    },
}
# Query parameters whose valid values are few: valid data uses them, so that it gets past
# them to the body (invalid data still tries others).
_PARAMETERS = {
    "dryRun": {"type": "string", "enum": ["All"]},
    "fieldValidation": {"type": "string", "enum": ["Ignore", "Warn", "Strict"]},
    "propagationPolicy": {"type": "string", "enum": ["Orphan", "Background", "Foreground"]},
}
_EXAMPLES = {"namespace": NAMESPACE, "name": NAME}
# Bodies of the subresources whose kind is not the resource's own.
_SUBRESOURCE_BODIES = {
    "binding": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _META,
            "target": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "apiVersion": {"type": "string"},
                },
            },
        },
    },
    "eviction": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _META,
            "deleteOptions": _DELETE_OPTIONS,
        },
    },
    "scale": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _META,
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        },
    },
}


# -- the documents ------------------------------------------------------------------------


async def fetch_documents(session: aiohttp.ClientSession) -> dict[str, dict[str, Any]]:
    """`/openapi/v3` and every document it lists, by their path under `/openapi/v3/`."""
    async with session.get("/openapi/v3") as response:
        response.raise_for_status()
        index = await response.json()
    documents = {}
    for path, entry in index["paths"].items():
        async with session.get(entry["serverRelativeURL"]) as response:
            response.raise_for_status()
            documents[path] = await response.json()
    return documents


def fuzz_schema(
    documents: Iterable[dict[str, Any]], resources: Sequence[str] | None = None
) -> dict[str, Any]:
    """One OpenAPI document of every operation (of `resources` only, if given), with the
    request bodies each one takes and without `watch`."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for document in documents:
        schemas.update(document.get("components", {}).get("schemas", {}))
        for path, item in document["paths"].items():
            if resources is None or _plural(path) in resources:
                paths[path] = _with_bodies(path, copy.deepcopy(item))
    # Deleting every namespace would leave the rest of the run nowhere to create objects
    # (no namespace controller finishes the deletion, so they stay terminating).
    paths.get("/api/v1/namespaces", {}).pop("delete", None)
    return {
        "openapi": "3.0.0",
        "info": {"title": "drasim (fuzz)", "version": "v1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _plural(path: str) -> str:
    """The resource a path serves: `/api/v1/namespaces/{namespace}/pods/{name}` → pods."""
    parts = path.strip("/").split("/")
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    if parts[:2] == ["namespaces", "{namespace}"]:
        parts = parts[2:]
    return parts[0]


def _with_bodies(path: str, item: dict[str, Any]) -> dict[str, Any]:
    subresource = path.rsplit("/", 1)[1] if path.endswith(tuple(_SUBRESOURCE_BODIES)) else ""
    for parameter in item.get("parameters", []):
        # What the coverage phase puts where it varies something else: the seed objects.
        parameter["schema"] = {**parameter["schema"], "example": _EXAMPLES[parameter["name"]]}
    for method, operation in item.items():
        if method == "parameters":
            continue
        operation["parameters"] = [
            {**p, "schema": _PARAMETERS.get(p["name"], p["schema"])}
            for p in operation["parameters"]
            if p["name"] != "watch"
        ]
        kind = _response_schema(operation) or _SUBRESOURCE_BODIES.get(subresource)
        if method in ("post", "put") and kind is not None:
            operation["requestBody"] = _body(
                {"application/json": kind, "application/yaml": kind}, required=True
            )
        elif method == "patch" and kind is not None:
            operation["requestBody"] = _body(
                {
                    "application/merge-patch+json": kind,
                    "application/strategic-merge-patch+json": kind,
                    "application/json-patch+json": _JSON_PATCH,
                    "application/apply-patch+yaml": kind,
                },
                required=True,
            )
        elif method == "delete":
            operation["requestBody"] = _body({"application/json": _DELETE_OPTIONS})
    return item


def _response_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    ok = operation["responses"].get("200", {})
    return ok.get("content", {}).get("application/json", {}).get("schema")


def _body(content: dict[str, dict[str, Any]], *, required: bool = False) -> dict[str, Any]:
    return {
        "required": required,
        "content": {media: {"schema": schema} for media, schema in content.items()},
    }


# -- objects to aim at --------------------------------------------------------------------

_SEED_OBJECTS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAME}}),
    ("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NAME}}),
    (
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": NAME},
            "spec": {"extendedResourceName": "example.com/gpu"},
        },
    ),
    (
        f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": NAME},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": NAME}}]}
            },
        },
    ),
    (
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": NAME, "labels": {"app": NAME}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        },
    ),
    (
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": NAME}},
                "template": {
                    "metadata": {"labels": {"app": NAME}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    ),
    (
        f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": NAME},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": NAME}}},
        },
    ),
    (
        f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"rs": NAME}},
                "template": {
                    "metadata": {"labels": {"rs": NAME}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    ),
    (
        f"/api/v1/namespaces/{NAMESPACE}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": NAME},
            "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": NAME},
            "reason": "Fuzz",
            "message": "fuzz",
        },
    ),
    (
        f"/api/v1/namespaces/{NAMESPACE}/resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": NAME},
            "spec": {"hard": {"pods": "1000"}},
        },
    ),
    (
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME},
            "spec": {"holderIdentity": NAME, "leaseDurationSeconds": 10},
        },
    ),
    (
        "/apis/resource.k8s.io/v1/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": NAME},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": NAME,
                "pool": {"name": NAME, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        },
    ),
    (
        f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": NAME},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": NAME}}]}
                }
            },
        },
    ),
    (
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": NAME},
            "value": 10,
        },
    ),
]


async def create_seed_objects(session: aiohttp.ClientSession, *, check: bool = True) -> None:
    """The objects named `fuzz` that the hooks aim some requests at, those missing."""
    for path, body in _SEED_OBJECTS:
        async with session.post(path, json=body) as response:
            if check and response.status not in (201, 409):
                raise RuntimeError(f"POST {path}: {response.status} {await response.text()}")


async def keep_seed_objects(session: aiohttp.ClientSession, every: float = 0.5) -> None:
    """Create the seed objects again as the run deletes them, until cancelled. (One the
    run left terminating, e.g. a pod no kubelet finishes deleting, stays so.)"""
    while True:
        await asyncio.sleep(every)
        await create_seed_objects(session, check=False)


# -- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """An HTTP API to fuzz."""

    url: str
    ca_cert: Path
    token: str

    def session(self) -> aiohttp.ClientSession:
        tls = ssl.create_default_context(cafile=self.ca_cert)
        return aiohttp.ClientSession(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            connector=aiohttp.TCPConnector(ssl=tls),
        )


async def run_schemathesis(
    target: Target,
    schema: dict[str, Any],
    work_dir: Path,
    *,
    max_examples: int,
    seed: int,
    workers: int = 1,
    phases: str = "examples,coverage,fuzzing,stateful",
    max_time: int | None = None,
) -> list[dict[str, Any]]:
    """`st run` against `target`; every request it made, as the hooks logged it. Runs as a
    child process, so the apistore keeps serving in this event loop meanwhile."""
    schema_file = work_dir / "openapi.json"
    schema_file.write_text(json.dumps(schema))
    log = work_dir / "requests.jsonl"
    log.unlink(missing_ok=True)
    st = Path(sys.executable).with_name("st")
    command = [
        str(st) if st.exists() else "st",
        "run",
        str(schema_file),
        f"--url={target.url}",
        f"--header=Authorization: Bearer {target.token}",
        f"--tls-verify={target.ca_cert}",
        f"--max-examples={max_examples}",
        f"--seed={seed}",
        f"--workers={workers}",
        f"--phases={phases}",
        "--checks=not_a_server_error",
        f"--max-response-time={SLOW_S}",
        "--continue-on-failure",
        "--request-timeout=30",
        "--generation-database=none",
        "--suppress-health-check=all",
        "--no-color",
    ]
    if max_time is not None:
        command.append(f"--max-time={max_time}")
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": str(HOOKS),
        "DRASIM_FUZZ_LOG": str(log),
        "DRASIM_FUZZ_NAMESPACE": NAMESPACE,
        "DRASIM_FUZZ_NAME": NAME,
    }
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=work_dir,
    )
    output, _ = await process.communicate()
    (work_dir / "schemathesis.log").write_bytes(output)
    if not log.exists():
        raise RuntimeError(
            f"schemathesis made no request (exit {process.returncode}):\n{output.decode()}"
        )
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def status_problem(record: dict[str, Any]) -> str | None:
    """Why a 4xx answer is no Kubernetes Status, or None if it is one."""
    if not record["response_content_type"].startswith("application/json"):
        return f"content type {record['response_content_type']!r}"
    try:
        body = json.loads(record["response"])
    except ValueError:
        return "not JSON"
    if not isinstance(body, dict) or body.get("kind") != "Status":
        return "kind is not Status"
    if body.get("code") != record["status"]:
        return f"code {body.get('code')!r} is not the HTTP code"
    if not body.get("reason"):
        return "no reason"
    return None


def judge(records: list[dict[str, Any]], *, first: int = FIRST) -> dict[str, Any]:
    """What the requests found: counts, and the first few of each finding in full."""
    server_errors = [r for r in records if r["status"] >= 500]
    slow = [r for r in records if r["elapsed"] > SLOW_S]
    bad_client_errors = []
    for record in records:
        if 400 <= record["status"] < 500 and (problem := status_problem(record)):
            bad_client_errors.append({**record, "problem": problem})
    return {
        "requests": len(records),
        "operations": len({r["operation"] for r in records}),
        "statuses": dict(sorted(Counter(str(r["status"]) for r in records).items())),
        "server_errors": len(server_errors),
        "server_errors_distinct": _distinct(server_errors),
        "slow": len(slow),
        "slowest_s": max((r["elapsed"] for r in records), default=0.0),
        "bad_client_errors": len(bad_client_errors),
        "first_server_errors": _first_distinct(server_errors, first),
        "first_slow": sorted(slow, key=lambda r: -r["elapsed"])[:first],
        "first_bad_client_errors": _first_distinct(bad_client_errors, first),
    }


def _signature(record: dict[str, Any]) -> str:
    """A finding's identity: the operation and the answer's message (or problem)."""
    message = record.get("problem", "")
    if not message:
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(record["response"]).get("message", "")
    return f"{record['operation']} {record['status']} {message[:200]}"


def _distinct(records: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(_signature(r) for r in records).most_common())


def _first_distinct(records: list[dict[str, Any]], first: int) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for record in records:
        seen.setdefault(_signature(record), record)
    return list(seen.values())[:first]


async def fuzz(
    target: Target,
    work_dir: Path,
    *,
    max_examples: int,
    seed: int,
    resources: Sequence[str] | None = None,
    workers: int = 1,
    phases: str = "examples,coverage,fuzzing,stateful",
    max_time: int | None = None,
) -> dict[str, Any]:
    """Seed objects, fetch the documents, run schemathesis, judge what it got."""
    async with target.session() as session:
        await create_seed_objects(session)
        documents = await fetch_documents(session)
        schema = fuzz_schema(documents.values(), resources)
        started = time.monotonic()
        keeper = asyncio.create_task(keep_seed_objects(session))
        try:
            records = await run_schemathesis(
                target,
                schema,
                work_dir,
                max_examples=max_examples,
                seed=seed,
                workers=workers,
                phases=phases,
                max_time=max_time,
            )
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
    return {
        "max_examples": max_examples,
        "seed": seed,
        "resources": list(resources) if resources else "all",
        "phases": phases,
        "documents": sorted(documents),
        "duration_s": round(time.monotonic() - started, 1),
        **judge(records),
    }


@contextlib.asynccontextmanager
async def apistore(data_dir: Path) -> AsyncIterator[Target]:
    """Embedded NATS and Postgres, and an apistore with its HTTP API, under `data_dir`."""
    with launch.infrastructure(data_dir) as infra:
        certs = kubeconfig.ensure_serving_certs(data_dir)
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(certs.cert, certs.key)
        server = await ApiServer.start(
            nats_url=infra.admin_nats_url,
            database_url=infra.database_url,
            prefix="fuzz",
            http_port=0,
            http_token=TOKEN,
            http_tls=tls,
        )
        try:
            assert server.http is not None
            yield Target(f"https://127.0.0.1:{server.http.port}", certs.ca_cert, TOKEN)
        finally:
            await server.stop()


def _print(report: dict[str, Any]) -> None:
    print(
        f"{report['requests']} requests over {report['operations']} operations in "
        f"{report['duration_s']} s; statuses {report['statuses']}"
    )
    print(f"5xx: {report['server_errors']}")
    for signature, count in report["server_errors_distinct"].items():
        print(f"  {count:5d}  {signature}")
    for record in report["first_server_errors"]:
        print(f"  e.g. {_curl(record)}")
    print(f"slower than {SLOW_S} s: {report['slow']} (slowest {report['slowest_s']:.3f} s)")
    for record in report["first_slow"]:
        print(f"  {record['elapsed']:.3f} s  {_curl(record)}")
    print(f"4xx that are no Status: {report['bad_client_errors']}")
    for record in report["first_bad_client_errors"]:
        print(f"  {record['problem']}: {_curl(record)}")


def _curl(record: dict[str, Any]) -> str:
    """A finding as the request that reproduces it."""
    body = f" -H 'Content-Type: {record['content_type']}' -d {record['body']!r}"
    return f"curl -X {record['method']} '{record['path']}'" + (body if record["body"] else "")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--resources", help="comma-separated plurals (default: all)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    parser.add_argument("--max-time", type=int, help="seconds for the whole run")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "fuzz.json")
    parser.add_argument("--keep", type=Path, help="keep the request log etc. in this folder")
    args = parser.parse_args()
    resources = args.resources.split(",") if args.resources else None
    with tempfile.TemporaryDirectory(prefix="drasim-fuzz-") as scratch:
        work_dir = args.keep or Path(scratch)
        work_dir.mkdir(parents=True, exist_ok=True)
        async with apistore(Path(scratch) / "data") as target:
            report = await fuzz(
                target,
                work_dir,
                max_examples=args.max_examples,
                seed=args.seed,
                resources=resources,
                workers=args.workers,
                phases=args.phases,
                max_time=args.max_time,
            )
    _print(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if report["server_errors"] or report["slow"] or report["bad_client_errors"] else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
