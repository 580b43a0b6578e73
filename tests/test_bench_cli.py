"""`commbench bench` and `commbench env` through typer's CliRunner, and a hung rank's timeout."""

import json
import multiprocessing as mp
import os
import time

import pytest
from typer.testing import CliRunner

import collectives
from collectives.all_reduce import AllReduce
from commbench.measure.bench import BenchConfig, run_bench_rank
from commbench.cli.app import app
from commbench.results.records import from_dict
from commbench.results.nccl_tests_text import footer as nccl_tests_footer
from commbench.comm.launch import RankEnv
from commbench.measure.harness import LoopOptions
from tests.distributed import free_port

runner = CliRunner()


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bench_two_local_ranks_writes_header_and_one_record_per_size(tmp_path):
    out = tmp_path / "ar.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64K", "-f", "8",
                                 "-n", "5", "-w", "1", "-J", str(out)])
    assert result.exit_code == 0, result.output
    records = _lines(out)
    assert records[0]["record_type"] == "header"
    assert records[0]["world_size"] == 2 and records[0]["backend"] == "gloo"
    assert records[0]["launcher"] == "local" and len(records[0]["hostnames"]) == 2
    sizes = [r["size_bytes"] for r in records[1:]]
    assert sizes == [8, 64, 512, 4096, 32768]
    for rec in records[1:]:
        assert rec["num_wrong"] == 0 and rec["status"] == "ok"
        assert rec["time_us_min"] <= rec["time_us_median"] <= rec["time_us_max"]
        assert rec["time_us_p99"] is None  # 5 iterations: a p99 would be the max
        assert len(rec["iter_times_us"]) == 5 and max(rec["iter_times_us"]) == pytest.approx(rec["time_us_max"], abs=1e-3)
        loop = rec["loop_time_us"]
        assert set(loop) == {"avg", "rank0", "min", "max"} and loop["min"] <= loop["avg"] <= loop["max"]
        assert rec["algbw_gbps"] == pytest.approx(rec["size_bytes"] / rec["time_us_median"] / 1e3)
        assert rec["busbw_gbps"] == pytest.approx(rec["algbw_gbps"] * 2 * 1 / 2)


