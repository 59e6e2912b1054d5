"""reference.perf_compare's pure parts: workload names and upstream's data items."""

from __future__ import annotations

from pathlib import Path

import yaml

from reference import perf_compare

CONFIG = Path(__file__).parents[2] / "benchmarks" / "scheduler_perf" / "performance-config.yaml"


def test_every_workload_is_one_drasim_bench_runs() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    names = {f"{case['name']}/{w['name']}" for case in config for w in case.get("workloads", [])}
    assert set(perf_compare.WORKLOADS) <= names


def test_throughput_is_read_from_upstreams_data_items() -> None:
    items = {
        "version": "v1",
        "dataItems": [
            {"data": {"Average": 3}, "unit": "s", "labels": {"Metric": "scheduler_x"}},
            {
                "data": {"Average": 250.5, "Perc50": 240},
                "unit": "pods/s",
                "labels": {"Metric": "SchedulingThroughput", "Name": "ExtendedResource/fast"},
            },
        ],
    }
    assert perf_compare.throughput(items) == {"Average": 250.5, "Perc50": 240.0}
    assert perf_compare.throughput({}) == {}


def test_throughput_from_the_benchmark_log() -> None:
    line = (
        "BenchmarkPerfScheduling/x-2\t1\t27.81 SchedulingDuration/Duration"
        "\t37.78 SchedulingThroughput/Average\t38.79 SchedulingThroughput/Perc50"
    )
    assert perf_compare.throughput_from_log(line) == {"Average": 37.78, "Perc50": 38.79}
    failed = 'expected "SchedulingThroughput" "Average" to be higher: got 18.065912, want 120'
    assert perf_compare.throughput_from_log(failed) == {"Average": 18.065912}


def test_drasims_figure_is_its_average_or_for_a_short_run_its_overall_rate() -> None:
    assert perf_compare.drasim_throughput({"throughput_avg": 300.0}) == (300.0, "avg")
    short = {"throughput_avg": None, "throughput_overall": 785.2}
    assert perf_compare.drasim_throughput(short) == (785.2, "overall")
