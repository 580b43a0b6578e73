"""Emitted Megatron-LM plans against Megatron's own code (megatron-core from PyPI, CPU torch).

Called (megatron-core): TransformerConfig / MLATransformerConfig construction (its __post_init__
validation: pipeline layout, uneven stages, account-for-embedding/loss, MoE and EP-overlap rules),
DistributedDataParallelConfig, ConstantNumMicroBatchesCalculator, parallel_state.initialize_model_parallel
on torch's fake process-group backend (world size = the plan's GPUs), and the layer-split functions the
model build calls per (pp rank, virtual stage): get_num_layers_to_build, get_transformer_layer_offset,
get_mtp_num_layers_to_build.
Transformer Engine (GPU-only, not installable here) is taken to be 2.10 where megatron-core asks its
version (fp8 with moe_act/layernorm recompute needs >= 2.6; per-layer graphs with delayed wgrad >= 2.10,
which the plan's notes then state), and its fused MoE permute kernels (--moe-permute-fusion, TE >= 2.1)
are answered present.
Reproduced (Megatron-LM's megatron/training/arguments.py is not on PyPI; NVIDIA/Megatron-LM
@000c4ac24f61): the flag names parse_args defines, and the validate_args checks listed in
`reproduced_validate_args`.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import warnings

import pytest

from tests.framework_plans import INSTALL_HINT, case_ids, plan_cases

mcore = pytest.importorskip("megatron.core", reason=f"megatron-core is not installed: {INSTALL_HINT}")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from megatron.core import parallel_state  # noqa: E402
from megatron.core.distributed import DistributedDataParallelConfig  # noqa: E402
from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator  # noqa: E402
from megatron.core.transformer.transformer_block import get_num_layers_to_build  # noqa: E402
from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from commbench.costmodel import load_preset  # noqa: E402
from commbench.planner.emit.megatron import launch_env, megatron_args  # noqa: E402
from commbench.planner.layout.split import choose_split  # noqa: E402
from tests.megatron_lm import layer_split_built, tokens  # noqa: E402

# Flags Megatron-LM's parse_args defines that are not TransformerConfig fields (reproduced from
# megatron/training/arguments.py @000c4ac24f61: _add_network_size_args, _add_training_args,
# _add_distributed_args, _add_data_args, _add_mixed_precision_args, _add_moe_args, _add_mla_args,
# _add_transformer_engine_args).
ARGUMENTS_PY_FLAGS = {
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--kv-channels",
    "--group-query-attention", "--num-query-groups", "--max-position-embeddings", "--position-embedding-type",
    "--normalization", "--swiglu", "--untie-embeddings-and-output-weights", "--multi-latent-attention",
    "--mtp-num-layers", "--disable-bias-linear", "--seq-length", "--micro-batch-size", "--global-batch-size",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--recompute-modules",
    "--sequence-parallel", "--tp-comm-overlap", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--num-virtual-stages-per-pipeline-rank", "--overlap-grad-reduce", "--overlap-param-gather",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
    "--use-distributed-optimizer", "--context-parallel-size", "--bf16", "--grad-reduce-in-bf16",
    "--reuse-grad-buf-for-mxfp8-param-ag",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-experts", "--moe-layer-freq",
    "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size", "--moe-grouped-gemm", "--moe-router-topk",
    "--moe-token-dispatcher-type", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
    "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim",
    "--fp8-format", "--fp8-recipe", "--fp8-param-gather", "--fp4-format", "--fp4-recipe",
    "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "--cpu-offloading-num-layers",
    "--attention-dropout", "--hidden-dropout", "--vocab-size", "--make-vocab-size-divisible-by", "--rotary-base",
    "--rotary-percent", "--rope-type", "--rotary-scaling-factor", "--mscale", "--mscale-all-dim", "--use-rope-scaling",
    "--rope-scaling-factor", "--window-size", "--window-attn-skip-freq", "--quick-geglu", "--squared-relu",
    "--cuda-graph-impl", "--cuda-graph-scope", "--no-check-for-nan-in-loss-and-grad", "--moe-permute-fusion",
    "--moe-pad-experts-for-cuda-graph-inference", "--no-rope-fusion",
    # _add_distributed_args / _add_checkpointing_args (Megatron-FSDP)
    "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "--ckpt-format",
    "--num-distributed-optimizer-instances", "--fsdp-double-buffer", "--keep-fp8-transpose-cache",
    # _add_network_size_args (hybrid models, pretrain_mamba.py)
    "--hybrid-override-pattern", "--is-hybrid-model", "--spec",
}
RENAMED = {"fp8_format": "fp8", "fp4_format": "fp4", "num_experts": "num_moe_experts",
           "decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
           "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage",
           "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size",
           "fp8_param_gather": "fp8_param", "norm_epsilon": "layernorm_epsilon"}  # core_transformer_config_from_args' translations
HOPPER = {"h100", "h200", "h800"}


def config_flags(cls) -> set[str]:
    """Flags current Megatron-LM generates from a megatron-core config dataclass (argparse_meta names)."""
    out = set()
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("argparse_meta", {}) if f.metadata else {}
        out.update(meta.get("arg_names", ["--" + f.name.replace("_", "-")]))
    return out


def eval_pattern(text: str) -> list[int]:
    """Megatron's moe_freq_type for list patterns (arguments.py _eval_pattern: only ,digits[]()+*)."""
    assert not re.search(r"[^,\d\[\]\(\)\+\*]", text)
    return eval(text)  # noqa: S307 - the character set above admits only list arithmetic