def test_single_rank_runs_in_process_and_nccl_tests_format(tmp_path):
    out = tmp_path / "bc.jsonl"
    result = runner.invoke(app, ["bench", "broadcast", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "3",
                                 "--format", "nccl-tests", "-J", str(out)])
    assert result.exit_code == 0, result.output
    assert "#       size         count      type   redop    root" in result.output
    assert "# Avg bus bandwidth" in result.output
    assert "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096" in result.output and "warmup iters: 5 iters: 3" in result.output
    assert "#  Rank  0 Group  0" in result.output and "(-a 1)" in result.output
    assert len(_lines(out)) == 1 + 3 * 2  # out-of-place and in-place per size, as nccl-tests
    assert "# Collective test concluded: broadcast_perf" in result.output
    table = runner.invoke(app, ["bench", "broadcast", "--nproc", "1", "-b", "1K", "-e", "4K", "-n", "3",
                                "-O", str(tmp_path / "table.jsonl")], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.output
    rows = [from_dict(r) for r in _lines(tmp_path / "table.jsonl") if r["record_type"] == "measurement"]
    assert nccl_tests_footer(rows, "broadcast")[1] + "(GB/s, measured; nccl-tests' figure" in table.output  # its closing line
    final = table.output.split("(measured")[1]  # without a terminal: nccl-tests' rows first, the table last
    assert "redop" not in final and "┃ point" not in final  # broadcast has no reduction


@pytest.mark.parametrize("args,needle", [
    (["bench", "nope"], "collective='nope'"),
    (["bench", "all_reduce", "-b", "0"], "--min-bytes"),
    (["bench", "all_reduce", "-b", "-8"], "--min-bytes"),
    (["bench", "all_reduce", "-b", "1M", "-e", "1K"], "--min-bytes"),
    (["bench", "all_reduce", "-f", "0.5"], "--step-factor"),
    (["bench", "all_reduce", "-d", "float7"], "--dtype"),
    (["bench", "all_reduce", "-o", "xor"], "--op"),
    (["bench", "all_reduce", "-o", "avg", "-d", "int32"], "not possible on gloo"),
    (["bench", "all_reduce", "--nproc", "0"], "--nproc=0"),
    (["bench", "all_reduce", "--nproc", "10000"], "--nproc=10000"),
    (["bench", "sendrecv", "--nproc", "1"], "at least 2 ranks"),
    # a sub-group of 1 rank failed mid-run on gloo (a pair never connected) after the world's 2 were accepted
    (["bench", "sendrecv", "--nproc", "2", "--group-sizes", "1,2"], "--group-sizes 1"),
    (["bench", "all_to_all", "--in-place"], "--in-place"),
    (["bench", "all_reduce", "--in-place", "--out-of-place"], "--out-of-place"),
    (["bench", "all_reduce", "--backend", "mpi"], "--backend"),
    (["bench", "all_reduce", "--format", "csv"], "--format"),
    (["bench", "all_reduce", "-c", "2"], "--check"),
    (["bench", "broadcast", "--nproc", "2", "-r", "5"], "--root"),
    # --compare-backends measured every point on the whole world: sub-groups asked for were dropped unsaid
    (["bench", "all_reduce", "--compare-backends", "torch-nccl,cupy-nccl", "--group-sizes", "2"], "--group-sizes"),
    # a root outside the measured sub-groups (ranks of a group are 0..g-1) was taken modulo g: -r 3 measured root 1
    (["bench", "broadcast", "--nproc", "4", "--group-sizes", "2,4", "-r", "3"], "--root=3"),
    # moe_all_to_all is swept by --tokens and sends --dispatch-dtype rows: size and dtype letters were ignored
    (["bench", "moe_all_to_all", "-b", "8"], "--min-bytes"),
    (["bench", "moe_all_to_all", "-e", "1M"], "--max-bytes"),
    (["bench", "moe_all_to_all", "-f", "4"], "--step-factor"),
    (["bench", "moe_all_to_all", "-i", "1K"], "--step-bytes"),
    (["bench", "moe_all_to_all", "-d", "int8"], "--dtype"),
    # an empty entry was dropped: 16,,8 measured 16 and 8 with nothing said
    (["bench", "moe_all_to_all", "--tokens", "16,,8"], "--tokens='16,,8' is invalid: an empty entry (entry 2)"),
    (["bench", "moe_all_to_all", "--tokens", "16,"], "an empty entry"),
    # the other comma lists dropped an empty entry too (commbench.repeats.comma_entries refuses it for all)
    (["bench", "grad_reduce_scatter", "--algorithm", "flat,,hierarchical"], "--algorithm='flat,,hierarchical' is "
                                                                             "invalid: an empty entry (entry 2)"),
    (["bench", "all_reduce", "--group-sizes", "2", "--group-layout", "contiguous,"], "--group-layout='contiguous,' is "
                                                                                     "invalid: an empty entry"),
    (["bench", "all_reduce", "--nccl-algo", "ring,,tree"], "--nccl-algo='ring,,tree' is invalid: an empty entry"),
    (["bench", "all_reduce", "--compare-backends", "gloo,,nccl"], "--compare-backends='gloo,,nccl' is invalid: an "
                                                                   "empty entry"),
    (["bench", "moe_all_to_all", "-d", "float32"], "--dispatch-dtype"),
    (["bench", "all_reduce", "--algorithm", "flat"], "no named algorithms"),
    (["bench", "grad_reduce_scatter", "--algorithm", "tree"], "--algorithm"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_nccl_unavailable_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = runner.invoke(app, ["bench", "all_reduce", "--backend", "nccl"])
    assert result.exit_code == 2 and "not available" in result.output


def test_env_reports_the_backend_choice():
    result = runner.invoke(app, ["env"])
    assert result.exit_code == 0
    assert "a run would use" in result.output and "backend gloo" in result.output


class _Faulty(AllReduce):
    """all_reduce whose `fault(comm)` runs before the stage at sizes >= 1 KiB (a fault injected on some rank)."""

    def fault(self, comm) -> None:
        raise NotImplementedError

    def prepare(self, comm, backend, spec):
        prepared = super().prepare(comm, backend, spec)
        name, stage = prepared.stages[0]

        def faulty():
            if spec.size_bytes >= 1024:
                self.fault(comm)
            stage()

        prepared.stages = [(name, faulty)]
        return prepared


class _HangsOnRank1(_Faulty):
    """Rank 1 stalls past the timeout (a hung rank)."""

    name = "all_reduce_hang"

    def fault(self, comm) -> None:
        if comm.rank == 1:
            time.sleep(4)


def _rank(rank, port, config, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    collectives.REGISTRY[_HangsOnRank1.name] = _HangsOnRank1()
    env = RankEnv(rank=rank, world_size=2, local_rank=rank, launcher="single", master_addr="127.0.0.1", master_port=port)
    try:
        queue.put((rank, run_bench_rank(env, config).error))
    except Exception as exc:  # noqa: BLE001
        queue.put((rank, f"raised {exc!r}"))


def test_hung_rank_times_out_names_the_size_and_keeps_results(tmp_path):
    out = tmp_path / "hang.jsonl"
    config = BenchConfig(collective=_HangsOnRank1.name, sizes_bytes=(64, 256, 1024, 4096), backend="gloo",
                         timeout_s=2.0, output_path=str(out), output_format="nccl-tests",
                         loop=LoopOptions(iters=2, warmup_iters=0, check=False))
    collectives.REGISTRY[_HangsOnRank1.name] = _HangsOnRank1()
    try:
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_rank, args=(r, port, config, queue), daemon=True) for r in range(2)]
        for proc in procs:
            proc.start()
        errors = dict(queue.get(timeout=60) for _ in range(2))
        for proc in procs:
            proc.join(timeout=10)
    finally:
        del collectives.REGISTRY[_HangsOnRank1.name]
    assert "1024 B" in errors[0] or "1 KiB" in errors[0]
    records = _lines(out)
    assert [r["status"] for r in records[1:]] == ["ok"] * 4 + ["failed"]  # both placements per size (nccl-tests format)
    assert records[-1]["size_bytes"] == 1024 and records[-1]["error"]


def test_moe_experts_are_checked_against_the_measured_group_sizes(tmp_path):
    out = tmp_path / "moe.jsonl"
    common = ["bench", "moe_all_to_all", "--nproc", "4", "--experts", "6", "--top-k", "2", "--tokens", "16",
              "-n", "2", "-w", "0", "-J", str(out)]
    refused = runner.invoke(app, common + ["--group-sizes", "2,4"])
    assert refused.exit_code == 2 and "expert-parallel size (4)" in refused.output
    # 6 experts do not divide the 4-rank world, but they divide the EP groups of 2 that are measured
    result = runner.invoke(app, common + ["--group-sizes", "2"])
    assert result.exit_code == 0, result.output
    (record,) = [r for r in _lines(out) if r["record_type"] == "measurement"]
    assert record["group_size"] == 2 and record["params"]["ep_size"] == 2 and record["num_wrong"] == 0


def test_sizes_moved_or_merged_by_alignment_are_stated(tmp_path):
    """reduce_scatter on 3 ranks, -b 4 -e 64: 5 sizes measured as 12, 12, 12, 24 and 48 B (nccl-tests' 16 B per
    rank trim; below it nccl-tests runs 0 elements, commbench one untrimmed chunk) were 3 rows with nothing said.
    The run's header (JSONL and screen) now says which sizes moved and how many points they gave."""
    out = tmp_path / "rs.jsonl"
    result = runner.invoke(app, ["bench", "reduce_scatter", "--nproc", "3", "-b", "4", "-e", "64", "-n", "2", "-w", "0",
                                 "-O", str(out)])
    assert result.exit_code == 0, result.output
    header, *records = _lines(out)
    assert [r["size_bytes"] for r in records] == [12, 24, 48]
    notes = [n for n in header["notes"] if "aligned as nccl-tests" in n]
    assert len(notes) == 1, header["notes"]
    assert "5 size(s) give 3 point(s) on 3 ranks" in notes[0] and "4 B -> 12 B" in notes[0] and "32 B -> 24 B" in notes[0]
    assert "0 elements" in notes[0]  # 4..32 B: nccl-tests would run none
    exact = tmp_path / "ar.jsonl"
    assert runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                               "-O", str(exact)]).exit_code == 0
    assert not [n for n in _lines(exact)[0]["notes"] if "aligned" in n]


def test_moe_buffers_that_cannot_fit_are_refused_before_launch(tmp_path):
    """moe_all_to_all's buffers (tokens x top-k rows of hidden channels per rank) escaped the memory check, which
    only saw the size range it does not use: --hidden 1000000000 launched the ranks and failed inside them."""
    out = tmp_path / "moe.jsonl"
    result = runner.invoke(app, ["bench", "moe_all_to_all", "--nproc", "2", "--experts", "4", "--top-k", "2",
                                 "--tokens", "16,1000", "--hidden", "1000000000", "-O", str(out)])
    assert result.exit_code == 2, result.output
    assert "--tokens 1000" in result.output and "too large here" in result.output and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("typed, recorded", [("SUM", "sum"), ("Max", "max")])
def test_op_is_read_in_either_case_as_dtype_is(tmp_path, typed, recorded):
    """-o SUM (as nccl-tests users type it) was refused while -d FLOAT was read: the op takes either case too."""
    out = tmp_path / "ar.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "64", "-f", "8", "-n", "2",
                                 "-w", "1", "-o", typed, "-O", str(out), "--timeout", "60"])
    assert result.exit_code == 0, result.output
    assert {r["op"] for r in _lines(out)[1:]} == {recorded}


