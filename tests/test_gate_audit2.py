"""Gate audit 2: inputs a user's CI or tuning acts on, read as what is true (calibrate's training logs, compare's
results files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.planner.calibrate.runlogs import parse_torchtitan_log

DATA = Path(__file__).parent / "data"
TITAN = DATA / "torchtitan_qwen3_30b_b200.log"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def _titan_steps(*lines: tuple[str, int, int]) -> str:
    """The fixture's config with metrics lines ('step' or 'validate', step, tps) in torchtitan 0.3.0's
    components/metrics.py format (log and log_validation)."""
    text = TITAN.read_text().splitlines(keepends=True)
    head = "".join(line for line in text if "step:" not in line)
    out = []
    for kind, step, tps in lines:
        if kind == "step":
            out.append(f"[rank0]:[titan] 2026-01-10 10:00:01,000 - root - INFO - \x1b[31mstep: {step:2}  \x1b[32mloss: "
                       f" 8.1234  \x1b[33mgrad_norm:  1.2345  \x1b[96mmemory: 120.12GiB(64.58%)  \x1b[34mtps: {tps:,}  "
                       "\x1b[36mtflops: 812.34  \x1b[35mmfu: 16.25%\x1b[39m\n")
        else:
            out.append(f"[rank0]:[titan] 2026-01-10 10:00:01,500 - root - INFO - \x1b[33mvalidate step: {step:2}  "
                       f"\x1b[32mloss:  8.1000  \x1b[96mmemory: 120.12GiB(64.58%)  \x1b[34mtps: {tps:,}\x1b[39m\n")
    return head + "".join(out)


def test_torchtitan_validation_lines_are_not_training_steps():
    # validator.freq 10 (its default) with metrics.log_freq 10: 'validate step: 10' after 'step: 10' was refused as
    # "step numbers go back (step 10, then step 10) ...: two runs in one log"
    aligned = _titan_steps(("step", 1, 9_012), ("validate", 1, 70_000), ("step", 10, 24_300), ("validate", 10, 70_000),
                           ("step", 20, 24_500), ("validate", 20, 70_000))
    row = parse_torchtitan_log(aligned, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_400.0)
    assert "3 validation line(s) left out" in row["notes"] and "validate step:" in row["left_out"]
    # validator.freq 5: the forward-only pass's 70,000 tokens/s was a training step (median 24,475, '7 steps')
    between = _titan_steps(("step", 1, 9_012), ("step", 10, 24_300), ("validate", 15, 70_000), ("step", 20, 24_400),
                           ("step", 30, 24_500), ("validate", 35, 71_000), ("step", 40, 24_450))
    row = parse_torchtitan_log(between, source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_425.0)
    assert row["notes"].startswith("TorchTitan log; 5 steps")


def test_the_cli_names_the_validation_lines_left_out(tmp_path):
    log = tmp_path / "titan.log"
    log.write_text(_titan_steps(("step", 1, 9_012), ("step", 10, 24_300), ("validate", 10, 70_000),
                                ("step", 20, 24_500)))
    result = _invoke("calibrate", "--evaluate", str(log), "--model", "qwen3-30b-a3b", "--system", "b200-hgx",
                     "--gpus", "8")
    assert result.exit_code == 0, result.output
    assert f"note: {log}: 1 validation line(s)" in result.output


@pytest.mark.parametrize("label", ["[default0]:", "[rank0]: ", "0: ", "  3: ", "[1,7]<stdout>:", "[1,0]<stderr>:"])
def test_a_megatron_log_under_a_launchers_rank_label_is_read(label):
    # torchrun --tee's '[default0]:' and srun -l's '0: ' before every line: the arguments lines were not read and
    # the log was refused as having "no arguments block ... run with the default argument printing on"
    from commbench.planner.calibrate.runlogs import parse_megatron_log
    text = (DATA / "megatron_deepseek_v3_gb300.log").read_text()
    plain = parse_megatron_log(text, source="m", model="deepseek-v3", gpu="gb300-nvl72")
    labelled = "".join(label + line for line in text.splitlines(keepends=True))
    row = parse_megatron_log(labelled, source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert row["tokens_per_s_per_gpu"] == pytest.approx(plain["tokens_per_s_per_gpu"])
    assert row["recipe"] == plain["recipe"] and row["left_out"] == plain["left_out"]


@pytest.mark.parametrize("role", ["rank", "default"])
def test_a_torchtitan_log_of_two_ranks_interleaved_is_read_per_rank(role):
    # plain torchrun --tee labels lines '[default0]:', '[default1]:' (its --role; run_train.sh passes --role rank):
    # rank 1's 'step: 1' after rank 0's was refused as "step numbers go back ...: two runs in one log"; with
    # '[rankN]:' the notes said '8 steps' for 4 steps of 2 ranks
    out = []
    for line in TITAN.read_text().splitlines(keepends=True):
        line = line.replace("[rank0]:", f"[{role}0]:")
        out += [line, line.replace(f"[{role}0]:", f"[{role}1]:")] if "step:" in line else [line]
    row = parse_torchtitan_log("".join(out), source="t", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)
    assert row["notes"].startswith("TorchTitan log; 4 steps (logged by 2 ranks)")



@pytest.mark.parametrize("prefix", ["2026-01-10 10:00:00 INFO: ", "[1,7]: ", "rank7| "])
def test_an_arguments_block_behind_an_unknown_prefix_is_said_so_with_the_prefix(prefix):
    # the block's header and footer were found (searched anywhere in a line) but no argument line was read: the
    # message said "no arguments block ... run with the default argument printing on"
    from commbench.errors import CommbenchError
    from commbench.planner.calibrate.runlogs import parse_megatron_log
    text = (DATA / "megatron_deepseek_v3_gb300.log").read_text()
    prefixed = "".join(prefix + line for line in text.splitlines(keepends=True))
    with pytest.raises(CommbenchError, match="arguments block .* was found but none of its lines could be read") as err:
        parse_megatron_log(prefixed, source="m", model="deepseek-v3", gpu="gb300-nvl72")
    assert f"its lines begin {prefix.rstrip()!r}" in str(err.value) and "no arguments block" not in str(err.value)


def test_a_clock_at_the_start_of_a_line_is_no_rank_label():
    # a log line opening with its time ('10:00:01 ...') is not srun -l's '10: ' rank label
    from commbench.planner.calibrate.runlogs.common import LAUNCHER_LABEL
    assert LAUNCHER_LABEL.match("10:00:01,000 - root - INFO - step: 1") is None
    assert LAUNCHER_LABEL.match("10: [titan] step: 1").group(2) == "10"


COMPARE = DATA / "compare"


def _records(path: Path) -> list[dict]:
    import json
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict]) -> str:
    import json
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _failed_like(record: dict, **changes) -> dict:
    """`record` as harness.failed_measurement writes a point that raised: identity and error, no numbers."""
    keep = ("record_type", "run_id", "collective", "backend", "size_bytes", "dtype", "op", "in_place", "world_size",
            "group_size", "group_layout", "num_groups", "iters", "warmup_iters", "params", "point_key")
    return {**{k: record[k] for k in keep}, "count": 0, "status": "failed", "error": "timed out after 5 s", **changes}


def test_a_failed_point_of_an_aggregated_loop_keeps_its_loop_params():
    # bench/sweep -m 2 (-z 1, -G 1): a good record's params hold agg_iters (blocking, cuda_graph), a failed one's
    # did not, so compare found no base point for it: 'missing' (passed by --allow-missing), not 'newly failed'
    from types import SimpleNamespace

    from collectives import get_collective
    from collectives.base import PointSpec
    from commbench.dtypes import get_dtype
    from commbench.measure.harness import LoopOptions, failed_measurement
    spec = PointSpec(size_bytes=512, dtype=get_dtype("float32"), op="sum")
    record = failed_measurement(get_collective("all_reduce"), spec, SimpleNamespace(name="gloo", world_size=2), 2,
                                LoopOptions(agg_iters=2, blocking=True, cuda_graph=True), run_id="r", error="x")
    assert record.params == {"agg_iters_ungrouped": 2, "blocking": True, "cuda_graph": True}


@pytest.mark.parametrize("flags", [(), ("--allow-missing",)])
def test_a_failed_point_the_base_does_not_hold_fails_the_gate(tmp_path, flags):
    # a failed record whose key matched no base point (its params short of the loop's agg_iters, or a size only NEW
    # measured) was '1 point(s) only in NEW (not judged)', and --allow-missing passed: 'pass: ... none failed'
    base = [dict(r, params={"agg_iters": 2}) if r["record_type"] == "measurement" else r
            for r in _records(COMPARE / "gloo_all_reduce_a.jsonl")]
    new = [dict(r, params={"agg_iters": 2}) if r["record_type"] == "measurement" else r
           for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    new[3] = _failed_like(new[3], params={})
    extra = _failed_like(new[2], size_bytes=new[-1]["size_bytes"] * 16, params={"agg_iters": 2})
    result = _invoke("compare", _write(tmp_path / "base.jsonl", base), _write(tmp_path / "new.jsonl", new + [extra]),
                     *flags)
    assert result.exit_code == 1, result.output
    assert "2 point run(s) failed or wrong in the new file at points the base does not hold" in result.output
    result = _invoke("compare", str(tmp_path / "base.jsonl"), str(tmp_path / "new.jsonl"), "--json", *flags)
    import json
    document = json.loads(result.stdout)
    assert result.exit_code == 1 and document["passed"] is False and len(document["failed_only_in_new"]) == 2


def _with_nccl(records: list[dict], version: str) -> list[dict]:
    return [dict(r, nccl_version=version) if r["record_type"] == "header" else r for r in records]


def test_a_base_of_runs_on_two_setups_is_refused(tmp_path):
    # a baseline file appended to across an NCCL upgrade (2.21.5, then 2.23.4) passed a 2.23.4 run against the mean
    # of both versions, the step between them read as run-to-run noise: 'pass: 5 point(s) ...', exit 0
    a, b = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    second = [dict(r, run_id="second") for r in a]
    base = _write(tmp_path / "base.jsonl", _with_nccl(a, "2.21.5") + _with_nccl(second, "2.23.4"))
    new = _write(tmp_path / "new.jsonl", _with_nccl(b, "2.23.4"))
    result = _invoke("compare", base, new)
    assert result.exit_code == 2, result.output
    assert "holds runs measured on different setups: NCCL versions (NCCL 2.21.5: run" in result.output
    assert "NCCL 2.23.4: run second)" in result.output
    result = _invoke("compare", base, new, "--allow-setup-change")
    assert result.exit_code == 0 and "allowed: the base file" in result.output, result.output
    # one setup's repeated runs are a baseline as before
    one = _write(tmp_path / "one.jsonl", _with_nccl(a, "2.23.4") + _with_nccl(second, "2.23.4"))
    assert _invoke("compare", one, new).exit_code == 0


def test_fit_refuses_results_of_two_loop_modes(tmp_path):
    # an eager run and a bench -m 2 run of the same points were merged into one curve by their medians per size
    # (exit 0, no word): a -m call's launch overlaps the previous call's, so its time per call is another loop's
    eager = _records(COMPARE / "gloo_all_reduce_a.jsonl")
    aggregated = [dict(r, run_id="agg", **({"params": {"agg_iters": 2}} if r["record_type"] == "measurement" else {}))
                  for r in _records(COMPARE / "gloo_all_reduce_b.jsonl")]
    mixed = _write(tmp_path / "mixed.jsonl", eager + aggregated)
    result = _invoke("fit", mixed)
    assert result.exit_code == 2, result.output
    # (a bench run's agg_iters, written before it had its own key, reads as commbench's ungrouped calls)
    assert "mix loop modes (-m 2 aggregated calls ungrouped, back to back (commbench): run agg; eager single calls: " \
           "run" in " ".join(result.output.split())
    import json
    result = _invoke("fit", _write(tmp_path / "agg.jsonl", aggregated), "--json")
    assert result.exit_code == 0, result.output
    assert "every point measured as -m 2 aggregated calls ungrouped, back to back (commbench): the curves' latencies " \
           "are of that loop, not of eager single calls" in json.loads(result.stdout)["notes"]
    assert _invoke("fit", _write(tmp_path / "eager.jsonl", eager)).exit_code == 0


def test_a_report_readme_names_what_it_could_not_read(tmp_path, monkeypatch):
    # a run cut off mid-line (its 32 KiB record torn) gave a README whose table ended at 4 KiB without a word (only
    # the terminal said 'skipped line 6'); past the report's bound, likewise the measurements not read
    import commbench.cli.report as report_cli
    text = (COMPARE / "gloo_all_reduce_a.jsonl").read_text()
    torn = tmp_path / "torn.jsonl"
    torn.write_text(text.rstrip("\n")[:-200] + "\n")
    result = _invoke("report", str(torn), "--out", str(tmp_path / "rep"))
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "rep" / "README.md").read_text()
    assert "## Not read (not drawn, not in the tables above)" in readme
    assert f"- {torn} line 6: " in readme
    result = _invoke("report", str(COMPARE / "gloo_all_reduce_a.jsonl"), "--out", str(tmp_path / "rep3"))
    assert "Not read" not in (tmp_path / "rep3" / "README.md").read_text()
    monkeypatch.setattr(report_cli, "MAX_REPORT_MEASUREMENTS", 3)
    result = _invoke("report", str(COMPARE / "gloo_all_reduce_a.jsonl"), "--out", str(tmp_path / "rep2"))
    assert result.exit_code == 0, result.output
    assert "this report holds the first 3 measurements read" in (tmp_path / "rep2" / "README.md").read_text()


def test_a_run_that_stopped_before_its_first_point_misses_every_point(tmp_path):
    # bench -O appends: last night's complete run, then tonight's header and nothing (a crash at start-up); the gate
    # judged last night's run alone: 'pass: 5 point(s) in 1 run(s) compared', exit 0
    import json
    base, new = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    crashed = [dict(new[0], run_id="tonight")]
    base_path = _write(tmp_path / "base.jsonl", base)
    new_path = _write(tmp_path / "new.jsonl", new + crashed)
    result = _invoke("compare", base_path, new_path)
    assert result.exit_code == 1, result.output
    assert "1 run(s) of the new file hold a header and no measurement (first: run tonight)" in result.output
    result = _invoke("compare", base_path, new_path, "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["empty_runs"] == ["tonight"]
    allowed = _invoke("compare", base_path, new_path, "--allow-missing")
    assert allowed.exit_code == 0 and "allowed: 1 run(s) of the new file hold a header" in allowed.output
    # the same file twice is no change; a sweep launch resumed by a later launch of the same sweep is no loss
    assert _invoke("compare", new_path, new_path, "--allow-same-run").exit_code == 0
    swept = [dict(r, sweep_identity="s1") if r["record_type"] == "header" else r for r in new]
    resumed = [dict(swept[0], run_id="died")] + swept
    assert _invoke("compare", base_path, _write(tmp_path / "resumed.jsonl", resumed)).exit_code == 0


def test_a_base_of_runs_with_other_nccl_settings_is_refused_but_not_a_tuning_sweep(tmp_path):
    a, b = _records(COMPARE / "gloo_all_reduce_a.jsonl"), _records(COMPARE / "gloo_all_reduce_b.jsonl")
    second = [dict(r, run_id="second", **({"nccl_env": {"NCCL_P2P_DISABLE": "1"}} if r["record_type"] == "header"
                                          else {})) for r in a]
    new = _write(tmp_path / "new.jsonl", b)
    result = _invoke("compare", _write(tmp_path / "base.jsonl", a + second), new)
    assert result.exit_code == 2 and "NCCL_* settings (NCCL_P2P_DISABLE=1: run second; no NCCL_* settings" in \
        result.output, result.output
    tuned = [dict(r, run_id="second", **({"nccl_env": {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}}
                                         if r["record_type"] == "header" else {})) for r in a]
    assert _invoke("compare", _write(tmp_path / "tuned.jsonl", a + tuned), new).exit_code == 0


def test_a_fit_from_a_calibration_file_carries_its_runs(tmp_path):
    # calibrate -O b200.json --calibration gb300.json listed only the B200 run, though its held terms are the GB300
    # fit's (hbm_efficiency +29.6% from one GB300 log) and its fitted ones were pulled toward them: a plan of an H100
    # or GB300 then heard nothing of the GB300 run
    import json

    from commbench.planner.calibrate.fit import fitted_gpus
    first, second = tmp_path / "gb300.json", tmp_path / "b200.json"
    result = _invoke("calibrate", str(DATA / "megatron_deepseek_v3_gb300.log"), "--model", "deepseek-v3", "--system",
                     "gb300-nvl72", "-O", str(first), "--no-loo")
    assert result.exit_code == 0, result.output
    result = _invoke("calibrate", str(TITAN), "--model", "qwen3-30b-a3b", "--system", "b200-hgx", "--gpus", "8",
                     "--calibration", str(first), "-O", str(second), "--no-loo")
    assert result.exit_code == 0, result.output
    written = json.loads(second.read_text())
    assert written["runs"][0] == json.loads(first.read_text())["runs"][0] and len(written["runs"]) == 2
    assert str(first) in written["fitted_on"]
    assert set(fitted_gpus(str(second))) == {"gb300", "b200"}
