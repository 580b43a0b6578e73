"""Where commbench's Megatron FLOPs count differs from what a Megatron log prints, FLOPS.md says so (probe AI,
session 35, F2 / F3): the plan keeps its count, and the file that calls it Megatron's names each difference and its
size, which these tests recompute from the count itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from commbench.planner import load_model
from commbench.planner.models.counts import flops_breakdown

FLOPS_MD = (Path(__file__).resolve().parents[1] / "commbench" / "data" / "FLOPS.md").read_text(encoding="utf-8")
HF = Path(__file__).parent / "data" / "hf"


def _megatron_gdn_mtp(m) -> float:
    """Megatron-LM core_v0.16.1 training.py's count of a Gated DeltaNet model with MTP: its linear_attention_pattern
    runs over num_layers + mtp_num_layers, `0 if (i + 1) % linear_attention_freq == 0 else 1`, so an MTP layer off
    the frequency counts as a GDN layer where commbench counts it as full attention."""
    fl = flops_breakdown(m)
    attention = (fl.attention_proj + fl.attention_core) / (m.num_attention_layers + m.num_mtp_layers)
    gdn = fl.linear_attention / m.num_linear_attention_layers
    as_gdn = sum((i + 1) % m.linear_attention_freq != 0
                 for i in range(m.num_layers, m.num_layers + m.num_mtp_layers))
    return fl.total - as_gdn * (attention - gdn)


@pytest.mark.parametrize("name,said", [("Qwen3.5-35B-A3B", "+0.22%"), ("Qwen3.5-122B-A10B", "+0.19%"),
                                       ("Qwen3.5-27B", "+0.04%")])
def test_flops_md_names_the_gdn_mtp_layer_megatron_counts_as_gdn(name, said):
    m = load_model(f"hf:{HF / name}")
    ours, theirs = flops_breakdown(m).total, _megatron_gdn_mtp(m)
    assert f"{name} {said}" in FLOPS_MD or f"{name} (" in FLOPS_MD
    assert f"{100 * (ours / theirs - 1):+.2f}%" == said
    if name == "Qwen3.5-35B-A3B":
        assert f"{ours / 1e9:.2f} here vs {theirs / 1e9:.2f} in its log ({said})" in FLOPS_MD


def test_flops_md_names_the_hybrid_mtp_projection_megatron_bridge_does_not_count():
    m = load_model("nemotron-3.5-lightning-30b-a3b")
    fl = flops_breakdown(m)
    bridge = fl.total - fl.mtp_proj   # Megatron-Bridge flop_utils.py hybrid_flops: MTP layers and logits, no projection
    assert round(bridge / 1e9, 2) == m.published_flops_per_token_gflop == 28.15
    pct = 100 * fl.mtp_proj / bridge
    assert f"Lightning {fl.total / 1e9:.2f} here vs 28.15 published (+{pct:.1f}%)" in FLOPS_MD
    super_ = flops_breakdown(load_model("nemotron-3-super-120b-a12b"))
    assert f"Super +{100 * super_.mtp_proj / (super_.total - super_.mtp_proj):.2f}%" in FLOPS_MD