def test_an_unknown_op_is_one_line_naming_the_value_and_the_allowed_ones(tmp_path):
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-o", "Mean", "-O", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --op='Mean' is invalid: allowed: sum, prod, max, min, avg (either case)"


class _RaisesOnLastRank(_Faulty):
    """The last rank raises at once (its peers then lose the connection)."""

    name = "all_reduce_raises_last"

    def fault(self, comm) -> None:
        if comm.rank == comm.size - 1:
            raise RuntimeError("injected: this rank's own failure")


def test_the_error_line_names_the_rank_that_failed_first(tmp_path):
    """4 local ranks, rank 3 raised at 1 KiB: the line was rank 0's symptom, 'error: failed while measuring 1 KiB:
    [.../pair.cc:553] Connection closed by peer [127.0.0.1]:39054. This is typically caused by a remote worker
    crashing...', and rank 3's own error was printed nowhere, nor written in the failed record. The line and the
    record now give the first failure and its rank."""
    out = tmp_path / "fail.jsonl"
    collectives.REGISTRY[_RaisesOnLastRank.name] = _RaisesOnLastRank()
    try:
        result = runner.invoke(app, ["bench", _RaisesOnLastRank.name, "--nproc", "4", "-b", "256", "-e", "4K", "-f", "4",
                                     "-n", "2", "-w", "0", "-T", "5", "-O", str(out)])
    finally:
        del collectives.REGISTRY[_RaisesOnLastRank.name]
    assert result.exit_code == 1, result.output
    line = result.output.strip().splitlines()[-1]
    assert "rank 3 failed first: failed while measuring 1 KiB: injected: this rank's own failure" in " ".join(
        result.output.split()), result.output
    assert line.count("error:") <= 1
    records = _lines(out)[1:]
    assert [r["status"] for r in records] == ["ok", "failed"]
    # the record (rank 0 writes it) leads with the cause too, then rank 0's own symptom
    assert records[1]["error"].startswith("failed while measuring 1 KiB: rank 3 failed first: injected: this rank's "
                                          "own failure (then rank 0: ")


