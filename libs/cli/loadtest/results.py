"""The results of a `drasim loadtest` run: the JSON document and the table printed at the
end. Each SLI is held against clusterloader2's threshold for it; `slo_pass` is all of them
holding (those the run could not measure left out) and no device ever allocated twice: no
DRA device held by two claims, no device-plugin device by two pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from drasim.cli.loadtest import scrape, slis
from drasim.cli.loadtest.workload import CHURN, FILL

if TYPE_CHECKING:
    from drasim.cli.loadtest.runner import LoadTestRun

__all__ = ["format_table", "phase_slis", "summarize"]

NODE_PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
NODE_UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
API_ROWS_SHOWN = 8
# The JSON's `pod_startup_by_minute`: each phase's start-up per minute of pod creations.
STARTUP_WINDOW_S = 60.0


def _p99(histograms: scrape.Histograms | None, name: str, **labels: str) -> float | None:
    if histograms is None:
        return None
    found = histograms.quantile(
        0.99, name, lambda have: all(have.get(k) == v for k, v in labels.items())
    )
    return None if found is None else round(found, 4)


def _phase(run: LoadTestRun, phase: str, measured: Mapping[str, Any]) -> dict[str, Any]:
    """What one phase measured: the watches' latencies and its metric SLIs."""
    histograms: scrape.Histograms | None = measured.get("metrics")
    found: dict[str, Any] = {"duration_s": measured["duration_s"]}
    if phase in (FILL, CHURN):
        startup = run.pods.startup(phase)
        found |= {
            "jobs_created": len(run.created[phase]),
            "jobs_failed": run.jobs.count(phase, "failed"),
            "pods_created": run.pods.created(phase),
            "pods_started": startup.count,
            "pod_startup": startup.as_dict(),
            "pod_startup_by_minute": [
                m.as_dict() for m in run.pods.startup_by_window(phase, STARTUP_WINDOW_S)
            ],
            "scheduling": run.pods.scheduling(phase).as_dict(),
            "claim_allocation": run.claims.allocation(phase).as_dict(),
            "pod_create_to_claim_create": run.claims.pod_create_to_claim_create(phase).as_dict(),
            "pod_create_to_special_claim_allocation": run.claims.pod_create_to_allocation(
                phase, special=True
            ).as_dict(),
        }
    found |= {
        "scheduling_sli_p99_s": _p99(histograms, scrape.SCHEDULING_SLI),
        "node_prepare_p99_s": _p99(histograms, scrape.DRA_GRPC, method_name=NODE_PREPARE),
        "node_unprepare_p99_s": _p99(histograms, scrape.DRA_GRPC, method_name=NODE_UNPREPARE),
        "prepare_resources_p99_s": _p99(
            histograms, scrape.DRA_OPERATIONS, operation_name="PrepareResources"
        ),
        "api_calls": [] if histograms is None else scrape.api_calls(histograms),
    }
    return found


def phase_slis(run: LoadTestRun, phase: str) -> list[slis.Sli]:
    """What clusterloader2 holds `phase` to: pod start-up and claim allocation, each at
    p50, p90 and p99 against one threshold (5 s, 5 min)."""
    found = []
    for label, metric, threshold in (
        ("pod start-up", run.pods.startup(phase), slis.POD_STARTUP_THRESHOLD_S),
        ("claim allocation", run.claims.allocation(phase), slis.CLAIM_ALLOCATION_THRESHOLD_S),
    ):
        for q in ("p50", "p90", "p99"):
            value = getattr(metric, q) if metric.count else None
            found.append(slis.Sli(f"{phase} {label} {q}", value, threshold))
    return found