def reproduced_validate_args(ns: dict, world: int, env: dict[str, str], gpu: str) -> None:
    """validate_args checks (reproduced, arguments.py @000c4ac) on the emitted arguments."""
    tp, pp, cp = ns["tensor_model_parallel_size"], ns["pipeline_model_parallel_size"], ns["context_parallel_size"]
    assert world % (tp * pp * cp) == 0, "world size is not divisible by total_model_size"
    assert sum(k in ns for k in ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                                 "pipeline_model_parallel_layout")) <= 1
    if "num_virtual_stages_per_pipeline_rank" in ns or "pipeline_model_parallel_layout" in ns:
        assert pp > 1, "interleaved schedule needs pipeline-model-parallel size > 1 (overlap_p2p_comm default)"
    elif "decoder_first_pipeline_num_layers" not in ns and "decoder_last_pipeline_num_layers" not in ns:
        layers = ns["num_layers"] + ("account_for_embedding_in_pipeline_split" in ns) + \
            ("account_for_loss_in_pipeline_split" in ns)
        assert layers % pp == 0, "Number of layers should be divisible by the pipeline-model-parallel size"
    if ns.get("overlap_param_gather"):
        assert ns.get("use_distributed_optimizer") and ns.get("overlap_grad_reduce")
    if ns.get("fp8_param_gather"):
        assert ns.get("use_distributed_optimizer")
    assert not ("fp4_format" in ns and "fp8_format" in ns)
    if cp > 1:
        assert ns["seq_length"] % (2 * cp) == 0
    assert ns["max_position_embeddings"] >= ns["seq_length"]
    if "kv_channels" not in ns:   # kv_channels = hidden / heads
        assert ns["hidden_size"] % ns["num_attention_heads"] == 0
    if ns.get("multi_latent_attention") and ns.get("rope_type") != "yarn":
        # rope fusion is on unless --no-rope-fusion, and MLATransformerConfig refuses it without YaRN
        assert ns.get("no_rope_fusion"), "apply_rope_fusion for MLA only works with YARN RoPE"
    if ns.get("tp_comm_overlap"):
        assert ns.get("sequence_parallel"), "TP comm overlap needs sequence parallelism"
    if ns.get("expert_model_parallel_size", 1) > 1:
        assert ns["num_experts"] % ns["expert_model_parallel_size"] == 0
    if ns.get("recompute_granularity") == "selective":
        assert "recompute_method" not in ns
    if ns.get("mtp_num_layers"):
        assert ns["position_embedding_type"] in ("rope", "none")
    if ns.get("moe_grouped_gemm"):
        assert ns.get("bf16")
    if ns.get("cuda_graph_impl") == "local" and "full_iteration" in str(ns.get("cuda_graph_scope")):
        assert ns.get("no_check_for_nan_in_loss_and_grad"), "full_iteration graphs need no NaN check"
    if ns.get("cuda_graph_impl") == "local" and ns.get("expert_model_parallel_size", 1) > 1:
        assert ns.get("moe_pad_experts_for_cuda_graph_inference"), \
            "--moe-pad-experts-for-cuda-graph-inference must be set when using CUDA graphs with expert parallelism"
    if ns.get("use_megatron_fsdp"):
        assert env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1", "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS > 1"
        assert ns.get("ckpt_format") == "fsdp_dtensor", "Megatron FSDP only supports fsdp_dtensor checkpoint format"
        assert ns.get("data_parallel_sharding_strategy") in ("no_shard", "optim", "optim_grads", "optim_grads_params")
    elif (tp > 1 or cp > 1) and gpu in HOPPER and not ns.get("overlap_moe_expert_parallel_comm"):
        assert env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", "TP/CP on Hopper need CUDA_DEVICE_MAX_CONNECTIONS=1"


