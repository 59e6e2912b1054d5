"""`reference/compare`: run the differential scenarios against drasim and upstream.

    reference/compare                 every scenario under reference/scenarios/
    reference/compare kep-example     the named ones
    reference/compare --list

For each cluster file the scenarios need, it starts `drasim up` (embedded NATS and
Postgres) and `reference/up`'s control plane side by side, then runs each scenario on both
at once in its own namespace, observes what a user would see (`reference.normalize`),
prints the differences as a table (`reference.diff`) and cleans up. A difference not listed
in `reference/divergences.yaml` fails the scenario; the exit code is 1 if any failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from drasim.cli import launch, supervisor
from drasim.common import cluster_file
from reference import diff, normalize, paths, scenarios
from reference.cluster import ReferenceCluster
from reference.kube import KubeClient, resource_for
from reference.normalize import Observation
from reference.scenarios import Scenario

__all__ = [
    "DIVERGENCES",
    "DrasimCluster",
    "Outcome",
    "Side",
    "main",
    "observe",
    "run_pair",
    "run_scenario",
    "sides",
]

DIVERGENCES = Path(__file__).resolve().parent / "divergences.yaml"
SETTLE_TIMEOUT = 120.0
QUIET = 4.0  # seconds without change after which a scenario counts as settled
QUOTA_STATUS_WAIT = 20.0
CLEANUP_TIMEOUT = 90.0
START_TIMEOUT = 300.0


# -- the two clusters ---------------------------------------------------------------------
@dataclass
class DrasimCluster:
    """`drasim up` on a fresh data directory, in its own session, until `stop()`:
    `spawn()`, then `wait_ready()`."""

    data_dir: Path
    cluster: Path | None
    say: Callable[[str], None] = print
    process: subprocess.Popen[str] | None = field(init=False, default=None)
    _log: IO[str] | None = field(init=False, default=None)
    _ready: threading.Event = field(init=False, default_factory=threading.Event)

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "up.log"

    def spawn(self) -> None:
        """Start `drasim up`; it dies with this thread (see `reference.cluster`)."""
        drasim = Path(sys.executable).parent / "drasim"
        argv = [str(drasim), "up", "--data-dir", str(self.data_dir)]
        if self.cluster is not None:
            argv += ["--cluster", str(self.cluster)]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("a")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRASIM_")}
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
            preexec_fn=launch.die_with_parent if sys.platform == "linux" else None,
        )
        threading.Thread(target=self._read, daemon=True).start()
        self.say(f"started drasim up (pid {self.process.pid}, log {self._log.name})")

    def wait_ready(self) -> None:
        """Return once `drasim up` printed its ready line; RuntimeError if it exits first."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready.wait(0.5):
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"drasim up exited with {self.process.returncode}; see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"drasim up not ready after {START_TIMEOUT:.0f} s")

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        assert self._log is not None
        for line in self.process.stdout:
            self._log.write(line)
            self._log.flush()
            if line.startswith("ready"):
                self._ready.set()

    def stop(self) -> None:
        """SIGTERM: `up` stops its services and servers; SIGKILL after a minute."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        supervisor.ProcessRecords(self.data_dir).stop_orphans()


@dataclass
class Side:
    """One cluster under comparison, as the runner reaches it."""

    name: str
    client: KubeClient
    node_pools: dict[str, str] = field(default_factory=dict)  # node → drasim.io/pool

    def refresh_pools(self) -> None:
        self.node_pools = {
            n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(
                normalize.POOL_LABEL, n["metadata"]["name"]
            )
            for n in self.client.list("v1", "Node")
        }


@contextlib.contextmanager
def sides(
    work_dir: Path, cluster: Path | None, say: Callable[[str], None]
) -> Iterator[tuple[Side, Side]]:
    """drasim and upstream with the nodes of `cluster`, started side by side."""
    bin_dir = paths.built_bin_dir()
    if bin_dir is None:
        raise RuntimeError(paths.missing_reason())
    nodes = cluster_file.load(cluster)
    tag = cluster.stem if cluster else "kep-example"
    ours = DrasimCluster(work_dir / f"drasim-{tag}", cluster, say=lambda m: say(f"drasim: {m}"))
    theirs = ReferenceCluster(
        work_dir / f"upstream-{tag}", nodes, bin_dir, say=lambda m: say(f"upstream: {m}")
    )
    try:
        # Both start at once, from this thread: their processes die with the thread that
        # started them (`reference.cluster`), and a pool's threads end before the run does.
        ours.spawn()
        theirs.start()
        ours.wait_ready()
        pair = (
            Side("drasim", KubeClient.from_kubeconfig(ours.kubeconfig)),
            Side("upstream", KubeClient.from_kubeconfig(theirs.kubeconfig)),
        )
        for side in pair:
            side.refresh_pools()
        yield pair
    finally:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda stop: stop(), [ours.stop, theirs.stop]))


# -- one scenario on one side ---------------------------------------------------------------
@dataclass
class Outcome:
    """A scenario's observation on one side, and the cluster-scoped objects it made."""

    observation: Observation
    cluster_scoped: list[tuple[str, str, str]]


