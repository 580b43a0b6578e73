"""Megatron-LM flags of a hybrid Mamba/attention/MLP/MoE model (pretrain_mamba.py, megatron-core 0.16).

Names as Megatron-LM core_v0.16.1 defines them: `--hybrid-override-pattern` (megatron/training/
arguments.py, one character per layer from megatron/core/ssm/mamba_hybrid_layer_allocation.py
`Symbols`), `--is-hybrid-model` (selects hybrid_flops and the MoE-layer count in training.py),
`--mamba-num-heads`, `--mamba-head-dim`, `--mamba-state-dim`, `--mamba-num-groups` (TransformerConfig
fields), `--spec` (the layer spec mamba_builders.mamba_builder requires: megatron-core's mamba_stack_spec).
The activation (`--squared-relu` for Nemotron-H) and `--position-embedding-type none`
(HybridModelProvider's default: the Mamba layers carry position) come from the architecture (megatron_arch.py).
The layer split is MambaStack's: even, or `--decoder-first/last-pipeline-num-layers`, no
interleaving (split.py); the training script is pretrain_mamba.py, not pretrain_gpt.py.
"""

from __future__ import annotations

from commbench.errors import CommbenchError
from commbench.planner.models.spec import ModelSpec

HYBRID_SCRIPT = "pretrain_mamba.py"
# pretrain_mamba.py builds with mamba_builders.mamba_builder (Megatron-LM core_v0.16.1), which raises "You must provide
# a valid Mamba layer spec via --spec" without one; examples/mamba/train.sh passes megatron-core's stack spec.
MAMBA_STACK_SPEC = ["--spec", "megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"]


def hybrid_model_args(model: ModelSpec) -> list[str]:
    if model.num_mtp_layers:
        raise CommbenchError(f"Megatron-LM core_v0.16.1 cannot build {model.name}: its MambaModel builds no MTP "
                             f"layers (the model has {model.num_mtp_layers}); the prediction includes them")
    out = ["--is-hybrid-model", "--hybrid-override-pattern", model.layer_pattern, *MAMBA_STACK_SPEC]
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