def transformer_config(ns: dict):
    """What core_transformer_config_from_args builds from these arguments (megatron-core's own class)."""
    cls = MLATransformerConfig if ns.get("multi_latent_attention") else TransformerConfig
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {RENAMED.get(k, k): v for k, v in ns.items() if RENAMED.get(k, k) in names}
    if cls is MLATransformerConfig:   # arguments.py: --q-lora-rank defaults to None (no query low rank), not 512
        kw.setdefault("q_lora_rank", None)
    for key in ("recompute_modules", "cuda_graph_scope"):
        if key in kw and not isinstance(kw[key], list):
            kw[key] = [kw[key]]
    if "moe_layer_freq" in kw:
        kw["moe_layer_freq"] = eval_pattern(kw["moe_layer_freq"])
    if ns.get("swiglu"):
        kw |= {"activation_func": F.silu, "gated_linear_unit": True}
    if ns.get("quick_geglu"):
        from megatron.core.fusions.fused_bias_geglu import quick_gelu
        kw |= {"activation_func": quick_gelu, "gated_linear_unit": True}
    if isinstance(kw.get("window_size"), str):
        kw["window_size"] = tuple(int(x) for x in kw["window_size"].split(","))
    kw["add_bias_linear"] = not ns.get("disable_bias_linear", False)
    if not ns.get("group_query_attention"):
        kw["num_query_groups"] = None
    kw |= {"params_dtype": torch.bfloat16, "pipeline_dtype": torch.bfloat16}
    return cls(**kw)


@pytest.fixture
def fake_world():
    """Megatron's process groups on torch's fake backend, torn down after the test."""
    def init(world: int, ns: dict, vp: int | None):
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=ns["tensor_model_parallel_size"],
            pipeline_model_parallel_size=ns["pipeline_model_parallel_size"],
            virtual_pipeline_model_parallel_size=vp, context_parallel_size=ns["context_parallel_size"],
            expert_model_parallel_size=ns.get("expert_model_parallel_size", 1),
            expert_tensor_parallel_size=ns.get("expert_tensor_parallel_size"), create_gloo_process_groups=False,
            num_distributed_optimizer_instances=ns.get("num_distributed_optimizer_instances", 1))
    yield init
    parallel_state.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()


