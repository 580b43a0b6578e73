"""benchmarks/flag_ab.py: NVIDIA's matched one-flag measurements, the layouts as the sources state them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import flag_ab  # noqa: E402


def test_the_graph_pair_is_the_skills_layout_with_only_the_graphs_switched():
    lay = flag_ab.GRAPH_AB["layout"]
    assert (flag_ab.GRAPH_AB["model"], flag_ab.GRAPH_AB["preset"], flag_ab.GRAPH_AB["gpus"]) == \
        ("qwen3-30b-a3b", "h100-hgx", 16)
    assert (lay.tp, lay.pp, lay.ep, lay.dp, lay.mbs, lay.gbs, lay.precision, lay.dispatcher, lay.cuda_graph,
            lay.moe_a2a_overlap) == (1, 1, 16, 16, 1, 1024, "bf16", "alltoall", "none", False)
    assert flag_ab.GRAPH_AB["measured_s"] == (41.36, 42.00)
    g = flag_ab.graph_ab()
    assert g["measured_ratio"] < 1.0                     # MEASURED: the graphs were slower
    assert g["host_on"] < g["host_off"]                  # what the model credits them with: launches not exposed


def test_the_nano_memory_check_reads_the_measured_set_and_the_model_agrees_it_ooms():
    mem = flag_ab.nano_memory()
    assert set(mem) == {"none", "moe_act", "selective"}
    assert not any(fits for _, fits in mem.values())     # every measured set OOMed on 80 GB
    assert mem["none"][0] - mem["moe_act"][0] > 0


def test_it_prints_both_checks(capsys):
    flag_ab.main([])
    out = capsys.readouterr().out
    assert "per-layer CUDA graphs" in out and "MEASURED 41.36" in out
    assert "moe_act frees" in out and "MEASURED 4.194 GB" in out
