"""`sweep --resume` does what `report` and its own dry run say (probe P3, session 45): it continues the file's last run
of the sweep, its dry run refuses the setup its launch refuses, a file older than sweep identities is refused saying
so, and an entry's in-place flag counts as measured (all_reduce's `in_place = true` is its default)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tests.results_files import invoke, records, write

SWEEP = ('[sweep]\nname = "t"\nbackend = "gloo"\nnproc = 2\n[defaults]\niters = 2\nwarmup_iters = 1\ntimeout_s = 30\n'
         '[[run]]\ncollective = "all_reduce"\nsizes = ["1K", "4K", "16K"]\n')


def _spec(tmp_path: Path, text: str = SWEEP, name: str = "t.toml"):
    from commbench.sweep import load_sweep

    (tmp_path / name).write_text(text)
    return load_sweep(str(tmp_path / name))


def _header(run_id: str, identity: str | None, **fields) -> dict:
    from commbench.results.records import RunHeader, to_dict

    return to_dict(RunHeader(run_id=run_id, started_at="2026-12-01T00:00:00+00:00",
                             argv=["commbench", "sweep", "t.toml", "-O", "out.jsonl"], commbench_version="0.1.0",
                             python_version="3", torch_version=None, nccl_version=None, cuda_version=None,
                             cupy_version=None, backend="gloo", world_size=2, hostnames=["h", "h"], devices=[],
                             nccl_env={}, launcher="local", sweep_identity=identity, planned_points=3, **fields))


def _point(run_id: str, point) -> dict:
    from commbench.results.records import Measurement, to_dict

    size_bytes = point.point.spec.size_bytes
    return to_dict(Measurement(run_id=run_id, collective="all_reduce", backend="gloo", size_bytes=size_bytes,
                               count=size_bytes // 4, dtype="float32", op="sum", in_place=True,
                               world_size=2, group_size=2, iters=2, warmup_iters=1, time_us_median=10.0,
                               point_key=point.key))


@pytest.fixture(autouse=True)
def _no_nccl_env(monkeypatch):
    for key in [k for k in os.environ if k.startswith("NCCL_")]:
        monkeypatch.delenv(key)


def _said(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.timeout(240)
def test_resume_measures_the_points_report_says_the_last_run_lacks(tmp_path, monkeypatch):
    # probe P3: (cat full.jsonl; head -5 full3.jsonl) > ab.jsonl: report said the second run 'holds 4 of 10 ...
    # `sweep --resume` into the same file measures them', and --resume answered 'nothing to do: all 10 point(s) are
    # already in' (exit 0), counting the first run's points: the advice did nothing
    from commbench.results.records import iter_records
    from commbench.results.resumed import sweeps_cut_short
    from commbench.sweep import plan_sweep
    from commbench.sweep.resume import sweep_identity

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    points = plan_sweep(spec, 2, backend="gloo")
    identity = sweep_identity(spec, 2, "gloo")
    whole = [_header("r1", identity)] + [_point("r1", p) for p in points]
    cut = [_header("r2", identity), _point("r2", points[0])]
    write(Path("out.jsonl"), whole + cut)
    said = " ".join(sweeps_cut_short(iter_records("out.jsonl")))
    assert "(run r2) holds 1 of the 3" in said and "into the same file measures them" in said, said
    result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    assert result.exit_code == 0 and "--resume: 1 of these point(s) are already in" in _said(result), _said(result)
    result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume")
    assert result.exit_code == 0 and "2 point(s) measured" in _said(result), _said(result)
    assert sweeps_cut_short(iter_records("out.jsonl")) == []   # the advice followed: a whole run
    assert "nothing to do" in _said(invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume"))


def test_report_says_how_to_complete_a_run_cut_short_before_a_later_one(tmp_path, monkeypatch):
    # the other order (the cut-short run first): --resume continues the later, whole run, so report's advice for the
    # earlier one must not be '--resume into the same file', which measures nothing; what it says instead works
    from commbench.results.records import iter_records
    from commbench.results.resumed import sweeps_cut_short
    from commbench.sweep import plan_sweep
    from commbench.sweep.resume import sweep_identity

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    points = plan_sweep(spec, 2, backend="gloo")
    identity = sweep_identity(spec, 2, "gloo")
    cut = [_header("r1", identity), _point("r1", points[0])]
    write(Path("out.jsonl"), cut + [_header("r2", identity)] + [_point("r2", p) for p in points])
    said = " ".join(sweeps_cut_short(iter_records("out.jsonl")))
    assert "(run r1) holds 1 of the 3" in said and "into the same file measures them" not in said, said
    assert "continues the file's later run r2 of this sweep, not this one: put this run's lines" in said, said
    result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    assert "--resume: 3 of these point(s)" in _said(result), _said(result)
    write(Path("alone.jsonl"), cut)   # the advice: the run's lines in a file of their own, resumed
    result = invoke("sweep", "t.toml", "-O", "alone.jsonl", "--resume", "--dry-run")
    assert result.exit_code == 0 and "--resume: 1 of these point(s)" in _said(result), _said(result)


def test_a_dry_run_refuses_the_setup_its_launch_refuses(tmp_path, monkeypatch):
    # probe P3: OMP_NUM_THREADS=2 `sweep --resume --dry-run` listed '7 ... would not be measured again' (exit 0) while
    # the launch refused it (torch threads 1 -> 2): --help says the dry run checks the file as the launch would
    from commbench.sweep import plan_sweep
    from commbench.sweep.resume import sweep_identity

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    points = plan_sweep(spec, 2, backend="gloo")
    part = [_header("r1", sweep_identity(spec, 2, "gloo"), torch_threads=[1, 1]), _point("r1", points[0])]
    write(Path("out.jsonl"), part)
    dry = ("sweep", "t.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    result = invoke(*dry)
    assert result.exit_code == 2, _said(result)
    assert ("--resume into 'out.jsonl' is refused: its run r1 was measured with another setup (torch threads on gloo: "
            "1 torch thread(s) per rank -> 2 torch thread(s) per rank, file -> this launch)") in _said(result)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")   # the NCCL_* settings that change the fabric, as the launch
    result = invoke(*dry)
    assert result.exit_code == 2 and "NCCL_P2P_DISABLE=1" in _said(result), _said(result)
    monkeypatch.delenv("NCCL_P2P_DISABLE")
    assert invoke(*dry).exit_code == 0
    # every point held: the launch starts no rank and says 'nothing to do' (no setup check): so does the dry run
    write(Path("out.jsonl"), part + [_point("r1", p) for p in points[1:]])
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    result = invoke(*dry)
    assert result.exit_code == 0 and "--resume: 3 of these point(s)" in _said(result), _said(result)


def test_a_file_older_than_sweep_identities_is_refused_saying_so(tmp_path, monkeypatch):
    # probe P3: a header without sweep_identity (older commbench) was refused as 'holds a run of `sweep t.toml`, not
    # this sweep', of the very sweep the file ran
    from commbench.sweep import plan_sweep

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    write(Path("out.jsonl"), [_header("r1", None), _point("r1", plan_sweep(spec, 2, backend="gloo")[0])])
    for dry in (("--dry-run",), ()):
        result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume", *dry)
        said = _said(result)
        assert result.exit_code == 2 and "Traceback" not in said, said
        assert ("its run r1 (`sweep t.toml`, commbench 0.1.0, started 2026-12-01T00:00:00+00:00) predates sweep "
                "identities: its header has no `sweep_identity` field") in said and "not this sweep" not in said, said
        assert "sweep into another -O/--out" in said, said


def test_in_place_true_on_all_reduce_is_its_default_on_resume(tmp_path, monkeypatch):
    # probe P3: `in_place = true` on all_reduce (in-place by default) was refused on --resume as 'all_reduce in_place
    # false -> true': the header's sweep_entries recorded in_place false for an in-place entry
    from commbench.results.records import RunHeader, from_dict
    from commbench.sweep import plan_sweep
    from commbench.sweep.identity_changes import identity_changes
    from commbench.sweep.resume import identity_entries, sweep_identity

    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    explicit = _spec(tmp_path, SWEEP + "in_place = true\n", "ip.toml")
    assert identity_entries(spec)[0]["in_place"] is True and identity_entries(spec)[0]["out_of_place"] is False
    assert sweep_identity(explicit, 2, "gloo") == sweep_identity(spec, 2, "gloo")
    point = plan_sweep(spec, 2, backend="gloo")[0]
    # a file the default sweep wrote, now and before the identity recorded the measured form (the flags as typed)
    for placement in ("measured", "typed"):
        write(Path("out.jsonl"), [_header("r1", sweep_identity(spec, 2, "gloo", placement=placement),
                                          sweep_entries=identity_entries(spec, placement)), _point("r1", point)])
        for toml in ("t.toml", "ip.toml"):
            result = invoke("sweep", toml, "-O", "out.jsonl", "--resume", "--dry-run")
            assert result.exit_code == 0 and "--resume: 1 of these point(s)" in _said(result), (toml, _said(result))
    # out_of_place = true is another measurement: refused, named as the form measured
    oop = _spec(tmp_path, SWEEP + "out_of_place = true\n", "oop.toml")
    result = invoke("sweep", "oop.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    assert result.exit_code == 2, _said(result)
    assert "changed (file -> this launch): all_reduce in_place true -> false, all_reduce out_of_place false -> true:" \
        in _said(result), _said(result)   # the file's typed (false, false) read as measured: in-place
    # an older header's sweep_entries (the flags as typed) against a launch that changed iters: iters alone named
    typed = identity_entries(spec, placement="typed")
    header = from_dict(_header("r1", "x", sweep_entries=typed))
    assert isinstance(header, RunHeader)
    more = dataclasses.replace(explicit, entries=tuple(dataclasses.replace(e, iters=5) for e in explicit.entries))
    changed = identity_changes(header, [(identity_entries(more), 2, "gloo")])
    assert changed == "; changed (file -> this launch): all_reduce iters 2 -> 5", changed
