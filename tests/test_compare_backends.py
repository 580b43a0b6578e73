"""--compare-backends on CPU: parsing, the ratio records, and the interleaved loop on real gloo ranks
(a second name for the same gloo group stands in for cupy-nccl), plus the harness's capture hook."""

from __future__ import annotations

import os

import numpy as np
import pytest
from typer.testing import CliRunner

from collectives import get_collective
from commbench.measure.bench import BenchConfig, plan_points
from commbench.cli.app import app
from commbench.measure.compare_backends import compare_points, parse_compare_backends, with_baseline
from commbench.errors import CommbenchError
from commbench.measure.harness import LoopOptions, measure_point
from commbench.results.records import Measurement
from tests.distributed import run_ranks


def _record(backend: str, median_us: float, status: str = "ok") -> Measurement:
    return Measurement(run_id="r", collective="all_reduce", backend=backend, size_bytes=1024, count=256,
                       dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, group_layout="world",
                       num_groups=1, iters=5, warmup_iters=1, time_us_median=median_us, time_us_mean=median_us,
                       time_us_min=median_us, time_us_p99=median_us, algbw_gbps=1.0, busbw_gbps=1.0, num_wrong=0,
                       status=status)


def test_with_baseline_records_ratio_and_difference():
    compared = with_baseline(_record("nccl", 30.0), _record("cupy-nccl", 20.0))
    assert compared.metrics == {"baseline_backend": "cupy-nccl", "baseline_time_us_median": 20.0,
                                "time_ratio_to_baseline": 1.5, "time_us_over_baseline": 10.0}
    failed = _record("cupy-nccl", 0.0, status="failed")
    assert with_baseline(_record("nccl", 30.0), failed).metrics == {}


def test_parse_compare_backends_refuses_what_one_launch_cannot_hold():
    with pytest.raises(CommbenchError, match="two or more different"):
        parse_compare_backends("gloo")
    with pytest.raises(CommbenchError, match="one torch.distributed backend"):
        parse_compare_backends("torch-gloo,nccl")
    with pytest.raises(CommbenchError, match="'mpi' is no backend"):
        parse_compare_backends("gloo,mpi")
    with pytest.raises(CommbenchError, match="--compare-backends: cupy-nccl is not available here"):
        parse_compare_backends("torch-gloo,cupy-nccl")


def test_cli_compare_fails_with_one_line_when_a_backend_is_missing():
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--compare-backends", "torch-gloo,cupy-nccl"])
    assert result.exit_code == 2 and result.output.startswith("error: --compare-backends: cupy-nccl")


class Renamed:
    """The same backend under another name (a stand-in for a second backend on CPU)."""

    def __init__(self, backend, name: str) -> None:
        self._backend, self.name = backend, name

    def __getattr__(self, attr):
        return getattr(self._backend, attr)


def _compare_on_ranks(backend):
    config = BenchConfig(collective="all_reduce", sizes_bytes=(64, 4096), backend="gloo",
                         loop=LoopOptions(iters=3, warmup_iters=1))
    collective = get_collective("all_reduce")
    points = plan_points(config, collective, backend.world_size)
    rows = list(compare_points([backend, Renamed(backend, "gloo-again")], collective, points, config, ["a", "b"]))
    return [[(r.backend, r.run_id, r.size_bytes, r.num_wrong, dict(r.metrics), r.time_us_median) for r in row]
            for row in rows]


def test_compare_points_interleaves_backends_and_compares_with_the_last():
    rows = run_ranks(_compare_on_ranks, 2)[0]
    assert [[(b, run, size, wrong) for b, run, size, wrong, _, _ in row] for row in rows] == [
        [("gloo", "a", 64, 0), ("gloo-again", "b", 64, 0)], [("gloo", "a", 4096, 0), ("gloo-again", "b", 4096, 0)]]
    for (_, _, _, _, metrics, first_us), (_, _, _, _, last_metrics, last_us) in rows:
        assert metrics["baseline_backend"] == "gloo-again" and last_metrics == {}
        assert metrics["time_ratio_to_baseline"] == pytest.approx(first_us / last_us)


