"""The bar of issue 25: every zoo model x {NVL72, HGX} x {searched, pinned with PP > 1 and VP > 1} x each
precision the GPU supports, planned for each framework (--framework megatron|torchtitan) and run through
that framework's whole configuration path: no rejection; a refusal is one line saying why.

Megatron-LM: Megatron-LM's own parse_args -> validate_args -> core_transformer_config_from_args (the
architecture checked field by field) -> process groups -> layer split when MEGATRON_LM_ROOT names a
core_v0.16.1 checkout (tests/megatron_lm.py), else the reproduced flag set and validate_args rules with
megatron-core's TransformerConfig, process groups and layer split (test_emit_megatron_real.py).
TorchTitan 0.3.0: ConfigManager.parse_args as train.py calls it, then Trainer.__init__'s pre-build steps
(tests/torchtitan_train.py; test_emit_torchtitan_real.py's checks). The TorchTitan searches also show
the step model charges what TorchTitan runs: no per-layer graphs, a whole-step graph only where its
validation allows one (pp = 1, ep = 1).
Searches are cached per process; one search per (model, system, precision, framework, mode).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.framework_plans import INSTALL_HINT

pytest.importorskip("megatron.core", reason=f"megatron-core is not installed: {INSTALL_HINT}")
pytest.importorskip("torchtitan", reason=f"torchtitan is not installed: {INSTALL_HINT}")
pytest.importorskip("torchao", reason=f"torchao is not installed: {INSTALL_HINT}")

from commbench.costmodel import load_preset  # noqa: E402
from commbench.errors import CommbenchError  # noqa: E402
from commbench.planner import load_model  # noqa: E402
from commbench.planner.emit.megatron import launch_env, megatron_args  # noqa: E402
from commbench.planner.emit.torchtitan import torchtitan_plan  # noqa: E402
from commbench.planner.models.zoo import model_names  # noqa: E402
from commbench.planner.search.space import SearchRequest, best_for_pins, search  # noqa: E402
from tests.megatron_lm import arguments_module, megatron_whole_path  # noqa: E402
from tests.test_emit_megatron_real import check_megatron_plan  # noqa: E402
from tests.test_emit_torchtitan_real import check_titan_plan  # noqa: E402

SYSTEMS = ("gb200-nvl72", "h100-hgx")
# model -> (GPUs on NVL72, GPUs on HGX, gbs, pinned structure with pp > 1 and vp > 1 per system)
SIZES = {
    "deepseek-v3": (256, 1024, 4096, {"gb200-nvl72": dict(tp=1, pp=4, vp=4, ep=64),
                                      "h100-hgx": dict(tp=2, pp=16, vp=2, ep=64)}),
    "qwen3-235b-a22b": (128, 256, 1024, {"gb200-nvl72": dict(tp=1, pp=4, vp=2, ep=16),
                                         "h100-hgx": dict(tp=2, pp=4, vp=2, ep=16)}),
    "qwen3-30b-a3b": (64, 16, 256, dict(tp=1, pp=2, vp=2, ep=8)),
    "mixtral-8x7b": (64, 64, 512, dict(tp=2, pp=2, vp=2, ep=8)),
    "mixtral-8x22b": (128, 128, 1024, dict(tp=2, pp=4, vp=2, ep=8)),
    "gpt-oss-120b": (64, 64, 512, dict(tp=1, pp=2, vp=2, ep=8)),
    "gpt-oss-20b": (16, 16, 256, dict(tp=1, pp=2, vp=2, ep=8)),
    "llama3.1-70b": (64, 64, 512, dict(tp=4, pp=4, vp=2, ep=1)),
    "llama3.1-405b": (256, 512, 1024, dict(tp=8, pp=8, vp=2, ep=1)),
    "llama3-8b": (16, 8, 128, dict(tp=1, pp=2, vp=2, ep=1)),
    "kimi-k2": (512, 1024, 4096, {"gb200-nvl72": dict(tp=1, pp=4, vp=4, ep=64),
                                  "h100-hgx": dict(tp=2, pp=16, vp=2, ep=64)}),
    # hybrid Mamba models: MambaStack has no virtual stages, so the pinned vp > 1 case is a one-line refusal
    "nemotron-3-nano-30b-a3b": (16, 16, 256, dict(tp=1, pp=2, vp=2, ep=8)),
    "nemotron-3.5-lightning-30b-a3b": (16, 16, 256, dict(tp=1, pp=2, vp=2, ep=8)),
    "nemotron-3-super-120b-a12b": (64, 64, 512, dict(tp=1, pp=2, vp=2, ep=8)),
    "nemotron-3-ultra-550b-a55b": (256, 512, 1024, dict(tp=2, pp=4, vp=2, ep=32)),
    "qwen3-next-80b-a3b": (64, 64, 512, dict(tp=1, pp=2, vp=2, ep=8)),
    "deepseek-v4-flash": (128, 128, 2048, dict(tp=1, pp=2, vp=2, ep=8)),  # neither framework builds it
}


def _cases():
    out = []
    for name in model_names():
        for system in SYSTEMS:
            for precision in load_preset(system, num_gpus=8).gpu.precisions:
                for mode in ("searched", "pinned"):
                    out.append(pytest.param(name, system, precision, mode, id=f"{name}-{system}-{precision}-{mode}"))
    return out


@lru_cache(maxsize=None)
def planned(name: str, system: str, precision: str, mode: str, framework: str):
    """(model, GPUs, layout) the search picks for this framework, or the one-line refusal."""
    nvl, hgx, gbs, pinned = SIZES[name]
    gpus = nvl if system == SYSTEMS[0] else hgx
    model = load_model(name)
    pins = {"mbs": 1}
    if mode == "pinned":
        pins |= pinned.get(system, pinned) if system in pinned else pinned
        if not model.is_moe:
            pins.pop("ep")
    try:
        req = SearchRequest(model=model, fabric=load_preset(system, num_gpus=gpus), num_gpus=gpus, gbs=gbs,
                            precision=precision, pins=pins, keep=1, framework=framework)
        layouts = search(req).layouts if mode == "searched" else best_for_pins(req)[0]
    except CommbenchError as exc:
        return model, gpus, str(exc)
    return req.model, gpus, layouts.layout(0)   # the model as the release searched builds it (release_model)


# A hybrid model pinned to vp > 1 at a release before 26.04: its MambaStack interleaves no stages (one line,
# layout/split.py).
HYBRID_NO_VP = ("builds no virtual pipeline stages for a hybrid stack",)
# Models TorchTitan 0.3.0 ships no implementation of (its models: llama3, llama4, qwen3, deepseek_v3, gpt_oss).
NOT_IN_TORCHTITAN = ("mixtral", "kimi", "nemotron", "qwen3-next", "deepseek-v4")


def one_line_refusal(reason: str, *names: str) -> None:
    assert "\n" not in reason and any(n in reason for n in names), reason


@pytest.mark.parametrize("name,system,precision,mode", _cases())
def test_megatron_plans_launch(name, system, precision, mode, monkeypatch):
    model, gpus, lay = planned(name, system, precision, mode, "megatron")
    if isinstance(lay, str):  # Megatron-LM cannot build the model: one line, pointing at TorchTitan
        one_line_refusal(lay, "Megatron-LM core_v0.16.1 cannot build", *HYBRID_NO_VP)
        return
    assert lay.precision == precision and (mode == "searched" or (lay.pp > 1 and lay.vp > 1))
    gpu = load_preset(system, num_gpus=gpus).gpu
    if model.is_hybrid and lay.vp > 1:
        # virtual stages of a hybrid stack: from 26.04 (the newest release, searched here) only, as '|' segments of
        # its pattern, not core_v0.16.1's launch; test_megatron_release_trees.py validates them in 26.04's and 26.08's
        # own trees
        from commbench.planner.layout.recipes import newest_release
        args = megatron_args(lay, model, release=newest_release())
        segments = args[args.index("--hybrid-override-pattern") + 1].split("|")
        assert len(segments) == lay.pp * lay.vp and "".join(segments) == model.layer_pattern and all(segments)
        return
    try:
        args = megatron_args(lay, model)
    except CommbenchError as exc:  # the emitter's own refusal (a hybrid's MTP, DeepSeek-V4): one line, the plan says why
        one_line_refusal(str(exc), "Megatron-LM core_v0.16.1 cannot build")
        return
    if arguments_module() is not None:
        megatron_whole_path(arguments_module(), args, layout=lay, model=model, gpus=gpus, gpu=gpu,
                            env=launch_env(lay, gpu.name), monkeypatch=monkeypatch)
    else:
        check_megatron_plan(args, lay, model, gpus, gpu.name, monkeypatch)


@pytest.mark.parametrize("name,system,precision,mode", _cases())
def test_torchtitan_plans_launch(name, system, precision, mode, tmp_path, monkeypatch):
    model, gpus, lay = planned(name, system, precision, mode, "torchtitan")
    if isinstance(lay, str):  # TorchTitan 0.3.0 has no such model or converter: one line, pointing elsewhere
        one_line_refusal(lay, "TorchTitan 0.3.0 has no", "cannot train in mxfp8 with TorchTitan 0.3.0", *HYBRID_NO_VP)
        # gpt-oss's expert K (2880) is no multiple of 128, which sm_100's MXFP8 quantization kernel needs
        assert model.name.startswith(NOT_IN_TORCHTITAN) or (precision == "nvfp4" and model.is_moe) or \
            (model.is_hybrid and mode == "pinned") or (precision == "mxfp8" and model.name.startswith("gpt-oss"))
        return
    assert lay.precision == precision and (mode == "searched" or (lay.pp > 1 and lay.vp > 1))
    # charged as run: no per-layer graphs, the whole-step graph only with pp = 1 and ep = 1; etp = 1; FSDP
    assert lay.cuda_graph != "layer" and (lay.cuda_graph == "none" or (lay.pp == 1 and lay.ep == 1))
    assert lay.distributed_optimizer and not lay.moe_a2a_overlap and (lay.etp == 1 or not model.is_moe)
    doc = torchtitan_plan(lay, model)
    assert "refused" not in doc, doc["refused"]
    check_titan_plan(doc, lay, model, gpus, system, tmp_path, monkeypatch)


def test_the_search_and_the_emitter_know_the_same_torchtitan_models():
    """search.frameworks.titan_zoo_name looks models up among TORCHTITAN_RECOMPUTE's names; the emitter writes
    TITAN_MODELS': one list, or an hf: model would be searched as one model and emitted as another."""
    from commbench.planner.emit.torchtitan import TITAN_MODELS
    from commbench.planner.search.frameworks import TORCHTITAN_RECOMPUTE
    assert sorted(TORCHTITAN_RECOMPUTE) == sorted(TITAN_MODELS)