@pytest.mark.parametrize("args, needle", [
    (["-d", ""], "--dtype='' is invalid"),
    (["--group-sizes", ""], "--group-sizes='' is invalid"),
    (["--group-layout", ""], "--group-layout='' is invalid"),
    (["--group-layout", ","], "--group-layout=',' is invalid"),
])
def test_a_given_empty_option_is_refused_not_read_as_its_default(tmp_path, args, needle):
    """-d '' measured float32, --group-sizes '' pow2 and --group-layout '' contiguous: only an option left out takes
    its default (probe U, session 33)."""
    out = tmp_path / "x.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "1K", "-e", "1K", "-n", "1", *args,
                                 "-O", str(out)])
    assert result.exit_code == 2 and needle in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_a_given_empty_moe_preset_is_refused(tmp_path):
    result = runner.invoke(app, ["bench", "moe_all_to_all", "--nproc", "2", "--preset", "", "--tokens", "8",
                                 "-O", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "--preset='' is invalid" in result.output, result.output


@pytest.mark.parametrize("args, needle", [
    (["all_gather", "-o", "max"], "--op='max' is invalid: all_gather does not reduce"),
    (["all_to_all", "--op", "sum"], "--op='sum' is invalid: all_to_all does not reduce"),
    (["moe_all_to_all", "-o", "sum", "--tokens", "8"], "--op='sum' is invalid: moe_all_to_all does not reduce"),
    (["all_reduce", "-r", "1"], "--root=1 is invalid: all_reduce has no root"),
    (["all_gather", "--root", "0"], "--root=0 is invalid: all_gather has no root"),
])
def test_an_op_or_root_the_collective_does_not_take_is_refused_as_a_sweep_refuses_it(tmp_path, args, needle):
    """bench accepted -o on collectives that do not reduce and -r on those without a root and measured as if they were
    not given, while a sweep file's op / root is refused (probe U, session 33): one rule now, Collective.refuse_unused."""
    out = tmp_path / "x.jsonl"
    result = runner.invoke(app, ["bench", *args, "--nproc", "2", "-b", "1K", "-e", "1K", "-n", "1", "-O", str(out)])
    assert result.exit_code == 2 and needle in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_op_and_root_are_taken_where_the_collective_has_them(tmp_path):
    out = tmp_path / "r.jsonl"
    result = runner.invoke(app, ["bench", "reduce", "--nproc", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                                 "-o", "MAX", "-r", "1", "-O", str(out)])
    assert result.exit_code == 0, result.output
    (record,) = _lines(out)[1:]
    assert record["op"] == "max" and record["num_wrong"] == 0 and record["params"]["root"] == 1


def test_step_factor_1_alone_runs_nccl_tests_1_mib_steps(tmp_path):
    """`bench ... -f 1` exited 2 ('-f 1 -i SIZE'), yet nccl-tests' defaults are stepFactor 1 and stepBytes 1 MiB
    (src/common.cu v2.19.6 :94-95; its loop adds stepBytes when stepFactor is not > 1, :936): a pasted nccl-tests
    command now measures its sizes and its banner's step."""
    out = tmp_path / "f1.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1M", "-e", "3M", "-f", "1", "-n", "1",
                                 "-w", "0", "--format", "nccl-tests", "-O", str(out)])
    assert result.exit_code == 0, result.output
    assert "step: 1048576(bytes)" in result.output
    sizes = [r["size_bytes"] for r in _lines(out) if r["record_type"] == "measurement"]
    assert sorted(set(sizes)) == [1 << 20, 2 << 20, 3 << 20]


