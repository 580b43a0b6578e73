"""`import nccl-tests` of commbench's own moe_all_to_all text threw away every MoE parameter (params {}), so a
4-expert and an 8-expert run compared as one point and the gate passed (probe Q finding 2). The banner's MoE layer
and each row's point line (tokens per rank, seed, ...) are now read into params as the native JSONL holds them; what
an older text does not state (its seed) is "unknown", so compare matches no run that states it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import parse_text
from commbench.results.nccl_tests_text import point_context, point_value
from commbench.results.records import Measurement

runner = CliRunner()
ROOT = str(Path(__file__).parent.parent)


def _log(experts: int, *, setup: str | None = None, point: str = "", tokens: str = "32",
         size: int = 16384) -> str:
    """commbench's --format nccl-tests text of `bench moe_all_to_all --nproc 2 --tokens 32 --hidden 128 --experts E
    --top-k 2 --routing balanced` as commbench printed it before point lines stated an MoE row's own params."""
    setup = setup or (f"hidden 128, {experts} experts, top-2, balanced routing, per-expert dispatch in bf16, "
                      "combine in bf16")
    return "\n".join([
        "# nccl-tests version commbench-0.1.0 nccl-headers=0 nccl-library=0",
        "# Collective test starting: moe_all_to_all_perf",
        f"# nThread 1 nGpus 1 tokens per rank: {tokens} ({setup}; size: the busiest rank's dispatch bytes) warmup "
        "iters: 1 iters: 5 agg iters: 1 validation: 1 graph: 0 unalign: 0", "#", "# Using devices",
        "#  Rank  0 Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu (x86_64)",
        "#  Rank  1 Group  0 Pid      0 on         vm device  0 [0000:00:00] cpu (x86_64)", "#",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw"
        "  #wrong", *([f"# commbench point: {point}"] if point else []),
        f"{size:12d}  {size // 2:12d}  bfloat16    none      -1  2803.94    0.01    0.01       0      N/A     N/A     N/A"
        "     N/A",
        "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.00584321 ", "#",
        "# Collective test concluded: moe_all_to_all_perf"]) + "\n"


def _params(text: str) -> dict:
    result = parse_text(text, "moe.log")
    assert result.problems == [], result.problems
    (m,) = [r for r in result.records if isinstance(r, Measurement)]
    return m.params


def test_an_older_text_gives_the_banner_params_and_an_unknown_seed():
    params = _params(_log(4))
    assert params == {"tokens_per_rank": 32, "hidden": 128, "top_k": 2, "num_experts": 4, "routing": "balanced",
                      "dispatch_mode": "per-expert", "dispatch_dtype": "bf16", "combine_dtype": "bf16",
                      "seed": "unknown", "preset": None, "ep_size": 2, "experts_per_rank": 2}
    several = _params(_log(4, tokens="32,64"))   # which row is which token count, no point line says
    assert several["tokens_per_rank"] == "unknown" and several["num_experts"] == 4


def test_a_4_expert_and_an_8_expert_import_are_not_one_point(tmp_path):
    for experts in (4, 8):
        (tmp_path / f"e{experts}.log").write_text(_log(experts))
        done = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / f"e{experts}.log"), "-O",
                                   str(tmp_path / f"e{experts}.jsonl")])
        assert done.exit_code == 0, done.output
    refused = runner.invoke(app, ["compare", str(tmp_path / "e4.jsonl"), str(tmp_path / "e8.jsonl")])
    assert refused.exit_code == 2 and "no point is in both files" in refused.output, refused.output
    assert '"num_experts": 4' in refused.output and '"num_experts": 8' in refused.output


def test_capacity_preset_trace_and_point_line_values():
    setup = ("preset deepseek-v3: hidden 7168, 256 experts, top-8, trace:/data/router topk.npy routing, per-rank dispatch "
             "in fp8, combine in bf16, capacity factor 1.33333 (tokens over capacity dropped)")
    params = _params(_log(0, setup=setup, point="tokens_per_rank=32 seed=7 expert_tp=2 "
                                                "capacity_factor=1.3333333333333333 trace_rows=64 trace_recycled=true"))
    assert params["preset"] == "deepseek-v3" and params["routing"] == "trace:/data/router topk.npy"
    assert (params["num_experts"], params["top_k"], params["hidden"], params["dispatch_mode"]) == (256, 8, 7168, "per-rank")
    assert params["capacity_factor"] == 4 / 3 and params["pad_to_capacity"] is False   # the point line's, exact
    assert (params["seed"], params["expert_tp"], params["ep_size"], params["experts_per_rank"]) == (7, 2, 2, 256)
    assert params["trace_rows"] == 64 and params["trace_recycled"] is True
    older = _params(_log(0, setup=setup))   # per-rank dispatch may have expert_tp > 1: unknown, as the trace's rows
    assert older["expert_tp"] == older["experts_per_rank"] == older["trace_rows"] == "unknown"


# Every MoE param a --format nccl-tests text carries (the banner: preset, hidden, experts, top-k, routing, dispatch mode
# and dtypes, capacity factor and padding; the point lines: tokens per rank, seed, capacity factor, a trace's rows and
# whether it was recycled), each written by commbench itself and read back by import (probe AX finding 1: a recycled
# trace's point line said trace_recycled='true', which import read as False)
ROUND_TRIPS = {
    "zipf": ["--tokens", "16,32", "--hidden", "64", "--experts", "4", "--top-k", "2", "--routing", "zipf:1.5",
             "--seed", "3"],
    "recycled trace, per-rank fp8, capacity drop": [
        "--tokens", "16,32", "--hidden", "64", "--experts", "8", "--top-k", "2", "--routing", "trace:{trace}",
        "--dispatch-mode", "per-rank", "--dispatch-dtype", "fp8", "--combine-dtype", "fp32", "--capacity-factor",
        "1.25"],
    "preset, whole trace, padded to an exact capacity": [
        "--preset", "qwen3-235b", "--tokens", "4", "--hidden", "32", "--experts", "8", "--top-k", "2", "--routing",
        "trace:{trace}", "--capacity-factor", "1.3333333333333333", "--pad-to-capacity", "--seed", "5"],
}


@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_a_run_and_the_import_of_its_own_text_hold_the_same_params(tmp_path, case):
    native, log, trace = tmp_path / "moe.jsonl", tmp_path / "moe.log", tmp_path / "router topk.npy"
    rng = np.random.default_rng(1)
    np.save(trace, np.stack([rng.choice(8, 2, replace=False) for _ in range(20)]))   # 20 rows: 2 x 4 whole, 2 x 16 not
    options = [o.replace("{trace}", str(trace)) for o in ROUND_TRIPS[case]]
    bench = subprocess.run([sys.executable, "-m", "commbench", "bench", "moe_all_to_all", "--nproc", "2", *options,
                            "-n", "3", "-w", "1", "--timeout", "60", "--format", "nccl-tests", "-O", str(native)],
                           capture_output=True, text=True, timeout=150, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert bench.returncode == 0, bench.stdout + bench.stderr
    log.write_text(bench.stdout)
    done = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "moei.jsonl")])
    assert done.exit_code == 0, done.output
    def params(path):
        return [r["params"] for r in map(json.loads, path.read_text().splitlines()) if r["record_type"] == "measurement"]
    assert params(tmp_path / "moei.jsonl") == params(native) and params(native)
    assert "unknown" not in json.dumps(params(tmp_path / "moei.jsonl"))
    refused = runner.invoke(app, ["compare", str(native), str(tmp_path / "moei.jsonl")])
    assert refused.exit_code == 2 and "holds no run of its own" in refused.output, refused.output
    compared = runner.invoke(app, ["compare", str(native), str(tmp_path / "moei.jsonl"), "--allow-same-run", "--json"])
    assert compared.exit_code in (0, 1), compared.output   # pass or a slowdown: every point found in both
    assert len(json.loads(compared.stdout)["points"]) == len(params(native)), compared.output


def test_the_round_trips_state_every_param_the_text_carries():
    """The cases above between them carry a value of every key the banner and the point lines state."""
    stated = " ".join(" ".join(o) for o in ROUND_TRIPS.values())
    for option in ("--preset", "--hidden", "--experts", "--top-k", "--routing", "--dispatch-mode", "--dispatch-dtype",
                   "--combine-dtype", "--capacity-factor", "--pad-to-capacity", "--tokens", "--seed", "trace:"):
        assert option in stated, option


@pytest.mark.parametrize("value", [True, False, 0, 7, 1.25, 4 / 3, 2.0])
def test_a_point_value_reads_back_as_written(value):
    """The point line's writer (nccl_tests_text.point_value_text) and the importer's reader (point_value) are one
    format, for every type MOE_POINT_KEYS holds; expert_tp (verify-plan's flex runs, no bench option) among them."""
    key = {bool: "trace_recycled", int: "expert_tp", float: "capacity_factor"}[type(value)]
    m = Measurement(run_id="r", collective="moe_all_to_all", backend="gloo", size_bytes=1024, count=1024,
                    dtype="uint8", op=None, in_place=False, world_size=4, group_size=4, iters=1, warmup_iters=0, status="failed",
                    params={key: value})
    (line,) = [part for part in point_context(m).split() if part.startswith(key + "=")]
    written = line.partition("=")[2]
    assert "'" not in written and point_value(key, written) == value and type(point_value(key, written)) is type(value)


def test_a_point_value_it_cannot_read_is_unknown_never_false():
    assert point_value("trace_recycled", "yes") == "unknown" and point_value("trace_rows", "x") == "unknown"
    assert point_value("trace_recycled", "'true'") is True   # as commbench d27ed70..4097490 wrote it


def test_report_of_an_older_several_token_text_draws_no_unknown_token_point(tmp_path):
    """Its tokens per rank are unknown: no place on the MoE figure's axis (matplotlib refused the log scale of the
    string 'unknown' in a traceback); left out and counted, the report written."""
    text = _log(4, tokens="32,64")
    (tmp_path / "moe.log").write_text(text.replace("# Out of", f"{32768:12d}  {16384:12d}  bfloat16    none      -1  "
                                                                 "8091.69    0.01    0.00       0      N/A     N/A     "
                                                                 "N/A     N/A\n# Out of"))
    assert runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "moe.log"), "-O",
                               str(tmp_path / "moe.jsonl")]).exit_code == 0
    done = runner.invoke(app, ["report", str(tmp_path / "moe.jsonl"), "-O", str(tmp_path / "rep")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "rep" / "README.md").exists()