def check_megatron_plan(args: list[str], lay, model, gpus: int, gpu: str, monkeypatch) -> None:
    """The reproduced flag set and validate_args rules, then megatron-core's own TransformerConfig,
    DDP config, micro-batch calculator, process groups (fake backend) and layer split."""
    import megatron.core.utils as mcore_utils
    from packaging.version import Version
    monkeypatch.setattr(mcore_utils, "get_te_version", lambda: Version("2.10.0"))
    import megatron.core.transformer.moe.moe_utils as moe_utils
    for name in ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                 "fused_sort_chunks_by_index_with_probs", "fused_unpermute"):
        if getattr(moe_utils, name, None) is None:
            monkeypatch.setattr(moe_utils, name, object(), raising=False)
    if lay.fsdp_replicas > 1:  # megatron-core builds the HSDP (inter-instance) groups with einops
        pytest.importorskip("einops", reason=f"einops is not installed: {INSTALL_HINT}")
    known = ARGUMENTS_PY_FLAGS | config_flags(MLATransformerConfig)
    assert [a for a in args if a.startswith("--") and a not in known] == []
    ns = tokens(shlex.split(shlex.join(args)))
    reproduced_validate_args(ns, gpus, launch_env(lay, gpu), gpu)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformer_config(ns)  # megatron-core's own validation
        DistributedDataParallelConfig(use_distributed_optimizer=bool(ns.get("use_distributed_optimizer")),
                                      use_megatron_fsdp=bool(ns.get("use_megatron_fsdp")),
                                      fsdp_double_buffer=bool(ns.get("fsdp_double_buffer")),
                                      keep_fp8_transpose_cache=bool(ns.get("keep_fp8_transpose_cache")),
                                      data_parallel_sharding_strategy=ns.get("data_parallel_sharding_strategy", "no_shard"),
                                      num_distributed_optimizer_instances=ns.get("num_distributed_optimizer_instances", 1),
                                      overlap_grad_reduce=bool(ns.get("overlap_grad_reduce")),
                                      overlap_param_gather=bool(ns.get("overlap_param_gather")),
                                      fp8_param_gather=bool(ns.get("fp8_param_gather")),
                                      reuse_grad_buf_for_mxfp8_param_ag=bool(ns.get("reuse_grad_buf_for_mxfp8_param_ag")),
                                      # training.py passes accumulate_allreduce_grads_in_fp32, which --bf16 turns on
                                      # unless --grad-reduce-in-bf16 (arguments.py 720-723): the 2 B the model charges
                                      grad_reduce_in_fp32=not ns.get("grad_reduce_in_bf16"))
    assert ns.get("grad_reduce_in_bf16"), "a plan without --grad-reduce-in-bf16 trains fp32 gradient buffers"
    dp = gpus // (lay.tp * lay.pp * lay.cp)
    calc = ConstantNumMicroBatchesCalculator(lay.gbs, lay.mbs, dp, None, 0)  # asserts gbs % (mbs*dp) == 0
    assert calc.get() == lay.num_microbatches

    vp = config.virtual_pipeline_model_parallel_size
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=gpus)
    try:
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=lay.tp, pipeline_model_parallel_size=lay.pp,
            virtual_pipeline_model_parallel_size=vp, context_parallel_size=lay.cp,
            expert_model_parallel_size=ns.get("expert_model_parallel_size", 1),
            expert_tensor_parallel_size=ns.get("expert_tensor_parallel_size"), create_gloo_process_groups=False,
            num_distributed_optimizer_instances=ns.get("num_distributed_optimizer_instances", 1))
        built, offsets, mtp = layer_split_built(config, lay.pp, vp)
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    from commbench.planner.layout.split import split_vocab
    split = choose_split(model, lay.pp, lay.vp, split_vocab(model, lay.tp))   # the rows the step model charged
    # Megatron builds exactly the split the step model charged, every layer once and in order.
    assert built == split.decoder_layers()
    assert sum(built) == model.num_layers and offsets == [sum(built[:i]) for i in range(len(built))]
    assert mtp == [s.count("m") for s in split.stages]


@pytest.mark.parametrize("index", range(len(case_ids())), ids=case_ids())
def test_megatron_builds_the_emitted_plan(index, monkeypatch):
    case = plan_cases()[index]
    gpu = load_preset(case.system, num_gpus=case.gpus).gpu.name
    check_megatron_plan(megatron_args(case.layout, case.model, flex_backend="deepep"), case.layout, case.model,
                        case.gpus, gpu, monkeypatch)


def test_megatron_rejects_the_split_plans_used_to_emit(fake_world):
    """The issue's DeepSeek-V3 TP1 PP4 VP16 plan emitted the old way (no split flags) fails in Megatron's
    own layer split, so the test above would catch a regression."""
    case = next(c for c in plan_cases() if c.id == "deepseek-v3-gb300-nvl72-pinned-tp1pp4vp16ep32")
    ns = tokens(megatron_args(case.layout, case.model))
    assert "|" in ns.pop("pipeline_model_parallel_layout")
    ns["num_virtual_stages_per_pipeline_rank"] = 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((AssertionError, ValueError)):
            config = transformer_config(ns)
            fake_world(case.gpus, ns, 16)
            parallel_state.set_pipeline_model_parallel_rank(0)
            get_num_layers_to_build(config, vp_stage=0, pp_rank=0)