@pytest.mark.parametrize("args", [["all_reduce", "--nproc", "0"], ["moe_all_to_all", "--experts", "7"],
                                  ["moe_all_to_all", "--top-k", "0"]])
def test_a_refused_run_does_not_first_announce_appending_to_out(tmp_path, args):
    """A refused bench printed 'note: --out=FILE already holds results: this run is appended ...' and then its exit-2
    error (found from outside: --nproc 0, --experts 7, --top-k 0 onto a results file): the checks run_job makes before
    its ranks start (comm.job.check_job) now come before the note."""
    from tests.results_files import COMPARE

    out = tmp_path / "held.jsonl"
    out.write_bytes(next(COMPARE.glob("*.jsonl")).read_bytes())
    result = runner.invoke(app, ["bench", *args, "-O", str(out)])
    assert result.exit_code == 2, result.output
    assert "already holds results" not in result.output and result.output.startswith("error: "), result.output


def test_markdown_says_the_runs_notes_on_stderr(tmp_path):
    """`--format markdown` printed none of the run header's notes: `--tokens 16,16` measured one point with nothing
    said (the table and nccl-tests formats print the repeat note). They now go to stderr, as its `done` line does."""
    result = runner.invoke(app, ["bench", "moe_all_to_all", "--nproc", "1", "--tokens", "16,16", "--hidden", "64",
                                 "--experts", "4", "--top-k", "2", "-n", "1", "-w", "0", "--format", "markdown",
                                 "-O", str(tmp_path / "md.jsonl")], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "note: --tokens lists 16 more than once: each point is measured once" in result.stderr
    assert "note:" not in result.stdout