def run_scenario(side: Side, scenario: Scenario) -> Outcome:
    """Create the namespace, run the steps, settle, observe."""
    client, ns = side.client, scenario.namespace
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    writes: list[tuple[str, int, Any]] = []
    made: list[tuple[str, str, str]] = []
    for i, step in enumerate(scenario.steps, 1):
        if step.kind == "apply":
            for j, obj in enumerate(step.objects, 1):
                resource = resource_for(obj["apiVersion"], obj["kind"])
                meta = obj.setdefault("metadata", {})
                if resource.namespaced:
                    meta.setdefault("namespace", ns)
                answer = client.create(obj)
                name = meta.get("name") or (meta.get("generateName", "") + "*")
                writes.append((f"{i}.{j} create {obj['kind']}/{name}", answer.status, answer.body))
                if answer.ok and not resource.namespaced:
                    made.append((obj["apiVersion"], obj["kind"], answer.body["metadata"]["name"]))
        elif step.kind in ("patch", "delete"):
            t = step.target
            namespace = ns if resource_for(t["apiVersion"], t["kind"]).namespaced else None
            if step.kind == "patch":
                answer = client.patch(
                    t["apiVersion"],
                    t["kind"],
                    t["name"],
                    t["patch"],
                    namespace=namespace,
                    subresource=t.get("subresource", ""),
                )
            else:
                answer = client.delete(t["apiVersion"], t["kind"], t["name"], namespace=namespace)
            sub = f"/{t['subresource']}" if t.get("subresource") else ""
            writes.append(
                (f"{i} {step.kind} {t['kind']}/{t['name']}{sub}", answer.status, answer.body)
            )
        elif step.kind == "sleep":
            time.sleep(step.seconds)
        else:
            settle(client, ns)
    settled = settle(client, ns)
    time.sleep(1.0)  # events are written in the background on both sides
    observation = observe(side, ns, writes)
    observation["scenario"] = {"settled": settled}
    return Outcome(observation, made)


def settle(client: KubeClient, namespace: str, timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until every pod is bound or marked unschedulable, quotas have a status, every
    Deployment's controller caught up, and nothing changed for QUIET seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        pods = client.list("v1", "Pod", namespace=namespace)
        claims = client.list("resource.k8s.io/v1", "ResourceClaim", namespace=namespace)
        quotas = client.list("v1", "ResourceQuota", namespace=namespace)
        deployments = client.list("apps/v1", "Deployment", namespace=namespace)
        decided = all(
            p["spec"].get("nodeName")
            or any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (p.get("status") or {}).get("conditions") or []
            )
            for p in pods
        )
        # Upstream admits no pod into a namespace whose quota has no status yet; a server
        # that never fills it in (a missing quota controller) is waited for a while only.
        quota_wait = time.monotonic() < deadline - timeout + QUOTA_STATUS_WAIT
        decided = decided and (
            not quota_wait or all((q.get("status") or {}).get("hard") for q in quotas)
        )
        decided = decided and all(
            (d.get("status") or {}).get("observedGeneration", 0)
            >= d["metadata"].get("generation", 1)
            for d in deployments
        )
        snapshot = json.dumps(
            [
                sorted(
                    (
                        p["metadata"]["name"],
                        p["spec"].get("nodeName", ""),
                        json.dumps((p.get("status") or {}).get("conditions"), sort_keys=True),
                    )
                    for p in pods
                ),
                sorted(
                    (c["metadata"]["name"], json.dumps(c.get("status"), sort_keys=True))
                    for c in claims
                ),
                [q.get("status") for q in quotas],
            ],
            sort_keys=True,
        )
        now = time.monotonic()
        if snapshot != last:
            last, since = snapshot, now
        elif decided and now - since >= QUIET:
            return True
        time.sleep(0.5)
    return False


