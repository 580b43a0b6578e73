"""nccl-tests letters on `bench` and `sweep` (issue 29, item 3): -G -N -T -m -z mean what they mean
there; -g/-t and the rest are refused in one line saying why."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.measure.harness import aggregated

runner = CliRunner()


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_m_z_N_T_map_to_aggregation_blocking_cycles_and_timeout(tmp_path):
    out = tmp_path / "ar.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "3", "-w", "1",
                                 "-m", "4", "-z", "1", "-N", "2", "-T", "60", "-J", str(out)])
    assert result.exit_code == 0, result.output
    lines = records(out)
    headers = [r for r in lines if r["record_type"] == "header"]
    points = [r for r in lines if r["record_type"] != "header"]
    assert len(headers) == 2 and [p["size_bytes"] for p in points] == [1024, 2048, 4096] * 2   # -N 2: two cycles
    assert all(p["params"]["agg_iters_ungrouped"] == 4 and p["params"]["blocking"] is True for p in points)
    assert all(p["iters"] == 3 for p in points)


def test_m_on_an_in_place_sum_checks_one_operation_not_m(tmp_path):
    """bench all_reduce --nproc 2 -m 2 (the README's nccl-tests letter) reported every element wrong, exit 1:
    the check after the timed loop ran the aggregated callable, two in-place sums, so the buffer held the
    sum of the sum. nccl-tests checks one operation after timing; so does commbench now."""
    out = tmp_path / "ar.jsonl"
    for op in ("sum", "prod"):
        result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                                     "-w", "1", "-m", "3", "-o", op, "-d", "int32", "-T", "60", "-J", str(out)])
        assert result.exit_code == 0, result.output
    points = [r for r in records(out) if r["record_type"] != "header"]
    assert len(points) == 4 and all(p["num_wrong"] == 0 and p["params"]["agg_iters_ungrouped"] == 3 for p in points)


def test_N_prints_nccl_tests_layout_one_banner_all_cycles_rows_one_footer(tmp_path):
    """bench -N 3 --format nccl-tests printed a banner, a table header and a footer per cycle; nccl-tests prints
    them once (src/common.cu: the cycles loop inside one test, writeResultFooter after it), the footer over every
    cycle's cells. The records keep one run per cycle."""
    from commbench.results.importers.nccl_tests import parse_text
    from commbench.results.nccl_tests_text import footer
    from commbench.results.records import from_dict

    out = tmp_path / "ar.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "2", "-w", "0",
                                 "-N", "3", "--format", "nccl-tests", "-J", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()   # the text; stderr says where the records went (done: ...; records in FILE)
    assert result.stderr.strip().endswith(f"records in {out}")
    for start in ("# topology:", "# Collective test starting", "# nThread", "#       size", "# Avg bus bandwidth",
                  "# Collective test concluded"):
        assert sum(line.startswith(start) for line in lines) == 1, (start, result.output)
    rows = [i for i, line in enumerate(lines) if line[:12].strip().isdigit()]
    assert len(rows) == 9 and rows == list(range(rows[0], rows[0] + 9))  # the cycles' rows, one block
    points = [from_dict(r) for r in records(out) if r["record_type"] == "measurement"]
    assert len(points) == 18 and lines[rows[-1] + 1:] == footer(points, "all_reduce")
    imported = parse_text(result.stdout, "log.txt")
    assert imported.problems == []
    assert len({m.run_id for m in imported.records}) == len({p.run_id for p in points}) == 3


def test_G_banner_reads_iterations_and_launches_as_nccl_tests(tmp_path, monkeypatch):
    """-n 4 -G 5: the banner read 'iters: 20 ... graph: 1' (the loop's 20 replays of one iteration's graph);
    nccl-tests reads 'iters: 4 ... graph: 5' (src/util.cu writeDeviceReport: iters, cudaGraphLaunches)."""
    import commbench.cli.bench as bench_cli
    from commbench.measure.bench import BenchOutcome
    from commbench.measure.view import BenchView
    from commbench.results.records import RunHeader

    header = RunHeader(run_id="r", started_at="t", argv=[], commbench_version="0", python_version="3",
                       torch_version=None, nccl_version="2.27.3", cuda_version=None, cupy_version="13",
                       backend="cupy-nccl", world_size=1, hostnames=["h"], devices=["gpu"], nccl_env={},
                       launcher="single")
    configs = []

    def fake_run(config, backends, nproc, timeout_s):  # rank 0's view of a run with no points
        configs.append(config)
        BenchView(config, header, 0).close()
        return {0: BenchOutcome(num_points=0, num_wrong=0, error=None)}

    monkeypatch.setattr(bench_cli, "resolve_backend", lambda name: name)  # no CuPy here
    monkeypatch.setattr(bench_cli, "_run", fake_run)
    monkeypatch.setattr(bench_cli, "check_job", lambda **kwargs: 1)  # the launch checks ask CuPy for GPUs
    result = runner.invoke(app, ["bench", "all_reduce", "--backend", "cupy-nccl", "-n", "4", "-G", "5",
                                 "--format", "nccl-tests", "-J", str(tmp_path / "g.jsonl")])
    assert result.exit_code == 0, result.output
    banner = next(line for line in result.output.splitlines() if line.startswith("# nThread"))
    assert banner.endswith(" iters: 4 agg iters: 1 validation: 1 graph: 5 unalign: 0"), banner
    assert configs[0].loop.iters == 20 and configs[0].loop.cuda_graph  # what the loop times: n x G replays


def test_aggregated_stage_runs_m_times_and_syncs_when_blocking():
    calls, events = [], []

    class World:
        def barrier(self):
            events.append("barrier")

    class Backend:
        world = World()

        def synchronize(self):
            events.append("sync")

    stage = aggregated(Backend(), [lambda: calls.append(1)], 5, True)[0]
    stage()
    # nccl-tests -z 1 (src/common.cu startColl): wait for the collective, then a barrier of every rank
    assert len(calls) == 5 and events == ["sync", "barrier"] * 5
    plain = [lambda: None]
    assert aggregated(Backend(), plain, 1, False) is plain


@pytest.mark.parametrize("args, needle", [
    (["bench", "all_reduce", "-g", "2"], "one process per GPU here"),
    (["bench", "all_reduce", "-t", "4"], "one process per GPU here"),
    (["bench", "all_reduce", "-R", "1"], "registration"),
    (["bench", "all_reduce", "-m", "0"], "-m=0 is invalid"),
    (["bench", "all_reduce", "-m", "100000000000"], "-m=100000000000 is invalid: allowed 1 to 1,000,000"),
    (["bench", "all_reduce", "-G", "10000000"], "-G=10000000 is invalid: allowed 0 (no CUDA graph) or 1 to 1,000,000"),
    (["bench", "all_reduce", "-N", "0"], "forever is not supported"),
    (["bench", "all_reduce", "-z", "2"], "-z=2 is invalid"),
    (["bench", "all_reduce", "-G", "1", "--backend", "gloo"], "-G 1 needs --backend cupy-nccl"),
    (["bench", "all_reduce", "--cuda-graph", "--backend", "gloo"], "--cuda-graph needs --backend cupy-nccl"),
    (["sweep", "ci-small", "-g", "8"], "one process per GPU here"),
    (["sweep", "ci-small", "-n", "5"], "set them in its [defaults] or [[run]] tables"),
])
def test_refused_letters_are_one_line_with_why(args, needle):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert needle in text and "Traceback" not in text and "No such option" not in text


def test_help_lists_the_accepted_letters():
    text = " ".join(runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "200"}).output.split())
    for letter in ("-G", "-N", "-m", "-z", "-T"):
        assert letter in text


