"""report and the runs of its files: a resumed sweep is one curve and one table (as `compare` counts it), runs
of other hosts, NCCL versions, devices or world sizes are curves and tables of their own, labelled by what
differs, and the NCCL tuning winners never set one system's NCCL default against another's combination."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.results.records import JsonlWriter, Measurement, RunHeader

KIB = 1024


def header(run_id, *, hosts=("h1",), nccl="2.27.3", sweep="s1", world=2, devices=("NVIDIA H100",), env=None,
           resumes=None):
    return RunHeader(run_id=run_id, started_at="2026-01-01T00:00:00+00:00", argv=["commbench", "sweep"],
                     commbench_version="0", python_version="3", torch_version=None, nccl_version=nccl,
                     cuda_version=None, cupy_version=None, backend="nccl", world_size=world,
                     hostnames=[hosts[i % len(hosts)] for i in range(world)], devices=list(devices) * world,
                     nccl_env=env or {}, launcher="torchrun", sweep_identity=sweep,
                     resumes_run_id=resumes)


def point(run_id, size, time_us, *, world=2, group=None, params=None, collective="all_reduce"):
    algbw, group = size / time_us / 1e3, group or world
    return Measurement(run_id=run_id, collective=collective, backend="nccl", size_bytes=size, count=size // 4,
                       dtype="float32", op="sum", in_place=False, world_size=world, group_size=group,
                       group_layout="world" if group == world else "contiguous", num_groups=world // group, iters=20,
                       warmup_iters=5, time_us_median=time_us, time_us_mean=time_us, time_us_min=time_us * 0.99,
                       time_us_p99=time_us * 1.01, algbw_gbps=algbw, busbw_gbps=algbw * 2 * (group - 1) / group,
                       num_wrong=0, params=params or {}, point_key=f"{collective}-{size}-{params}")


def write(path, runs, group=None):
    """runs: [(header, [(size, time_us), ...])]"""
    with JsonlWriter(path) as writer:
        for head, sizes in runs:
            writer.write(head)
            for size, time_us in sizes:
                writer.write(point(head.run_id, size, time_us, world=head.world_size, group=group))
    return str(path)


def report(tmp_path, *files, monkeypatch=None):
    """(CLI output, README.md, {figure title: [curve label, ...]}) of `commbench report FILES` (into rep-STEM)."""
    import commbench.results.report as module

    drawn: dict[str, list[str]] = {}
    if monkeypatch is not None:
        monkeypatch.setattr(module, "busbw_figure",
                            lambda title, curves, note: drawn.setdefault(title, [c.label for c in curves]))
        monkeypatch.setattr(module, "latency_figure", lambda *args: None)
        monkeypatch.setattr(module, "save", lambda fig, stem, formats: [])
    out = tmp_path / f"rep-{Path(files[0]).stem}"
    result = CliRunner().invoke(app, ["report", *files, "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return result.output, (out / "README.md").read_text(), drawn


def titles(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("all_reduce — ")]


def test_a_resumed_sweep_is_one_curve_and_one_table(tmp_path, monkeypatch):
    """Killed after 2 KiB and resumed (`sweep --resume`: a new header and run id holding only the rest): one
    run of the sweep, drawn as one line of four points and tabled once, as `compare` counts it."""
    path = write(tmp_path / "resumed.jsonl", [(header("first"), [(KIB, 10.0), (2 * KIB, 11.0)]),
                                              (header("resumed", resumes="first"), [(4 * KIB, 12.0), (8 * KIB, 13.0)])])
    output, md, drawn = report(tmp_path, path, monkeypatch=monkeypatch)
    assert drawn == {"all_reduce": ["nccl float32 n=2"]}, drawn
    assert titles(output) == ["all_reduce — nccl float32 n=2 (measured)"], output
    assert md.count("### nccl float32 n=2") == 1 and md.count("| 4 KiB |") == 1 and md.count("| 1 KiB |") == 1, md


def test_runs_of_other_hosts_nccl_versions_or_world_sizes_are_apart_and_say_what_differs(tmp_path, monkeypatch):
    """Two complete runs of one sweep on two hosts (appended into one file), and a sweep 'resumed' on another
    NCCL version: never one table of doubled sizes or one line, each labelled by what differs."""
    sizes = [(KIB, 10.0), (2 * KIB, 11.0)]
    hosts = write(tmp_path / "hosts.jsonl", [(header("a", hosts=("h1",)), sizes), (header("b", hosts=("h2",)), sizes)])
    output, md, drawn = report(tmp_path, hosts, monkeypatch=monkeypatch)
    assert drawn["all_reduce"] == ["nccl float32 n=2 (hosts h1)", "nccl float32 n=2 (hosts h2)"], drawn
    assert titles(output) == ["all_reduce — nccl float32 n=2 (hosts h1) (measured)",
                              "all_reduce — nccl float32 n=2 (hosts h2) (measured)"], output
    assert md.count("| 1 KiB |") == 2 and "### nccl float32 n=2 (hosts h2)" in md, md

    versions = write(tmp_path / "versions.jsonl", [(header("old"), sizes),
                                                   (header("new", nccl="2.21.5", resumes="old"), [(4 * KIB, 12.0)])])
    _, md, drawn = report(tmp_path, versions, monkeypatch=monkeypatch)
    assert drawn["all_reduce"] == ["nccl float32 n=2 (NCCL 2.27.3)", "nccl float32 n=2 (NCCL 2.21.5)"], drawn

    # groups of 2 ranks in a world of 4 and of 8: one series key, two runs
    worlds = write(tmp_path / "worlds.jsonl", [(header("w4", world=4), sizes), (header("w8", world=8), sizes)], group=2)
    _, md, drawn = report(tmp_path, worlds, monkeypatch=monkeypatch)
    assert drawn["all_reduce"] == ["nccl float32 n=2 contiguous (world size 4)",
                                   "nccl float32 n=2 contiguous (world size 8)"], drawn


def test_repeats_of_one_setup_are_apart_by_run_id(tmp_path, monkeypatch):
    sizes = [(KIB, 10.0), (2 * KIB, 11.0)]
    path = write(tmp_path / "again.jsonl", [(header("one", sweep=None), sizes), (header("two", sweep=None), sizes)])
    output, _, drawn = report(tmp_path, path, monkeypatch=monkeypatch)
    assert drawn["all_reduce"] == ["nccl float32 n=2 (run one)", "nccl float32 n=2 (run two)"], drawn
    assert len(titles(output)) == 2, output


DEFAULT, RING_LL = TuningCombo(), TuningCombo(algo="ring", proto="ll", channels=16)


def tuned(path, runs):
    """runs: [(header, combo, time_us)], each at 1 KiB and 4 KiB on 4 ranks."""
    with JsonlWriter(path) as writer:
        for head, combo, time_us in runs:
            writer.write(head)
            for size in (KIB, 4 * KIB):
                writer.write(point(head.run_id, size, time_us, world=4, params=combo.params()))
    return str(path)


def test_tuning_winners_never_set_one_nccl_version_or_host_against_another(tmp_path):
    """NCCL 2.27's default (40 µs) 'beaten' 4x by ring/LL measured with NCCL 2.21 is no winner: a table per
    NCCL version, each titled by it, and a note naming the runs; so for hosts. One system: one table as before."""
    versions = tuned(tmp_path / "versions.jsonl", [(header("old", world=4, sweep=None), DEFAULT, 40.0),
                                                   (header("new", world=4, nccl="2.21.5", sweep=None), RING_LL, 10.0)])
    output, md, _ = report(tmp_path, versions)
    assert "4.00x" not in output and "4.00x" not in md, output
    assert "NCCL tuning winners (measured): allreduce, 1 node(s), 4 rank(s) — NCCL 2.27.3" in output
    for text in (output, md):
        assert "mix NCCL versions (NCCL 2.21.5: run new; NCCL 2.27.3: run old)" in " ".join(text.split()), text
    assert "### allreduce, 1 node(s), 4 rank(s) — NCCL 2.21.5" in md, md

    both = [(header(f"{host}-{combo.label}", hosts=(host,), world=4, sweep=None), combo, time_us)
            for host, fast in (("h1", 10.0), ("h2", 30.0)) for combo, time_us in ((DEFAULT, 40.0), (RING_LL, fast))]
    output, md, _ = report(tmp_path, tuned(tmp_path / "hosts.jsonl", both))
    assert "| 1 KiB | 40.00 | ring/ll/16 | 10.00 | 4.00x |" in md and "| 1 KiB | 40.00 | ring/ll/16 | 30.00 | 1.33x |" in md
    assert "### allreduce, 1 node(s), 4 rank(s) — hosts h2" in md and "hosts h1: run h1-NCCL default, h1-ring/ll/16" in md
    assert sorted(p.name for p in (tmp_path / "rep-hosts").glob("nccl-tuning-*.png")) == [
        "nccl-tuning-allreduce-1n-4r-system1.png", "nccl-tuning-allreduce-1n-4r-system2.png"]

    one = tuned(tmp_path / "one.jsonl", both[:2])
    output, md, _ = report(tmp_path, one)
    assert "NCCL tuning winners (measured): allreduce, 1 node(s), 4 rank(s)\n" in output and "mix" not in output


def test_curves_of_a_tuning_sweep_or_other_workload_params_are_told_apart(tmp_path, monkeypatch):
    """Each NCCL combination of a tuning sweep is its own curve; they were all labelled "nccl float32 n=4",
    legend entries and table titles alike. A param no label shows (broadcast's root) is named where it differs."""
    one = tuned(tmp_path / "one.jsonl", [(header("d", world=4, sweep=None), DEFAULT, 40.0),
                                         (header("r", world=4, sweep=None), RING_LL, 10.0)])
    output, md, drawn = report(tmp_path, one, monkeypatch=monkeypatch)
    assert drawn["all_reduce"] == ["nccl float32 n=4 NCCL default", "nccl float32 n=4 NCCL ring/ll/16"], drawn
    assert titles(output) == ["all_reduce — nccl float32 n=4 NCCL default (measured)",
                              "all_reduce — nccl float32 n=4 NCCL ring/ll/16 (measured)"], output
    assert "### nccl float32 n=4 NCCL ring/ll/16" in md, md

    path = tmp_path / "roots.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(header("b", sweep=None))
        for root in (0, 1):
            writer.write(point("b", KIB, 10.0, params={"root": root}, collective="broadcast"))
    _, md, drawn = report(tmp_path, str(path), monkeypatch=monkeypatch)
    assert drawn["broadcast"] == ["nccl float32 n=2 root=0", "nccl float32 n=2 root=1"], drawn


def test_a_run_in_two_files_is_read_once_and_said(tmp_path, monkeypatch):
    """The same file given twice, or a copy taken mid-run (the run went on writing the original): every size was
    tabled twice and drawn as one zig-zag line; now each point once, with a note naming the run and files."""
    sizes = [(KIB, 10.0), (2 * KIB, 11.0)]
    copy = write(tmp_path / "copy.jsonl", [(header("x"), sizes)])
    whole = write(tmp_path / "whole.jsonl", [(header("x"), sizes + [(4 * KIB, 12.0)])])
    output, md, drawn = report(tmp_path, copy, copy, monkeypatch=monkeypatch)
    assert md.count("| 1 KiB |") == 1 and titles(output) == ["all_reduce — nccl float32 n=2 (measured)"], md
    note = " ".join(output.split())
    assert f"note: 2 point(s) of {copy} were read from {copy} already (run x: the same run in both files)" in note
    output, md, drawn = report(tmp_path, copy, whole, monkeypatch=monkeypatch)
    assert md.count("| 1 KiB |") == 1 and md.count("| 4 KiB |") == 1 and drawn == {"all_reduce": ["nccl float32 n=2"]}