def observe(side: Side, namespace: str, writes: list[tuple[str, int, Any]]) -> Observation:
    """What a user sees in the namespace, normalized (see `reference.normalize`)."""
    client = side.client
    side.refresh_pools()
    pools = side.node_pools
    pods = client.list("v1", "Pod", namespace=namespace)
    claims = client.list("resource.k8s.io/v1", "ResourceClaim", namespace=namespace)
    quotas = client.list("v1", "ResourceQuota", namespace=namespace)
    events = client.list("v1", "Event", namespace=namespace)
    written = [body for _, status, body in writes if 200 <= status < 300 and isinstance(body, dict)]
    names = normalize.name_placeholders([*pods, *claims, *written])
    found: Observation = {}
    for item, status, body in writes:
        if 200 <= status < 300:
            found[item] = normalize.flatten(normalize.normalize_stored(body or {}))
        else:
            found[item] = normalize.normalize_refusal(
                status, body if isinstance(body, dict) else None
            )
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pod_group = {}
    for pod in pods:
        group = normalize.owner_group(pod)
        groups[group].append(pod)
        pod_group[pod["metadata"]["name"]] = group
    for group, members in sorted(groups.items()):
        outcomes = [normalize.normalize_pod_outcome(p, pools) for p in members]
        if group.startswith("Pod/"):
            found[f"pod {group[4:]}"] = outcomes[0]
        else:
            found[f"pods of {group}"] = _aggregate(outcomes)
    special: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for claim in claims:
        flat = normalize.replace_names(
            normalize.flatten(normalize.normalize_claim(claim, pools)), names
        )
        if normalize.is_special_claim(claim):
            owner = next(
                (
                    r["name"]
                    for r in claim["metadata"].get("ownerReferences") or []
                    if r.get("kind") == "Pod"
                ),
                "",
            )
            special[pod_group.get(owner, f"Pod/{owner}")].append(flat)
        else:
            found[f"claim {claim['metadata']['name']}"] = flat
    for group, flats in sorted(special.items()):
        distinct = Counter(json.dumps(f, sort_keys=True) for f in flats)
        for k, (text, count) in enumerate(sorted(distinct.items())):
            item = f"special claim of {group}" + (f" #{k + 1}" if len(distinct) > 1 else "")
            found[item] = {**json.loads(text), "claims like this": count}
    found["allocations"] = normalize.allocation_counts(claims, pools)
    for quota in quotas:
        found[f"quota {quota['metadata']['name']}"] = normalize.quota_fields(quota)
    found["events"] = normalize.event_reasons(events)
    replaced: Observation = normalize.replace_names(found, names)
    return replaced