def test_interrupt_in_a_later_run_cycle_counts_the_earlier_cycles_points(tmp_path, monkeypatch):
    """-N: each cycle is its own launch; the interrupted line counted only the cycle it stopped, so a
    file holding a whole first cycle read '0 point(s) kept'."""
    import commbench.cli.bench as bench_cli
    from commbench.errors import Interrupted
    from commbench.measure.bench import BenchOutcome

    out = tmp_path / "ar.jsonl"
    cycles = []

    def fake_run(config, backends, nproc, timeout_s):
        cycles.append(1)
        if len(cycles) == 2:
            raise Interrupted(f"interrupted (SIGINT): 1 point(s) kept in {out}")
        return {0: BenchOutcome(num_points=3, num_wrong=0, error=None)}

    monkeypatch.setattr(bench_cli, "_run", fake_run)
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "32", "-N", "3",
                                 "-J", str(out)])
    assert result.exit_code == 130, result.output
    assert " ".join(result.output.split()) == (f"interrupted (SIGINT): 1 point(s) kept in {out}; also the 3 "
                                               "point(s) of the 1 cycle(s) before it (-N: cycle 2 of 3 stopped)")


def test_bench_help_lists_every_rs_impl_the_readme_names():
    """The README names duplex, the default on gloo; --help listed auto, native and pairwise only."""
    from collectives.grad_reduce_scatter import RS_IMPLS

    text = " ".join(runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "200"}).output.split())
    line = text[text.index("--rs-impl"):][:300]
    assert all(impl in line for impl in RS_IMPLS) and "duplex on gloo" in line, line


def test_N_summary_counts_every_cycles_points(tmp_path):
    """Probe Q 9: `bench -N 3` ended 'done: 2 point(s) measured' after writing 6 records (the last cycle's count)."""
    out = tmp_path / "rs.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "2", "-w", "0",
                                 "-N", "2", "-O", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    measured = [r for r in records(out) if r["record_type"] == "measurement"]
    assert len(measured) == 6
    assert f"done: 6 point(s) measured (3 per cycle x 2 cycles); records in {out}" in " ".join(result.output.split())
    single = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "2", "-w", "0",
                                 "-O", str(tmp_path / "one.jsonl")], env={"COLUMNS": "200"})
    assert "done: 3 point(s) measured; records in" in single.output, single.output
