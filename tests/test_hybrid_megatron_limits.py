"""What Megatron-LM core_v0.16.1 cannot run for a hybrid (Mamba) model, which pretrain_mamba.py builds as
MambaModel: the EP all-to-all overlap (the combined 1F1B schedule needs GPTModel.build_schedule_plan), full
recompute (MambaStack.forward checkpoints nothing) and CPU activation offloading (MambaStack offloads nothing). The search must not propose them, a pin is refused in one line,
and the step model charges neither (found by an outside probe: the default Nemotron-3-Nano plan emitted
--overlap-moe-expert-parallel-comm and crashed at the first step; its 16K-token plan fitted only by a recompute that
never ran)."""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset
from commbench.errors import CommbenchError
from commbench.planner import load_model
from commbench.planner.emit.megatron import launch_env, megatron_args
from commbench.planner.search.space import SearchRequest, search
from tests.megatron_lm import arguments_module, megatron_whole_path

HYBRID = "nemotron-3-nano-30b-a3b"


def test_megatron_core_runs_the_ep_overlap_and_full_recompute_only_for_gpt_models():
    """The source facts the limits rest on (installed megatron-core 0.16.1)."""
    pytest.importorskip("megatron.core")
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.models.mamba.mamba_model import MambaModel
    from megatron.core.pipeline_parallel import combined_1f1b
    from megatron.core.ssm.mamba_block import MambaStack
    from megatron.core.transformer.transformer_block import TransformerBlock
    assert hasattr(GPTModel, "build_schedule_plan") and not hasattr(MambaModel, "build_schedule_plan")
    assert "only GPTModel is supported for EP A2A overlapping" in inspect.getsource(combined_1f1b)
    assert "checkpoint" not in inspect.getsource(MambaStack.forward)
    assert "_checkpointed_forward" in inspect.getsource(TransformerBlock.forward)


def _search(gpus: int, **kw):
    fabric = load_preset("h100-hgx", num_gpus=gpus)
    return fabric, search(SearchRequest(model=load_model(HYBRID), fabric=fabric, num_gpus=gpus, gbs=256,
                                        precision="fp8", keep=50, **kw))


def test_a_hybrid_plan_takes_no_ep_overlap_and_its_args_launch(monkeypatch):
    fabric, res = _search(16)
    assert len(res.layouts) and not res.layouts.moe_a2a_overlap.any()
    lay, model = res.layouts.layout(0), load_model(HYBRID)
    argv = megatron_args(lay, model)
    assert "--overlap-moe-expert-parallel-comm" not in argv and "--delay-wgrad-compute" not in argv
    if arguments_module() is not None:
        megatron_whole_path(arguments_module(), argv, layout=lay, model=model, gpus=16, gpu=fabric.gpu,
                            env=launch_env(lay, fabric.gpu.name), monkeypatch=monkeypatch)
    # the release's features offer the overlap here: only the hybrid model keeps it off
    from commbench.planner.layout.recipes import release_features
    assert True in release_features(res.request.software, "h100", "fp8", HYBRID, True)["moe_a2a_overlap"]


def test_a_hybrid_plan_never_charges_full_recompute():
    _, res = _search(32, seq_len=16384)
    assert len(res.layouts) and (res.layouts.recompute != 2).all()


@pytest.mark.parametrize("pin, said", [("moe_a2a_overlap=true", "moe_a2a_overlap=True is invalid for "
                                        f"{HYBRID} with --framework megatron: megatron-core runs "
                                        "--overlap-moe-expert-parallel-comm only for a GPTModel"),
                                       ("recompute=full", f"recompute='full' is invalid for {HYBRID} with --framework "
                                        "megatron: megatron-core's MambaStack does no activation checkpointing through "
                                        "0.17.1"),
                                       ("recompute=full,recompute_layers=2", "recompute='full' is invalid"),
                                       # the step model charged 4 layers' activations to host memory (69 GB free
                                       # against 64 without the pin) that MambaStack never offloads
                                       ("cpu_offload_layers=4", f"cpu_offload_layers=4 is invalid for {HYBRID} with "
                                        "--framework megatron: megatron-core 0.16.1's MambaStack offloads no "
                                        "activations")])