def _aggregate(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """A ReplicaSet's pods are interchangeable: count them by outcome instead, and list
    the distinct messages of the pending ones apart from their count."""
    found: Counter[str] = Counter()
    messages = set()
    for outcome in outcomes:
        found["pods"] += 1
        if outcome["bound"]:
            found[f"bound to pool {outcome.get('pool', '?')}"] += 1
        else:
            found["pending"] += 1
            messages.add(
                outcome.get("PodScheduled.message")
                or outcome.get("PodScheduled.reason")
                or "(no condition)"
            )
        mappings = [
            v
            for k, v in sorted(outcome.items())
            if k.startswith("extendedResourceClaimStatus.requestMappings")
        ]
        if mappings:
            found[f"mappings: {'; '.join(mappings)}"] += 1
    aggregated: dict[str, Any] = dict(sorted(found.items()))
    for i, message in enumerate(sorted(messages)):
        aggregated[f"pending message[{i}]"] = message
    return aggregated


def cleanup(side: Side, scenario: Scenario, made: list[tuple[str, str, str]]) -> bool:
    """Delete what the scenario made and wait until its pods and claims are gone, so the
    next scenario finds every device free. False if something stayed."""
    client, ns = side.client, scenario.namespace
    for api_version, kind in (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet")):
        for obj in client.list(api_version, kind, namespace=ns):
            client.delete(api_version, kind, obj["metadata"]["name"], namespace=ns)
    for api_version, kind, grace in (
        ("v1", "Pod", 0),
        ("resource.k8s.io/v1", "ResourceClaim", None),
        ("resource.k8s.io/v1", "ResourceClaimTemplate", None),
        ("v1", "ResourceQuota", None),
    ):
        for obj in client.list(api_version, kind, namespace=ns):
            client.delete(
                api_version, kind, obj["metadata"]["name"], namespace=ns, grace_period_seconds=grace
            )
    deadline = time.monotonic() + CLEANUP_TIMEOUT
    clean = False
    while time.monotonic() < deadline:
        left = client.list("v1", "Pod", namespace=ns) + client.list(
            "resource.k8s.io/v1", "ResourceClaim", namespace=ns
        )
        if not left:
            clean = True
            break
        for pod in [
            o
            for o in left
            if o.get("kind", "Pod") == "Pod" and "spec" in o and "containers" in o["spec"]
        ]:
            client.delete(
                "v1", "Pod", pod["metadata"]["name"], namespace=ns, grace_period_seconds=0
            )
        time.sleep(1.0)
    for api_version, kind, name in reversed(made):
        client.delete(api_version, kind, name)
    return clean


def run_pair(pair: tuple[Side, Side], scenario: Scenario) -> tuple[Outcome, Outcome]:
    """The scenario on both sides at once, then cleaned up on both."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ours, theirs = pool.map(lambda side: run_scenario(side, scenario), pair)
        clean = list(
            pool.map(
                lambda args: cleanup(*args),
                [
                    (pair[0], scenario, ours.cluster_scoped),
                    (pair[1], scenario, theirs.cluster_scoped),
                ],
            )
        )
    if not all(clean):
        raise RuntimeError(f"{scenario.name}: pods or claims were left after cleanup: {clean}")
    return ours, theirs


# -- the command ----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """0 if every scenario matched (known divergences allowed), 1 if one did not."""
    parser = argparse.ArgumentParser(prog="reference/compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--work-dir", type=Path, help="data of both clusters (default: a temporary one)"
    )
    parser.add_argument("--json", type=Path, help="also write every difference to this file")
    args = parser.parse_args(argv)
    every = scenarios.load_all()
    if args.list:
        for s in every:
            print(f"{s.name:32} {s.description}")
        return 0
    unknown = set(args.names) - {s.name for s in every}
    if unknown:
        print(f"reference/compare: no scenario {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    chosen = [s for s in every if not args.names or s.name in args.names]
    if paths.built_bin_dir() is None:
        print(f"reference/compare: {paths.missing_reason()}", file=sys.stderr)
        return 2
    known = diff.load_divergences(DIVERGENCES)

    def say(message: str) -> None:
        print(f"[compare] {message}", file=sys.stderr, flush=True)

    by_cluster: dict[Path | None, list[Scenario]] = defaultdict(list)
    for s in chosen:
        by_cluster[s.cluster].append(s)
    results: list[tuple[str, str]] = []
    report: dict[str, Any] = {}
    seen: list[diff.Difference] = []
    with contextlib.ExitStack() as stack:
        work = args.work_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="drasim-compare-"))
        )
        for cluster, group in by_cluster.items():
            say(f"starting drasim and upstream with {cluster or 'the KEP-5004 example cluster'}")
            with sides(work, cluster, say) as pair:
                for s in group:
                    started = time.monotonic()
                    ours, theirs = run_pair(pair, s)
                    differences = diff.compare(s.name, ours.observation, theirs.observation, known)
                    seen += differences
                    failing = [d for d in differences if d.known is None]
                    verdict = (
                        f"FAIL ({len(failing)} differences)"
                        if failing
                        else f"green ({len(differences)} known divergences)"
                        if differences
                        else "green"
                    )
                    took = time.monotonic() - started
                    print(f"\n== {s.name}: {verdict} in {took:.0f} s\n   {s.description}")
                    if differences:
                        print(diff.render_table(differences))
                    results.append((s.name, verdict))
                    report[s.name] = {
                        "verdict": verdict,
                        "differences": [
                            {
                                "item": d.item,
                                "field": d.field,
                                "drasim": d.drasim,
                                "upstream": d.upstream,
                                "known": d.known.note if d.known else None,
                            }
                            for d in differences
                        ],
                    }
    print("\nscenario                          result")
    for name, verdict in results:
        print(f"{name:33} {verdict}")
    if not args.names:  # every scenario ran: an entry none matched is a bug since fixed
        stale = diff.unused(known, seen)
        for entry in stale:
            print(f"\nno longer seen, delete from {DIVERGENCES.name}: {entry.note}")
        report["no longer seen"] = [entry.note for entry in stale]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    failed = sum(1 for _, v in results if v.startswith("FAIL"))
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