class CapturingBackend(Renamed):
    """Counts captures and replays: what the harness asks of a backend under --cuda-graph."""

    def __init__(self, backend) -> None:
        super().__init__(backend, backend.name)
        self.captured, self.replays = 0, 0

    def capture(self, stage):
        self.captured += 1
        stage()  # a real capture records without running; here the stage simply runs once

        def replay():
            self.replays += 1
            stage()
        return replay


def _measure_with_graph(backend):
    capturing = CapturingBackend(backend)
    record = measure_point(capturing, backend.world, get_collective("all_reduce"),
                           plan_points(BenchConfig(collective="all_reduce", sizes_bytes=(256,)),
                                       get_collective("all_reduce"), backend.world_size)[0].spec,
                           LoopOptions(iters=4, warmup_iters=2, cuda_graph=True), run_id="g")
    return capturing.captured, capturing.replays, record.params, record.num_wrong, np.isfinite(record.time_us_median)


def test_harness_times_replays_of_captured_stages_under_cuda_graph():
    captured, replays, params, num_wrong, finite = run_ranks(_measure_with_graph, 2)[0]
    # one warm replay after capture, the timed iterations, then the data check after the loop (on the replay)
    assert captured == 1 and replays == 1 + 4 + 1
    assert params == {"cuda_graph": True} and num_wrong == 0 and finite


def _compare_rank_with_algorithms(rank, port, config, queue):
    """run_compare_rank on a real gloo world, its second backend the same group renamed (no second CPU backend)."""
    import commbench.comm.backends as backends_module
    from commbench.comm.launch import RankEnv
    from commbench.measure.compare_backends import CompareConfig, run_compare_rank

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    real = backends_module.create_backend
    made = {}

    def create(name, rank_env, timeout_s):
        if name == "gloo":
            made["gloo"] = real("gloo", rank_env, timeout_s)
            return made["gloo"]
        return Renamed(made["gloo"], name)  # not shut down twice: Renamed forwards to the same group

    backends_module.create_backend = create
    env = RankEnv(rank=rank, world_size=4, local_rank=rank, launcher="single", master_addr="127.0.0.1", master_port=port)
    try:
        outcome = run_compare_rank(env, CompareConfig(bench=config, backends=("gloo", "gloo-again")))
        queue.put((rank, outcome.error, outcome.num_points))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        queue.put((rank, f"raised {exc!r}", 0))


def test_compare_backends_measures_each_algorithm_of_a_list(tmp_path):
    """--compare-backends with grad_reduce_scatter --algorithm flat,hierarchical measured the list as one raw
    'flat,hierarchical' point (plan_points, not the per-algorithm expansion a one-backend bench does), with no racks
    in its params. Each algorithm is now its own point on every backend, with the racks, as bench does."""
    import json
    import multiprocessing as mp

    from commbench.measure.subgroups import with_rack_options
    from tests.distributed import free_port

    out = tmp_path / "cmp.jsonl"
    config = BenchConfig(collective="grad_reduce_scatter", sizes_bytes=(4096,), backend="gloo", output_path=str(out),
                         output_format="jsonl", loop=LoopOptions(iters=2, warmup_iters=1), timeout_s=30.0)
    config = with_rack_options(config, ranks_per_rack=2, preset=None, racks=None, nodes_per_rack=None, rack_nodes=None,
                               group_sizes=None, group_layout=None, algorithm="flat,hierarchical", rs_impl=None)
    ctx = mp.get_context("fork")
    queue, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=_compare_rank_with_algorithms, args=(r, port, config, queue), daemon=True)
             for r in range(4)]
    for proc in procs:
        proc.start()
    results = sorted(queue.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=10)
    assert [error for _, error, _ in results] == [None] * 4, results
    assert results[0][2] == 2  # two points: one per algorithm
    records = [json.loads(line) for line in out.read_text().splitlines()]
    points = [r for r in records if r.get("kind", r.get("record")) != "header" and "size_bytes" in r]
    assert sorted((r["backend"], r["params"]["algorithm"]) for r in points) == [
        ("gloo", "flat"), ("gloo", "hierarchical"), ("gloo-again", "flat"), ("gloo-again", "hierarchical")]
    assert all(r["params"].get("ranks_per_rack") == 2 or r["params"].get("racks") for r in points), points[0]["params"]
    assert all(r["status"] == "ok" and r["num_wrong"] == 0 for r in points)
