"""Megatron-LM flags of a hybrid Mamba/attention/MLP/MoE model (pretrain_mamba.py, megatron-core 0.16).

Names as Megatron-LM core_v0.16.1 defines them: `--hybrid-override-pattern` (megatron/training/
arguments.py, one character per layer from megatron/core/ssm/mamba_hybrid_layer_allocation.py
`Symbols`), `--is-hybrid-model` (selects hybrid_flops and the MoE-layer count in training.py),
`--mamba-num-heads`, `--mamba-head-dim`, `--mamba-state-dim`, `--mamba-num-groups` (TransformerConfig
fields), `--spec` (the layer spec mamba_builders.mamba_builder requires: megatron-core's mamba_stack_spec).
The activation (`--squared-relu` for Nemotron-H) and `--position-embedding-type none`
(HybridModelProvider's default: the Mamba layers carry position) come from the architecture (megatron_arch.py).
The layer split is MambaStack's: even, or `--decoder-first/last-pipeline-num-layers`, no
interleaving (split.py); from release 26.04 (megatron-core 0.17) the pattern cut by '|' into one segment per virtual
stage, interleaving too (split.pipe_pattern, written by megatron.py); the training script is pretrain_mamba.py, not
pretrain_gpt.py.
"""

from __future__ import annotations

from commbench.errors import CommbenchError
from commbench.planner.models.spec import ModelSpec

HYBRID_SCRIPT = "pretrain_mamba.py"
# pretrain_mamba.py builds with mamba_builders.mamba_builder (Megatron-LM core_v0.16.1), which raises "You must provide
# a valid Mamba layer spec via --spec" without one; examples/mamba/train.sh passes megatron-core's stack spec.
MAMBA_STACK_SPEC = ["--spec", "megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"]


# MTP in the hybrid model: first in megatron-core 0.17 (Megatron-LM 300d1b6550 "Add MTP support for hybrid models
# (#2363)", reapplied as 9d71cb1cd2). Release 26.04's Megatron-LM d7288711 builds a MultiTokenPredictionBlock in
# MambaModel (megatron/core/models/mamba/mamba_model.py:247), 26.04.01's 2edffadb too, and from 26.06's d0b3b775 on
# HybridModel does (megatron/core/models/hybrid/hybrid_model.py; 26.08's cd4afffa :296); 26.02's b0cc2706 and
# 26.02.01's 55ac7082 (megatron-core 0.16.x, the target core_v0.16.1) build none in either.
HYBRID_MTP_CORE = (0, 17, 0)


def mtp_layer_pattern(model: ModelSpec) -> str:
    """The layer types of one MTP depth of a hybrid model, in the hybrid allocator's symbols: attention then MoE ('*E')
    for a MoE model, as Nemotron-3 Super's config.json (mtp_hybrid_override_pattern "*E", which Megatron-Bridge's
    NemotronHBridge copies to the provider: v0.4.0 nemotron_h_bridge.py:306-307) and Megatron-Bridge's Nemotron-3.5
    Lightning recipes (v0.6.0 perf_recipes/nemotronh/gb200/nemotronh.py:465) give it; attention then MLP ('*-') for
    a dense one. The step model charges each MTP depth so: one attention and one MoE (or dense MLP) layer
    (models/counts.py flops_breakdown, param_counts)."""
    return "*E" if model.is_moe else "*-"


def hybrid_mtp_args(model: ModelSpec, release: str | None = None) -> list[str]:
    """The MTP block's layer pattern as `release`'s Megatron-LM (None: the target core_v0.16.1) takes it beside
    --mtp-num-layers (megatron.py adds that, and --mtp-use-repeated-layer): --mtp-hybrid-override-pattern, a
    TransformerConfig field from megatron-core 0.17 (d7288711 transformer_config.py:71), which validate_args turns
    into the unified '<main>/<mtp>/...' --hybrid-layer-pattern with one MTP segment per depth (d7288711
    megatron/training/arguments.py:621-632; cd4afffa :748-759; it warns the flag is deprecated in favour of that
    unified pattern) and from which it infers mtp_num_layers (d7288711 :711-725). Megatron-Bridge sets the same two
    fields (mtp_num_layers, mtp_hybrid_override_pattern). A release before HYBRID_MTP_CORE builds no MTP in the
    hybrid model: refused, naming that release's Megatron-LM."""
    if not model.num_mtp_layers:
        return []
    from commbench.planner.search.frameworks import megatron_release_name, release_core_at_least
    if not release_core_at_least(release, HYBRID_MTP_CORE):
        name, _ = megatron_release_name(release)
        raise CommbenchError(f"{name} cannot build {model.name}: its MambaModel builds no MTP layers (the model has "
                             f"{model.num_mtp_layers}), so the plan is not launchable there and writes no Megatron-LM "
                             "launch (no megatron_args.txt; its predicted figures include the MTP layers); plan with "
                             "--software 26.04 or newer (megatron-core 0.17 builds hybrid MTP), or without MTP (a "
                             f"--model-file copy of {model.name} with mtp_layers = 0)")
    return ["--mtp-hybrid-override-pattern", mtp_layer_pattern(model)]


def hybrid_model_args(model: ModelSpec, release: str | None = None) -> list[str]:
    """The hybrid model's flags; its MTP block's as `release` takes them (hybrid_mtp_args)."""
    out = ["--is-hybrid-model", "--hybrid-override-pattern", model.layer_pattern, *MAMBA_STACK_SPEC]
    out += hybrid_mtp_args(model, release)
    if model.num_mamba_layers:
        out += ["--mamba-num-heads", str(model.mamba_num_heads), "--mamba-head-dim", str(model.mamba_head_dim),
                "--mamba-state-dim", str(model.mamba_state_dim), "--mamba-num-groups", str(model.mamba_num_groups)]
    return out


def linear_attention_args(model: ModelSpec) -> list[str]:
    """Gated DeltaNet layers (Qwen3-Next) as megatron-core 0.16's TransformerConfig names them
    (experimental_attention_variant, linear_attention_freq, linear_*), and full attention's output gate."""
    if not model.linear_attention_freq:
        return []
    out = ["--experimental-attention-variant", "gated_delta_net",
           "--linear-attention-freq", str(model.linear_attention_freq),
           "--linear-conv-kernel-dim", str(model.gdn_conv_kernel),
           "--linear-key-head-dim", str(model.gdn_key_head_dim), "--linear-value-head-dim", str(model.gdn_value_head_dim),
           "--linear-num-key-heads", str(model.gdn_num_key_heads),
           "--linear-num-value-heads", str(model.gdn_num_value_heads)]
    return out + (["--attention-output-gate"] if model.attention_gate else [])
