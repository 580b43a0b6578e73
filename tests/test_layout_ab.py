"""benchmarks/layout_ab.py: one team's measured layouts of one run (Megatron-MoE-ModelZoo, Qwen3-235B-A22B on 256
H100), each as its source states it, priced by the step model."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import layout_ab  # noqa: E402


def test_each_layout_is_its_sources():
    [(run, model, preset, gpus, layouts)] = layout_ab.runs()
    assert (model, preset, gpus) == ("qwen3-235b-a22b", "h100-hgx", 256) and "8017e11" in run
    got = [(lay.tp, lay.pp, lay.vp, lay.ep, lay.etp, lay.dp, lay.mbs, lay.recompute, lay.dispatcher, lay.moe_a2a_overlap,
            lay.fsdp, step) for _, lay, step in layouts]
    assert got == [
        (2, 8, 4, 32, 1, 16, 1, "layernorm+moe_act", "flex", False, False, 19.7),
        (2, 8, 4, 32, 1, 16, 1, "layernorm+moe_act", "flex", True, False, 17.6),
        (2, 1, 1, 8, 1, 128, 4, "full", "flex", False, True, 17.6),
        (2, 32, 3, 8, 1, 4, 1, "layernorm+moe_act", "alltoall", False, False, 24.2),
        (4, 8, 4, 8, 1, 8, 1, "none", "flex", False, False, 29.0),
    ]
    for _, lay, _ in layouts:   # 256 GPUs, gbs 2048, BF16, the launch's flags
        assert lay.world == 256 and lay.gbs == 2048 and lay.precision == "bf16" and lay.sequence_parallel
        assert not lay.tp_comm_overlap and lay.cuda_graph == "none" and lay.dp_overlap and lay.distributed_optimizer


def test_it_prints_every_layout_and_the_mean_ratio_error(capsys):
    layout_ab.main([])
    out = capsys.readouterr().out
    assert out.count("EP8") == 3 and out.count("EP32") == 1
    assert "mean |error| of the ratio to the first layout" in out and "over 4 layouts" in out
