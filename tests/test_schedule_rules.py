"""Layouts the frameworks refuse only once training starts are never planned (layout.spec rules schedule, context,
sequence). Megatron-LM's validate_args accepts them; the failures come later:
- megatron-core 0.16.1 pipeline_parallel/schedules.py (forward_backward_pipelining_with_interleaving) raises unless
  the micro-batch count M is at least microbatch_group_size_per_vp_stage (= pp, model_parallel_config.py) and
  M % pp is 0 or >= pp, i.e. with vp > 1 M must be a multiple of pp;
- torch's ScheduleInterleaved1F1B (TorchTitan's schedule for vp > 1) needs M a multiple of max(1, M // pp), and its
  Schedule1F1B (vp = 1) M >= pp;
- sequence parallelism scatters each CP rank's seq_len/cp tokens over TP (megatron-core tensor_parallel/mappings.py:
  "First dimension of the tensor should be divisible by tensor parallel size"); TorchTitan 0.3.0's trainer needs
  seq_len divisible by tp (with sequence parallelism) times 2*cp (cp > 1);
- Megatron-LM checks seq_len against 2*cp only when cp > 1 (arguments.py), so an odd seq_len at cp = 1 is valid."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.planner import load_model
from commbench.planner.search.space import SearchRequest, search


def _search(gbs: int, framework: str = "megatron", seq_len: int | None = None, gpus: int = 8):
    return search(SearchRequest(model=load_model("llama3-8b"), fabric=load_preset("h100-hgx", num_gpus=gpus),
                                num_gpus=gpus, gbs=gbs, precision="fp8", framework=framework, seq_len=seq_len))


def _microbatches(arr):
    return arr.gbs // (arr.mbs * arr.dp)


@pytest.mark.parametrize("gbs", [20, 36, 44])
def test_an_interleaved_layout_has_whole_groups_of_pp_micro_batches(gbs):
    res = _search(gbs)
    arr = res.layouts
    n_mb, inter = _microbatches(arr), arr.vp > 1
    assert np.all((n_mb[inter] % arr.pp[inter] == 0) & (n_mb[inter] >= arr.pp[inter]))
    # before the rule the best of gbs 36 was PP2 VP8 with 9 micro-batches (megatron-core raises at step 1)
    best = res.layouts.layout(0)
    assert best.vp == 1 or (_microbatches(res.layouts)[0] % best.pp == 0)


@pytest.mark.parametrize("gbs", [20, 36])
def test_torchtitan_schedules_take_the_micro_batch_count(gbs):
    arr = _search(gbs, framework="torchtitan").layouts
    n_mb, pp = _microbatches(arr), arr.pp
    inter, single = arr.vp > 1, (arr.vp == 1) & (pp > 1)
    rounds = np.maximum(1, n_mb // pp)
    assert np.all(n_mb[inter] % rounds[inter] == 0)          # ScheduleInterleaved1F1B
    assert np.all(n_mb[single] >= pp[single])                 # Schedule1F1B


def test_sequence_parallel_layouts_split_each_cp_ranks_tokens_over_tp():
    arr = _search(64, seq_len=4098).layouts             # 4098 = 2 * 2049: tp 1 or 2 with sequence parallelism
    sp = arr.sequence_parallel & (arr.tp > 1)
    assert np.all((4098 // arr.cp[sp]) % arr.tp[sp] == 0) and np.all(4098 % arr.cp[sp] == 0)
    titan = _search(64, framework="torchtitan", seq_len=4098).layouts
    divisor = np.where(titan.sequence_parallel & (titan.tp > 1), titan.tp, 1) * np.where(titan.cp > 1, 2 * titan.cp, 1)
    assert np.all(4098 % divisor == 0)


def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "8", *args])


def test_a_pinned_layout_the_schedule_refuses_is_one_line_naming_its_micro_batches():
    result = _plan("--layout", "tp=1,pp=4,vp=2,ep=1,mbs=1,gbs=4")
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "layout schedule rule broken" in line and "2 micro-batches (gbs/(mbs*dp) = 4/(1*2)) with pp = 4, vp = 2" in line
    assert "Traceback" not in result.output
    titan = _plan("--framework", "torchtitan", "--layout", "tp=1,pp=4,vp=1,ep=1,mbs=1,gbs=4")
    assert titan.exit_code == 2 and "framework torchtitan" in " ".join(titan.output.split()), titan.output
    assert _plan("--layout", "tp=1,pp=4,vp=1,ep=1,mbs=1,gbs=4").exit_code == 0   # Megatron's 1F1B runs it


def test_sequence_and_context_rules_apply_only_where_their_parallelism_is_on():
    # bf16: an FP8 GEMM's token dimension must itself be a multiple of 8 (layout/quant_dims.py, test_quant_gemm_dims)
    odd = _plan("--seq-len", "4097", "--precision", "bf16", "--layout", "tp=1,pp=1,vp=1,ep=1,mbs=1")
    assert odd.exit_code == 0, odd.output
    split = _plan("--seq-len", "4098", "--layout", "tp=4,pp=1,vp=1,ep=1,mbs=1")
    assert split.exit_code == 2 and "layout sequence rule broken" in split.output, split.output
    assert "seq_len = 4098 is not divisible by 4 (tp = 4, cp = 1" in " ".join(split.output.split())


def _megatron_core_schedule_error(pp: int, vp: int, n_mb: int) -> str | None:
    """What megatron-core's interleaved schedule entry says of n_mb micro-batches over pp x vp before it runs one
    (its group-size checks), None when it gets past them. Its process groups and model chunks are stand-ins: only
    the sizes the checks read are real."""
    import types

    import torch
    from megatron.core.enums import ModelType
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules

    cfg = ModelParallelConfig(pipeline_model_parallel_size=pp, virtual_pipeline_model_parallel_size=vp,
                              pipeline_dtype=torch.bfloat16)   # __post_init__: microbatch_group_size_per_vp_stage = pp

    class Chunk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config, self.model_type = cfg, ModelType.encoder_or_decoder

    group = types.SimpleNamespace(size=lambda: pp, rank=lambda: 0)
    groups = types.SimpleNamespace(tp=None, cp=None, embd=None, pos_embd=None, pp=group, dp_cp=None)
    zeros = torch.zeros
    torch.zeros = lambda *a, **k: zeros(*a, **{x: y for x, y in k.items() if x != "device"})  # its "cuda" counter
    try:
        schedules.forward_backward_pipelining_with_interleaving(
            forward_step_func=None, data_iterator=[iter([])] * vp, model=[Chunk() for _ in range(vp)],
            num_microbatches=n_mb, seq_length=8, micro_batch_size=1,
            p2p_communicator=types.SimpleNamespace(config=cfg, pp_group=group), pg_collection=groups)
    except (ValueError, RuntimeError) as exc:
        if "micro-batches" in str(exc):
            return str(exc)
        raise
    except AttributeError:   # past the checks: the stand-in config has no model sizes
        return None
    finally:
        torch.zeros = zeros
    return None


def test_the_schedule_rule_is_megatron_cores_own_check():
    pytest.importorskip("megatron.core", reason="megatron-core 0.16.1 (requirements-frameworks.txt)")
    from commbench.planner.layout.spec import LayoutArrays, schedule_bad

    for pp in (2, 3, 4, 8):
        for vp in (2, 3):
            for n_mb in range(1, 3 * pp + 2):
                arr = LayoutArrays.from_columns(pp=np.array([pp]), vp=np.array([vp]), dp=np.array([1]),
                                                mbs=np.array([1]), gbs=np.array([n_mb]))
                refused = _megatron_core_schedule_error(pp, vp, n_mb) is not None
                assert bool(schedule_bad(arr)[0]) == refused, (pp, vp, n_mb)


def test_a_megatron_plan_whose_layout_torchtitan_cannot_schedule_refuses_its_torchtitan_section(tmp_path):
    """DeepSeek-V3 on 1,152 GB300, gbs 512, PP9 EP128: Megatron takes 4 micro-batches over 9 stages (vp 1), and the
    plan wrote a torchtitan_args.txt that TorchTitan refuses at start-up (torch's Schedule1F1B: 'Number of
    microbatches (4) must be greater than or equal to the number of stages (9)'; found from outside)."""
    import json

    from typer.testing import CliRunner

    from commbench.cli.app import app
    out = tmp_path / "plan"
    result = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--system", "gb300-nvl72", "--gpus", "1152",
                                      "--gbs", "512", "--layout", "tp=1,pp=9,vp=1,ep=128,mbs=1,dispatcher=alltoall",
                                      "-O", str(out)])   # alltoall: HybridEP refuses EP128's 72 + 56 split (hybridep_split)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "plan.json").read_text())
    assert "megatron" in doc and "layout schedule rule broken" in doc["torchtitan"]["refused"]
    assert "4 micro-batches" in doc["torchtitan"]["refused"] and not (out / "torchtitan_args.txt").exists()