def test_a_pin_megatron_cannot_run_on_a_hybrid_is_refused_in_one_line(pin, said, tmp_path):
    out = CliRunner().invoke(app, ["plan", "--model", HYBRID, "--system", "h100-hgx", "--gpus", "16", "--layout",
                                   f"tp=1,pp=1,ep=8,mbs=1,{pin}", "--top", "1", "-O", str(tmp_path)],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert out.output.startswith(f"error: {said}"), out.output
    assert not (tmp_path / "megatron_args.txt").exists()


def test_the_emitter_refuses_them_for_a_hybrid_layout():
    from commbench.planner import Layout
    model = load_model(HYBRID)
    with pytest.raises(CommbenchError, match="only for a GPTModel"):
        megatron_args(Layout.for_world(16, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, moe_a2a_overlap=True), model)
    with pytest.raises(CommbenchError, match="MambaStack does no activation checkpointing"):
        megatron_args(Layout.for_world(16, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, recompute="full"), model)
    with pytest.raises(CommbenchError, match="MambaStack offloads no activations"):
        megatron_args(Layout.for_world(16, tp=1, pp=1, ep=8, etp=1, mbs=1, gbs=256, cpu_offload_layers=4), model)


def test_cpu_offload_is_one_hybrid_rule_with_full_recompute():
    """CPU activation offloading (--cpu-offloading-num-layers) runs only in TransformerBlock: its __init__ creates the
    offload context and sets config._cpu_offloading_context, which the tensor-parallel layers offload inside
    (megatron-core 0.16.1 transformer_block.py:303-323, tensor_parallel/layers.py); MambaStack has no offload code and
    its forward is a plain loop, so a hybrid plan charged host memory for activations that stay on the GPU (found by
    an outside probe: Nemotron-H 56B "fitted" on 64 GB200 only with offload60). Refused and never searched, as full
    recompute is (frameworks.megatron_runs_on_hybrid)."""
    from commbench.planner.search.frameworks import megatron_runs_on_hybrid
    model = load_model(HYBRID)
    assert megatron_runs_on_hybrid("megatron", model) == {"moe_a2a_overlap": False, "full_recompute": False,
                                                          "cpu_offload": False}
    assert all(megatron_runs_on_hybrid("megatron", load_model("llama3.1-70b")).values())
    pytest.importorskip("megatron.core")
    from megatron.core.ssm.mamba_block import MambaStack
    from megatron.core.transformer.transformer_block import TransformerBlock
    assert "offload" not in inspect.getsource(MambaStack)
    assert "_cpu_offloading_context" in inspect.getsource(TransformerBlock.__init__)


def test_vp_on_a_hybrid_model_names_mamba_stack_s_refusal(tmp_path):
    """The error said the 52 layers must split over pp*vp virtual stages (they split evenly over 4): the real reason is
    that MambaStack refuses interleaving (megatron-core 0.16.1 ssm/mamba_block.py), up to release 26.02.01; from 26.04
    on the '|'-segmented pattern builds virtual stages (test_emit_hybrid.py)."""
    out = CliRunner().invoke(app, ["plan", "--model", HYBRID, "--system", "h100-hgx", "--gpus", "32", "--layout",
                                   "tp=1,pp=2,vp=2,ep=8,mbs=1", "--software", "26.02.01"], env={"COLUMNS": "200"})
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert out.output.startswith(f"error: vp=2 is invalid for {HYBRID}: ") and "MambaStack" in out.output
    assert "pin vp=1, or plan with --software 26.04 or newer" in out.output
    pytest.importorskip("megatron.core")
    from megatron.core.ssm.mamba_block import MambaStack
    assert "virtual_pipeline_model_parallel_size is None" in inspect.getsource(
        MambaStack._select_layers_for_pipeline_parallel)
