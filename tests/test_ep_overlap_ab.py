"""benchmarks/ep_overlap_ab.py: NVIDIA's EP overlap on/off measurements, each pair one layout with only the overlap
switched, the layouts as the sources state them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import ep_overlap_ab  # noqa: E402


def test_each_pair_is_its_sources_layout_with_ep_overlap_off():
    pairs = {name.split("(")[-1].rstrip(")") + " " + off.dispatcher: (model, preset, gpus, off, measured)
             for name, model, preset, gpus, off, measured in ep_overlap_ab.pairs()}
    assert set(pairs) == {"PR #1760 alltoall", "SKILL flex", "SKILL alltoall"}
    model, preset, gpus, off, measured = pairs["PR #1760 alltoall"]
    assert (model, preset, gpus, measured) == ("qwen3-235b-a22b", "b200-hgx", 64, (16.0, 17.2))
    assert (off.tp, off.pp, off.vp, off.ep, off.mbs, off.gbs, off.precision) == (1, 8, 4, 8, 1, 1024, "bf16")
    for key, measured_s in (("SKILL flex", (24.7138, 20.9920)), ("SKILL alltoall", (41.25, 31.31))):
        model, preset, gpus, off, measured = pairs[key]
        assert (model, preset, gpus, measured) == ("qwen3-30b-a3b", "h100-hgx", 16, measured_s)
        assert (off.tp, off.pp, off.ep, off.dp, off.mbs, off.gbs, off.precision) == (1, 1, 16, 16, 1, 1024, "bf16")
    assert pairs["SKILL flex"][3].cuda_graph == "layer" and pairs["SKILL alltoall"][3].cuda_graph == "none"
    assert not any(p[3].moe_a2a_overlap for p in pairs.values())


def test_it_prints_every_pair_and_the_mean_error(capsys):
    ep_overlap_ab.main()
    out = capsys.readouterr().out
    assert out.count("PR #1760") == 1 and out.count("(SKILL)") == 2
    assert "mean |error| of the on/off ratio" in out and "over 3 pairs" in out
