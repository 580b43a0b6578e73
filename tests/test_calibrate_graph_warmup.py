"""CUDA-graph warm-up and capture iterations in a Megatron-LM log are not steady state (runlogs/megatron_warmup.py:
megatron/core/full_cuda_graph.py and megatron/training/training.py, Megatron-LM core_v0.16.1). They were counted
in the median step time: the run read slower than it ran."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs import parse_megatron_log, read_runs_noted

DATA = Path(__file__).parent / "data"
MEGATRON = DATA / "megatron_deepseek_v3_gb300.log"
GBS, SEQ, WORLD = 4096, 4096, 256
STEADY_MS = (10402.0, 10398.0, 10410.0, 10400.0)


def _tokens(ms: float) -> float:
    return GBS * SEQ / (ms / 1000.0 * WORLD)


def _log(*, graph_args: dict[str, str] | None, times_ms: list[float], first: int = 1, interval: int = 1,
         loaded_at: int | None = None) -> str:
    """The fixture's arguments block with its CUDA-graph lines replaced by `graph_args` (None: none printed, as a
    block that does not say), then one iteration line per time, `interval` iterations apart from `first`."""
    text = MEGATRON.read_text()
    head = text[:text.index("[after dataloaders are built]")]
    head = re.sub(r"  cuda_graph_\w+ \.+ .*\n", "", head)
    extra = "".join(f"  {k} {'.' * (46 - len(k))} {v}\n" for k, v in (graph_args or {}).items())
    extra += f"  log_interval {'.' * 34} {interval}\n"
    head = head.replace("-------------------- end of arguments", extra + "-------------------- end of arguments", 1)
    if loaded_at is not None:
        head += (f"  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/2 ] at iteration {loaded_at}\n")
    template = next(line for line in text.splitlines() if "iteration        2/" in line)
    lines = [re.sub(r"iteration +2/", f"iteration {first + i * interval:8d}/", template)
             .replace("(ms): 10433.1", f"(ms): {ms:.1f}") for i, ms in enumerate(times_ms)]
    return head + "".join(line + "\n" for line in lines)


def _parse(text: str) -> dict:
    return parse_megatron_log(text, source="m.log", model="deepseek-v3", gpu="gb300-nvl72")


# cuda_graph_warmup_steps 3: three eager iterations (the first with the set-up), the capture, then graph replays
GRAPHED = [15890.0, 11900.0, 11880.0, 30500.0, *STEADY_MS]


@pytest.mark.parametrize("graph_args", [
    {"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "3"},
    {"cuda_graph_impl": "local", "cuda_graph_scope": "['full_iteration']", "cuda_graph_warmup_steps": "3"},
    {"cuda_graph_impl": "full_iteration", "cuda_graph_warmup_steps": "3"},   # core_v0.19.0's name
])
def test_graph_warm_up_and_capture_iterations_are_left_out_and_named(graph_args):
    row = _parse(_log(graph_args=graph_args, times_ms=GRAPHED))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))   # median of the replays only
    assert "3 iteration line(s) after the first of CUDA-graph warm-up and capture left out" in row["left_out"]
    assert "cuda_graph_warmup_steps" not in row["left_out"]   # it was said: no default taken


def test_the_warm_up_steps_argument_sets_how_many_are_left_out():
    row = _parse(_log(graph_args={"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "1"},
                      times_ms=[15890.0, 30500.0, *STEADY_MS]))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert "1 iteration line(s) after the first of CUDA-graph warm-up" in row["left_out"]


def test_a_missing_warm_up_steps_argument_takes_megatron_cores_default_and_says_so():
    row = _parse(_log(graph_args={"cuda_graph_impl": "transformer_engine"}, times_ms=GRAPHED))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert "Megatron-Core's default 3 taken" in row["left_out"]


def test_per_layer_local_graphs_capture_in_the_first_iteration_only():
    # cuda_graphs.py create_cudagraphs: recorded and captured in the first step; the second is a replay
    row = _parse(_log(graph_args={"cuda_graph_impl": "local", "cuda_graph_warmup_steps": "3"},
                      times_ms=[15890.0, 13146.0, *STEADY_MS]))   # line 2 averages iterations 1 and 2
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert "CUDA-graph" not in row["left_out"] and "iteration 2 left out" in row["left_out"]


def test_a_line_averaging_a_capture_iteration_is_left_out_with_a_log_interval():
    # lines every 2 iterations from a fresh start: line 2 averages iterations 3-4, the last warm-up and the capture
    row = _parse(_log(graph_args={"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "3"},
                      times_ms=[13900.0, 21200.0, *STEADY_MS], first=2, interval=2))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    # resumed from a checkpoint at iteration 100: the warm-up is counted from there, not from iteration 0
    resumed = _parse(_log(graph_args={"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "3"},
                          times_ms=[13900.0, 21200.0, *STEADY_MS], first=102, interval=2, loaded_at=100))
    assert resumed["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))


def test_a_log_of_graph_warm_up_only_is_refused_in_one_line():
    with pytest.raises(CommbenchError, match=r"only warm-up iterations logged: Transformer Engine CUDA graphs"):
        _parse(_log(graph_args={"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "3"},
                    times_ms=GRAPHED[:3]))


def test_a_log_that_does_not_say_leaves_an_obvious_capture_spike_out_and_names_it():
    # line 2 averages iterations 1 and 2 (Megatron-LM's timer goes on after the first line): left out either way
    row = _parse(_log(graph_args=None, times_ms=[15890.0, 13146.0, 30500.0, *STEADY_MS]))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert "iteration 3 left out" in row["left_out"] and "does not say whether the run used CUDA graphs" in row[
        "left_out"]
    # no spike: every line after those two counts, as before
    plain = _parse(_log(graph_args=None, times_ms=[15890.0, 13146.0, *STEADY_MS]))
    assert plain["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert "does not say" not in plain["left_out"]
    # a log that says it ran without graphs: a slow third line is the run's, counted
    said = _parse(_log(graph_args={"cuda_graph_impl": "none"}, times_ms=[15890.0, 13146.0, 30500.0, *STEADY_MS]))
    assert said["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10402.0))


def test_calibrate_prints_the_graph_warm_up_note(tmp_path):
    path = tmp_path / "graphs.log"
    path.write_text(_log(graph_args={"cuda_graph_impl": "transformer_engine", "cuda_graph_warmup_steps": "3"},
                         times_ms=GRAPHED))
    rows, notes = read_runs_noted(str(path), model="deepseek-v3", gpu="gb300-nvl72")
    assert rows[0]["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10401.0))
    assert any("CUDA-graph warm-up and capture left out" in n for n in notes)
    result = CliRunner().invoke(app, ["calibrate", "--evaluate", str(path), "--model", "deepseek-v3", "--system",
                                      "gb300-nvl72"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "CUDA-graph warm-up and capture left out" in result.output


@pytest.mark.parametrize("graph_args, recipe", [
    # the deprecated spelling of transformer_engine (core_v0.16.1 arguments.py renames it): read as no graphs
    ({"external_cuda_graph": "True", "cuda_graph_warmup_steps": "3"}, "layer"),
    # core_v0.19.0's full-iteration implementation, named without a scope: read as no graphs
    ({"cuda_graph_impl": "full_iteration", "cuda_graph_warmup_steps": "3"}, "full"),
    ({"enable_cuda_graph": "True", "cuda_graph_warmup_steps": "3"}, "layer"),
    ({"cuda_graph_impl": "none"}, "none"),
])
def test_every_spelling_of_cuda_graphs_is_read_into_the_recipe(graph_args, recipe):
    row = _parse(_log(graph_args=graph_args, times_ms=GRAPHED))
    assert row["recipe"]["cuda_graph"] == recipe


@pytest.mark.parametrize("graph_args, scope", [
    ({"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": "[<CudaGraphScope.attn: 2>]"}, "attn"),
    # core_v0.18.0 on: --cuda-graph-scope is a hidden deprecated spelling, the block prints cuda_graph_modules
    ({"cuda_graph_impl": "transformer_engine", "cuda_graph_modules": "[<CudaGraphModule.attn: 1>]"}, "attn"),
    ({"cuda_graph_impl": "local", "cuda_graph_modules": "[<CudaGraphModule.attn: 1>, <CudaGraphModule.moe_router: 4>]"},
     "attn+moe_router"),
    ({"cuda_graph_impl": "transformer_engine", "cuda_graph_modules": "[]"}, "layer"),   # empty: the whole layer
])
def test_the_per_layer_capture_modules_are_read_under_either_name(graph_args, scope):
    row = _parse(_log(graph_args=dict(graph_args, cuda_graph_warmup_steps="3"), times_ms=GRAPHED))
    assert (row["recipe"]["cuda_graph"], row["recipe"]["cuda_graph_scope"]) == ("layer", scope)


TITAN = DATA / "torchtitan_qwen3_30b_b200.log"


def _titan(training: str, tps: list[str], starts_at: int | None = None) -> str:
    """The TorchTitan fixture with its training config's global batch size replaced by `training` and one metrics
    line per tps, steps 1, 2, ..."""
    text = TITAN.read_text()
    head = "".join(line for line in text.splitlines(keepends=True) if "tps:" not in line)
    head = head.replace("'global_batch_size': 512", training)
    if starts_at is not None:
        head += f"[rank0]:[titan] 2026-01-10 10:00:00,500 - root - INFO - Training starts at step {starts_at}\n"
    template = next(line for line in text.splitlines() if "tps: 24,311" in line)
    return head + "".join(re.sub(r"step: +2 ", f"step: {(starts_at or 1) + i:2d} ", template)
                          .replace("tps: 24,311", f"tps: {t}") + "\n" for i, t in enumerate(tps))


def _titan_row(text: str) -> dict:
    from commbench.planner.calibrate.runlogs import parse_torchtitan_log
    return parse_torchtitan_log(text, source="t.log", model="qwen3-30b-a3b", gpu="b200-hgx", num_gpus=8)


TITAN_TPS = ["9,012", "15,000", "24,311", "24,506", "24,420"]   # step 2 captures the graph


def test_a_torchtitan_graph_capture_step_is_left_out_and_named():
    # torchtitan 0.3.0: one eager forward-backward, the capture on the second call; one micro-batch a step
    # (global batch 32 = local 4 x dp 8) puts the capture in step 2, which was counted
    row = _titan_row(_titan("'global_batch_size': 32, 'disable_cuda_graphs': False", TITAN_TPS))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)
    assert "1 step line(s) after the first of CUDA-graph warm-up and capture left out" in row["left_out"]
    # resumed at step 51: counted from there
    resumed = _titan_row(_titan("'global_batch_size': 32, 'disable_cuda_graphs': False", TITAN_TPS, starts_at=51))
    assert resumed["tokens_per_s_per_gpu"] == pytest.approx(24_420.0)


@pytest.mark.parametrize("training", [
    "'global_batch_size': 32, 'disable_cuda_graphs': True",    # graphs off
    "'global_batch_size': 512, 'disable_cuda_graphs': False",  # 16 micro-batches a step: the capture is in step 1
    "'global_batch_size': 32",                                 # a TorchTitan without CUDA graphs
])
def test_a_torchtitan_step_2_without_a_capture_counts(training):
    row = _titan_row(_titan(training, TITAN_TPS))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(np.median([15_000, 24_311, 24_506, 24_420]))
    assert not row["left_out"]


def test_a_torchtitan_log_of_warm_up_steps_only_is_refused():
    with pytest.raises(CommbenchError, match="only warm-up steps logged: CUDA graphs"):
        _titan_row(_titan("'global_batch_size': 32, 'disable_cuda_graphs': False", TITAN_TPS[:2]))


def test_the_line_after_the_first_iteration_still_averages_it_and_is_left_out():
    # training_log (core_v0.16.0 on): the first iteration is logged without restarting the interval timer, so the
    # next line (iteration 10 at --log-interval 10) averages iterations 1..10, the warm-up included: 13,000 ms there
    # against 10,400 steady. With two steady lines the median (their mean) read 1.6% slow; a 3-line log, 12% slow
    lines_0_10_20_30 = _log(graph_args=None, times_ms=[15890.0, 13000.0, 10402.0, 10398.0], first=0, interval=10)
    row = _parse(lines_0_10_20_30.replace("iteration        0/", "iteration        1/"))
    assert row["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10400.0))
    assert "iteration 10 left out" in row["left_out"] and "interval timer" in row["left_out"]
    # a start whose first line is not its first iteration (older Megatron-LM at --log-interval 10): nothing more
    old = _parse(_log(graph_args=None, times_ms=[13000.0, 10402.0, 10398.0], first=10, interval=10))
    assert old["tokens_per_s_per_gpu"] == pytest.approx(_tokens(10400.0)) and "interval timer" not in old["left_out"]