def test_a_refusal_advises_only_what_is_accepted():
    """gpt-oss-120b in nvfp4 under TorchTitan was told '(plan it in mxfp8, or with --framework megatron)', and Megatron-LM
    core_v0.16.1 refuses gpt-oss outright (its YaRN RoPE; found from outside)."""
    from commbench.errors import CommbenchError
    from commbench.planner.search.frameworks import check_precision_runs, megatron_unbuildable
    gpt_oss, qwen = load_model("gpt-oss-120b"), load_model("qwen3-30b-a3b")
    assert megatron_unbuildable(gpt_oss) and not megatron_unbuildable(qwen)
    with pytest.raises(CommbenchError) as refused:
        check_precision_runs("torchtitan", gpt_oss, "nvfp4")
    # and the precision it advises is one TorchTitan trains gpt-oss in: not mxfp8, whose grouped GEMM needs K a
    # multiple of 128 (hidden and expert_ffn 2880; probe AV finding 5), but fp8, its Blackwell default
    assert "--framework megatron" not in str(refused.value) and "plan it in fp8)" in str(refused.value)
    check_precision_runs("torchtitan", gpt_oss, "fp8")
    with pytest.raises(CommbenchError, match="is invalid for gpt-oss-120b"):
        check_precision_runs("torchtitan", gpt_oss, "mxfp8")
    with pytest.raises(CommbenchError, match="plan it in mxfp8, or with --framework megatron"):
        check_precision_runs("torchtitan", qwen, "nvfp4")
    check_precision_runs("torchtitan", qwen, "mxfp8")
    for name in ("gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"):
        model = load_model(name)
        with pytest.raises(CommbenchError) as refused:
            check_precision_runs("torchtitan", model, "nvfp4")
        advised = str(refused.value).split("plan it in ")[1].split(")")[0].split(",")[0]
        check_precision_runs("torchtitan", model, advised)   # accepted