def summarize(run: LoadTestRun, measured: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The run's results document (see the module's docstring)."""
    shape = run.shape
    phases = {phase: _phase(run, phase, m) for phase, m in measured.items()}
    churn = phases[CHURN]
    found: list[slis.Sli] = [*phase_slis(run, FILL), *phase_slis(run, CHURN)]
    api_rows = [
        {"phase": phase, **row} for phase in (FILL, CHURN) for row in phases[phase]["api_calls"]
    ]
    dra_twice, plugin_twice = len(run.devices.twice), len(run.plugin_devices.twice)
    twice = dra_twice + plugin_twice
    passed = [s.passed for s in found] + [bool(row["pass"]) for row in api_rows]
    return {
        "nodes": shape.nodes,
        "mode": shape.mode,
        "device_plugin_nodes": shape.device_plugin_nodes,
        "gpus": shape.gpus,
        "fill_pods": shape.fill_pods,
        "namespaces": len(shape.namespaces),
        "options": dataclasses.asdict(run.options),
        "jobs_created": sum(len(jobs) for jobs in run.created.values()),
        "create_errors": run.create_errors[:20],
        "pods_created": run.pods.created(FILL) + run.pods.created(CHURN),
        "pods_started": run.pods.started(FILL) + run.pods.started(CHURN),
        "pod_startup_p50_s": churn["pod_startup"]["p50_s"],
        "pod_startup_p90_s": churn["pod_startup"]["p90_s"],
        "pod_startup_p99_s": churn["pod_startup"]["p99_s"],
        "scheduling_p99_s": churn["scheduling"]["p99_s"],
        "claim_allocation_p99_s": churn["claim_allocation"]["p99_s"],
        "node_prepare_p99_s": churn["node_prepare_p99_s"],
        "devices_allocated_twice": twice,
        "dra_devices_allocated_twice": dra_twice,
        "device_plugin_devices_allocated_twice": plugin_twice,
        "devices_checked": {
            "dra": len(run.devices.seen),
            "device_plugin": len(run.plugin_devices.seen),
        },
        "phases": phases,
        "api_call_latency": api_rows,
        "slis": [s.as_dict() for s in found],
        "slo_pass": all(p for p in passed if p is not None) and twice == 0,
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _verdict(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "not measured"}[passed]


def _phase_row(name: str, p: Mapping[str, Any]) -> str:
    startup = p.get("pod_startup", {})
    return (
        f"{name:<7} {p['duration_s']:>7.1f} {p.get('jobs_created', 0):>6} "
        f"{p.get('pods_started', 0):>6} {_seconds(startup.get('p50_s')):>9} "
        f"{_seconds(startup.get('p90_s')):>7} {_seconds(startup.get('p99_s')):>7} "
        f"{_seconds(p.get('scheduling', {}).get('p99_s')):>9} "
        f"{_seconds(p.get('claim_allocation', {}).get('p99_s')):>9} "
        f"{_seconds(p.get('node_prepare_p99_s')):>11}"
    )


def format_table(results: Mapping[str, Any]) -> str:
    """The results as a few aligned tables: per phase, the SLIs, the slowest API calls."""
    lines = [
        f"drasim loadtest: {results['nodes']} nodes, mode {results['mode']}, "
        f"{results['gpus']} GPUs, fill {results['fill_pods']} pods, "
        f"{results['pods_started']} of {results['pods_created']} pods started",
        "",
        f"{'phase':<7} {'s':>7} {'jobs':>6} {'pods':>6} {'start p50':>9} {'p90':>7} "
        f"{'p99':>7} {'sched p99':>9} {'claim p99':>9} {'prepare p99':>11}",
    ]
    lines += [_phase_row(name, phase) for name, phase in results["phases"].items()]
    lines += ["", f"{'SLI':<32} {'value s':>9} {'threshold s':>11}  result"]
    for sli in results["slis"]:
        lines.append(
            f"{sli['name']:<32} {_seconds(sli['value_s']):>9} {sli['threshold_s']:>11g}  "
            f"{_verdict(sli['pass'])}"
        )
    rows = sorted(results["api_call_latency"], key=lambda r: -r["p99_s"])[:API_ROWS_SHOWN]
    if rows:
        lines += ["", f"{'API call (slowest p99)':<46} {'calls':>7} {'p99 s':>7} {'limit':>5}"]
    for r in rows:
        call = f"{r['phase']} {r['verb']} {r['resource']}"
        call += f"/{r['subresource']}" if r["subresource"] else ""
        call += f" ({r['scope']})"
        lines.append(
            f"{call:<46} {r['calls']:>7} {r['p99_s']:>7.3f} {r['threshold_s']:>5g}  "
            f"{_verdict(r['pass'])}"
        )
    checked = results["devices_checked"]
    lines += [
        "",
        f"devices allocated twice: {results['devices_allocated_twice']} "
        f"(DRA {results['dra_devices_allocated_twice']} of {checked['dra']}, device plugin "
        f"{results['device_plugin_devices_allocated_twice']} of {checked['device_plugin']})",
        f"SLO: {'pass' if results['slo_pass'] else 'FAIL'}",
    ]
    return "\n".join(lines)
