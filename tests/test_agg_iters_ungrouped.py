"""`bench -m N` is not nccl-tests' -m (probe BQ F2): nccl-tests runs the N calls of an iteration in one
ncclGroupStart/End (src/common.cu BenchTime: `if (agg_iters>1) NCCLCHECK(ncclGroupStart()); for (aiter...) startColl;
... ncclGroupEnd()`), which NCCL launches as one grouped operation; commbench issues N separate calls back to back
(measure/harness.py aggregated). Both were recorded as params.agg_iters, so compare and fit took a commbench -m run
and an imported nccl-tests -m log as the same points. commbench's calls are params.agg_iters_ungrouped now; an
nccl-tests import keeps agg_iters (grouped); commbench's own --format nccl-tests text imports as ungrouped; and a
file written before reads a commbench-measured record's agg_iters as ungrouped."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.profile import loop_mode
from commbench.measure.harness import LoopOptions, loop_params
from commbench.results.compare import match_key
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement, RunHeader, read_records

DATA = Path(__file__).parent / "data" / "nccl-tests"


def _measurements(path) -> list[Measurement]:
    return [r for r in read_records([path]) if isinstance(r, Measurement)]


def test_commbench_records_its_back_to_back_calls_under_their_own_key():
    assert loop_params(LoopOptions(agg_iters=3)) == {"agg_iters_ungrouped": 3}
    assert loop_params(LoopOptions(agg_iters=1)) == {}


def test_bench_m_and_an_imported_nccl_tests_m_are_never_the_same_point(tmp_path):
    out = tmp_path / "bc.jsonl"
    result = CliRunner().invoke(app, ["bench", "broadcast", "--nproc", "1", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0",
                                      "-m", "4", "-J", str(out)])
    assert result.exit_code == 0, result.output
    ours = _measurements(out)
    assert [m.params.get("agg_iters_ungrouped") for m in ours] == [4] and "agg_iters" not in ours[0].params
    log = tmp_path / "broadcast-m4.log"
    log.write_text((DATA / "broadcast-per-iter.log").read_text().replace("agg iters: 1", "agg iters: 4"))
    imported = [r for r in import_file(str(log)).records if isinstance(r, Measurement)]
    assert imported and all(m.params.get("agg_iters") == 4 and "agg_iters_ungrouped" not in m.params for m in imported)
    assert not {match_key(m)[-1] for m in ours} & {match_key(m)[-1] for m in imported}   # the params never match
    # fit names the two loops apart (check_one_loop refuses them together)
    assert loop_mode(ours[0]) != loop_mode(imported[0])
    assert "ungrouped" in loop_mode(ours[0]) and "grouped" in loop_mode(imported[0])


def test_commbench_text_imports_as_ungrouped(tmp_path):
    text = tmp_path / "m4.txt"
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "1", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0",
                                      "-m", "4", "--format", "nccl-tests"])
    assert result.exit_code == 0, result.output
    text.write_text(result.stdout)
    imported = [r for r in import_file(str(text)).records if isinstance(r, Measurement)]
    assert imported and all(m.params == {"agg_iters_ungrouped": 4} for m in imported), [m.params for m in imported]


def _old_file(path: Path, launcher: str, backend: str) -> Path:
    header = {"record_type": "header", "schema_version": 1, "run_id": "r1", "started_at": "", "argv": [],
              "commbench_version": "0.1.0", "python_version": "3.11", "torch_version": None, "nccl_version": None,
              "cuda_version": None, "cupy_version": None, "backend": backend, "world_size": 2, "hostnames": ["h", "h"],
              "devices": ["cpu", "cpu"], "nccl_env": {}, "launcher": launcher}
    point = {"record_type": "measurement", "run_id": "r1", "collective": "all_reduce", "backend": backend,
             "size_bytes": 1024, "count": 256, "dtype": "float32", "op": "sum", "in_place": False, "world_size": 2,
             "group_size": 2, "group_layout": "world", "num_groups": 1, "iters": 3, "warmup_iters": 1,
             "time_us_median": 10.0, "algbw_gbps": 0.1024, "busbw_gbps": 0.1024, "num_wrong": 0, "status": "ok",
             "params": {"agg_iters": 4, "blocking": True}}
    path.write_text(json.dumps(header) + "\n" + json.dumps(point) + "\n")
    return path


def test_files_written_before_read_a_commbench_run_s_agg_iters_as_ungrouped(tmp_path):
    for launcher, backend in (("local", "gloo"), ("torchrun", "nccl"), ("single", "cupy-nccl")):
        [m] = _measurements(_old_file(tmp_path / f"{launcher}.jsonl", launcher, backend))
        assert m.params == {"agg_iters_ungrouped": 4, "blocking": True}, (launcher, m.params)
    # an import of nccl-tests' own log (NCCL) keeps nccl-tests' grouped -m
    [m] = _measurements(_old_file(tmp_path / "imported.jsonl", "nccl-tests", "nccl"))
    assert m.params == {"agg_iters": 4, "blocking": True}
    # an import of commbench's own text of a run without NCCL (nccl-tests runs only on NCCL): commbench's calls
    [m] = _measurements(_old_file(tmp_path / "ours.jsonl", "nccl-tests", "gloo"))
    assert m.params == {"agg_iters_ungrouped": 4, "blocking": True}


def test_help_and_readme_say_what_m_does_here():
    result = CliRunner().invoke(app, ["bench", "--help"])
    text = " ".join(result.output.replace("│", " ").split())
    assert "not grouped" in text and "agg_iters_ungrouped" in text, text
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "`-m N` (N calls back to back per timed iteration, not grouped" in readme
