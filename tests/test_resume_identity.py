"""`sweep --resume` resumes only the measurements it would make: a routing trace by its bytes (trace_sha256), not its
path; a refusal names the settings that changed; a timeout, which changes no measured point, is no change."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.results_files import invoke, records, write

SWEEP = ('[sweep]\nname = "t"\nbackend = "gloo"\nnproc = 2\n[defaults]\niters = 3\nwarmup_iters = 1\ntimeout_s = 30\n'
         '[[run]]\ncollective = "moe_all_to_all"\ntokens_per_rank = [16, 32]\nhidden = 16\nnum_experts = 4\ntop_k = 2\n'
         'routing = "trace:trace.npy"\n')


def _trace(path: Path, skew: bool) -> None:
    """64 tokens' top-2 of 4 experts: spread over every pair, or all on experts 0 and 1."""
    pairs = [[0, 1]] * 64 if skew else [[i % 4, (i + 1) % 4] for i in range(64)]
    np.save(path, np.array(pairs, dtype=np.int64))


def _earlier_identity(spec, world_size: int = 2, backend: str = "gloo") -> str:
    """The sweep identity commbench wrote before trace digests counted (commit 0c553730 sweep/resume.py): the
    entries but their index and name, sorted, timeout_s in, the trace by its path, hashed with world size and backend."""
    import dataclasses
    import hashlib

    entries = sorted(json.dumps({k: v for k, v in dataclasses.asdict(e).items() if k not in ("index", "name")},
                                sort_keys=True, default=str) for e in spec.entries)
    blob = json.dumps({"entries": [json.loads(e) for e in entries], "world_size": world_size, "backend": backend},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _digest(path: Path) -> str:
    from commbench.moe.routing import trace_sha256
    return trace_sha256(str(path))


@pytest.mark.timeout(240)
def test_a_resume_on_another_trace_is_refused_naming_both_digests(tmp_path, monkeypatch):
    # probe P3: a sweep measured on trace_orig.npy copied to trace.npy, then trace_skew.npy copied over it and the
    # sweep resumed: 'nothing to do: all 6 point(s) are already in t3.jsonl', exit 0 (and a half-run file resumed so
    # held two routings' points): the identity and the point keys hashed the path, never the trace's bytes
    monkeypatch.chdir(tmp_path)
    Path("t.toml").write_text(SWEEP)
    _trace(Path("trace.npy"), skew=False)
    orig = _digest(Path("trace.npy"))
    result = invoke("sweep", "t.toml", "-O", "out.jsonl")
    assert result.exit_code == 0, result.output
    whole = records(Path("out.jsonl"))
    assert {r["params"]["trace_sha256"] for r in whole[1:]} == {orig}
    _trace(Path("trace.npy"), skew=True)
    skew = _digest(Path("trace.npy"))
    for held in (whole, whole[:2]):   # every point held, or a half-run sweep
        write(Path("out.jsonl"), held)
        before = Path("out.jsonl").read_text()
        for dry in ((), ("--dry-run",)):
            result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume", *dry)
            said = " ".join(result.output.split())
            assert result.exit_code == 2, said
            assert (f"--resume into 'out.jsonl' is refused: run[0] (moe_all_to_all) routes by trace:trace.npy (read as "
                    f"{tmp_path / 'trace.npy'}), whose bytes now have trace_sha256 {skew}, but the file's "
                    f"{len(held) - 1} point(s) of it were measured on trace_sha256 {orig}: restore that trace file"
                    ) in said and "another -O/--out" in said and "Traceback" not in said, said
            assert Path("out.jsonl").read_text() == before   # nothing measured
    # the same relative path from another folder holding another trace: refused as well
    other = tmp_path / "other"
    other.mkdir()
    _trace(other / "trace.npy", skew=True)
    monkeypatch.chdir(other)
    result = invoke("sweep", str(tmp_path / "t.toml"), "-O", str(tmp_path / "out.jsonl"), "--resume")
    assert result.exit_code == 2 and f"read as {other / 'trace.npy'}" in " ".join(result.output.split())
    # the trace restored: the half-run sweep resumes, one trace in the file, one sweep identity
    monkeypatch.chdir(tmp_path)
    _trace(Path("trace.npy"), skew=False)
    result = invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume")
    assert result.exit_code == 0, result.output
    resumed = records(Path("out.jsonl"))
    assert len(resumed) == 4 and {r["params"]["trace_sha256"] for r in resumed if "params" in r} == {orig}
    assert resumed[0]["sweep_identity"] == resumed[2]["sweep_identity"]


def _header(run_id: str, identity: str) -> dict:
    from commbench.results.records import RunHeader, to_dict
    return to_dict(RunHeader(run_id=run_id, started_at="2026-12-01T00:00:00+00:00", argv=["commbench", "sweep"],
                             commbench_version="0", python_version="3", torch_version=None, nccl_version=None,
                             cuda_version=None, cupy_version=None, backend="gloo", world_size=2,
                             hostnames=["h", "h"], devices=[], nccl_env={}, launcher="local", sweep_identity=identity))


def _point(run_id: str, key: str, **params) -> dict:
    from commbench.results.records import Measurement, to_dict
    return to_dict(Measurement(run_id=run_id, collective="moe_all_to_all", backend="gloo", size_bytes=1024, count=256,
                               dtype="float32", op="sum", in_place=False, world_size=2, group_size=2, iters=3,
                               warmup_iters=1, time_us_median=10.0, point_key=key,
                               params={"routing": "trace:trace.npy", **params}))


def test_a_file_an_earlier_commbench_wrote_resumes_where_its_trace_is_unchanged(tmp_path, monkeypatch):
    # a file written before the digest counted (its header's identity hashed the path, and timeout_s): resumed while
    # its records' trace_sha256 is the trace's now; refused once the trace changed, or where its measured records
    # carry no digest (written before trace_sha256 existed: which trace they replayed cannot be told)
    from commbench.sweep import load_sweep, plan_sweep

    monkeypatch.chdir(tmp_path)
    Path("t.toml").write_text(SWEEP)
    _trace(Path("trace.npy"), skew=False)
    spec = load_sweep("t.toml")
    first = plan_sweep(spec, 2, backend="gloo")[0].key
    earlier = _earlier_identity(spec)
    dry = ("sweep", "t.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    write(Path("out.jsonl"), [_header("r1", earlier), _point("r1", first, trace_sha256=_digest(Path("trace.npy")))])
    result = invoke(*dry)
    assert result.exit_code == 0 and "--resume: 1 of these point(s) are already in" in result.output, result.output
    _trace(Path("trace.npy"), skew=True)
    result = invoke(*dry)
    assert result.exit_code == 2 and "were measured on trace_sha256" in result.output, result.output
    write(Path("out.jsonl"), [_header("r1", earlier), _point("r1", first)])
    result = invoke(*dry)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "1 point(s) of it carry no trace digest" in said, said
    # a failed record holds no data and no digest: not refused for it (its failure is reported as any)
    write(Path("out.jsonl"), [_header("r1", earlier), dict(_point("r1", first), status="failed", error="x",
                                                           time_us_median=None)])
    assert invoke(*dry).exit_code == 0
    from commbench.sweep.resume import sweep_identity
    assert earlier == sweep_identity(spec, 2, "gloo", before_traces=True)   # the form resume_identities accepts


def _swept_here(tmp_path, monkeypatch) -> list[dict]:
    """The sweep measured into tmp_path/out.jsonl (the working folder from now on) on its trace: its records."""
    monkeypatch.chdir(tmp_path)
    Path("t.toml").write_text(SWEEP)
    _trace(Path("trace.npy"), skew=False)
    assert invoke("sweep", "t.toml", "-O", "out.jsonl").exit_code == 0
    return records(Path("out.jsonl"))


@pytest.mark.timeout(240)
def test_a_resume_continues_the_identity_its_file_carries(tmp_path, monkeypatch):
    # the resumed launch's header carries the file's (earlier) identity: compare, report and the cut-short count join
    # a sweep's runs by it, and a new identity made a resumed earlier file two runs, one of them cut short
    from commbench.sweep import load_sweep
    from commbench.sweep.resume import holds_every_planned_point

    whole = _swept_here(tmp_path, monkeypatch)
    earlier = _earlier_identity(load_sweep("t.toml"))
    write(Path("out.jsonl"), [{**{k: v for k, v in whole[0].items() if k != "sweep_entries"}, "sweep_identity": earlier},
                              whole[1]])
    assert invoke("sweep", "t.toml", "-O", "out.jsonl", "--resume").exit_code == 0
    resumed = records(Path("out.jsonl"))
    assert resumed[2]["record_type"] == "header" and resumed[2]["sweep_identity"] == earlier
    assert holds_every_planned_point("out.jsonl") == 2


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """A folder holding t.toml, its traces and measured.jsonl: the sweep as measured on 2 gloo ranks."""
    folder = tmp_path_factory.mktemp("measured")
    (folder / "t.toml").write_text(SWEEP)
    _trace(folder / "trace.npy", skew=False)
    _trace(folder / "other.npy", skew=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert invoke("sweep", "t.toml", "-O", "measured.jsonl").exit_code == 0
    return folder


@pytest.mark.parametrize("change, said", [
    (("iters = 3", "iters = 5"), "moe_all_to_all iters 3 -> 5"),
    (("warmup_iters = 1", "warmup_iters = 2"), "moe_all_to_all warmup_iters 1 -> 2"),
    (("hidden = 16", 'hidden = 16\nseed = 7\ncombine_dtype = "fp32"'), "moe_all_to_all combine_dtype default -> fp32, "
                                                                      "moe_all_to_all seed default -> 7"),
    (("hidden = 16", "hidden = 16\ncheck = false"), "moe_all_to_all check true -> false"),
    (("trace:trace.npy", "trace:other.npy"), "moe_all_to_all routing trace:trace.npy -> trace:other.npy"),
    (("nproc = 2", "nproc = 4"), "world size (--nproc) 2 -> 4"),
])
def test_a_refused_resume_names_the_setting_that_changed(measured, monkeypatch, change, said):
    # a refusal said 'it holds sweep identity X; this sweep is Y (entries, world size and backend must match)': which
    # of iters, warmup_iters, dtype, seed, routing, check or --nproc changed was left to guess
    monkeypatch.chdir(measured)
    write(Path("out.jsonl"), records(Path("measured.jsonl"))[:1])   # its header, as the sweep wrote it
    Path("c.toml").write_text(SWEEP.replace(*change))
    result = invoke("sweep", "c.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"changed (file -> this launch): {said}: choose another -O/--out" in text, text
    # a header written before the entries were recorded: the world size said, the entries said unknown
    write(Path("out.jsonl"), [{k: v for k, v in records(Path("measured.jsonl"))[0].items() if k != "sweep_entries"}])
    text = " ".join(invoke("sweep", "c.toml", "-O", "out.jsonl", "--resume", "--dry-run").output.split())
    assert "which of them changed cannot be said" in text, text


@pytest.mark.parametrize("written", ["seed = 0", 'dispatch_mode = "per-expert"'])
def test_a_moe_setting_written_at_its_default_is_no_change(measured, monkeypatch, written):
    # probe P3 (session 46): `seed = 0` written out (0 is the default) was refused on resume as "seed default -> 0",
    # though it plans the very points (their keys hold every setting); a value equal to the default is no change,
    # and a changed sweep's refusal does not name it either
    monkeypatch.chdir(measured)
    write(Path("out.jsonl"), records(Path("measured.jsonl"))[:1])
    Path("d.toml").write_text(SWEEP.replace("hidden = 16", f"hidden = 16\n{written}"))
    result = invoke("sweep", "d.toml", "-O", "out.jsonl", "--resume", "--dry-run")
    assert result.exit_code == 0, result.output
    Path("d.toml").write_text(SWEEP.replace("hidden = 16", f"hidden = 16\n{written}").replace("iters = 3", "iters = 5"))
    text = " ".join(invoke("sweep", "d.toml", "-O", "out.jsonl", "--resume", "--dry-run").output.split())
    assert "changed (file -> this launch): moe_all_to_all iters 3 -> 5: choose" in text, text


@pytest.mark.timeout(240)
def test_a_timeout_change_resumes(tmp_path, monkeypatch):
    # timeout_s bounds how long a point may take, never what a measured point measured: a sweep cut short and
    # resumed with a longer timeout was refused as another sweep. The identity leaves it out (the ranks still agree
    # on it: runner.check_same_config); an earlier file's identity hashed it, and stays refused on a change
    from commbench.sweep import load_sweep

    whole = _swept_here(tmp_path, monkeypatch)
    write(Path("out.jsonl"), whole[:2])
    Path("long.toml").write_text(SWEEP.replace("timeout_s = 30", "timeout_s = 90"))
    result = invoke("sweep", "long.toml", "-O", "out.jsonl", "--resume")
    assert result.exit_code == 0, result.output
    resumed = records(Path("out.jsonl"))
    assert len(resumed) == 4 and resumed[2]["sweep_identity"] == whole[0]["sweep_identity"]
    earlier = _earlier_identity(load_sweep("t.toml"))
    write(Path("out.jsonl"), [dict(whole[0], sweep_identity=earlier), whole[1]])
    assert invoke("sweep", "long.toml", "-O", "out.jsonl", "--resume", "--dry-run").exit_code == 2
    assert json.loads(Path("out.jsonl").read_text().splitlines()[0])["sweep_identity"] == earlier


def test_a_tuned_sweep_resume_continues_the_plan_its_file_holds(tmp_path):
    # an NCCL tuning sweep's combinations are tied by the plan id (the sweep identity) in their headers' nccl_tuning:
    # a resume of a file an earlier commbench wrote (its identity of the path-only form) got a new plan id, and the
    # file's plan then read as cut short before the combinations the resume measured
    from commbench.sweep import load_sweep
    from commbench.sweep.runner import SweepJob
    from commbench.sweep.tuned_sweep import continued_plan

    sweep_file = tmp_path / "s.toml"
    sweep_file.write_text('[sweep]\nbackend = "nccl"\nnccl_algo = ["ring"]\n[[run]]\ncollective = "all_reduce"\n'
                          'sizes = ["1K"]\n')
    spec = load_sweep(str(sweep_file))
    earlier = _earlier_identity(spec, backend="nccl")
    out = tmp_path / "out.jsonl"
    job = SweepJob(sweep=spec, backend="nccl", output_path=str(out), resume=True)
    header = dict(_header("r1", "x"), backend="nccl", nccl_tuning={"plan": earlier, "combinations": ["NCCL default"],
                                                                   "combination": "NCCL default"})
    write(out, [header])
    assert continued_plan(job, 2) == earlier
    write(out, [dict(header, nccl_tuning=dict(header["nccl_tuning"], plan="another"))])
    assert continued_plan(job, 2) != "another"