def test_torchtitans_schedule_rule_is_torchs_own_check_and_no_stricter():
    """Probe BN (2026-12-06): --framework torchtitan refused PP4 VP2 with 6 micro-batches, which torch's
    ScheduleInterleaved1F1B takes (6 % max(1, 6 // 4) == 0) and TorchTitan 0.3.0 only warns about."""
    from commbench.planner.layout.spec import LayoutArrays, schedule_bad

    for pp in (2, 3, 4, 8):
        for vp in (1, 2, 3):
            for n_mb in range(1, 4 * pp + 2):
                arr = LayoutArrays.from_columns(pp=np.array([pp]), vp=np.array([vp]), dp=np.array([1]),
                                                mbs=np.array([1]), gbs=np.array([n_mb]))
                refused = n_mb % max(1, n_mb // pp) != 0 if vp > 1 else n_mb < pp
                assert bool(schedule_bad(arr, "torchtitan")[0]) == refused, (pp, vp, n_mb)


def test_the_probes_interleaved_torchtitan_layout_is_planned():
    res = CliRunner().invoke(app, ["plan", "--model", "llama3-8b", "--system", "h100-hgx", "--gpus", "16",
                                   "--framework", "torchtitan", "--top", "1", "--layout",
                                   "tp=1,pp=4,vp=2,cp=1,mbs=1,gbs=24"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
