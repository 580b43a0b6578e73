"""The README said `balanced` routing (exactly equal tokens per expert) is what published Megatron benchmarks force
(probe PE). Megatron's --moe-router-force-load-balancing replaces the router's logits with random normal values
(megatron-core core_v0.16.1 transformer/moe/router.py:655-657, moe_utils.py:1110-1131): uniform random top-k."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_names_uniform_as_megatrons_forced_balance():
    text = " ".join(README.read_text().split())
    assert "as published Megatron benchmarks force" not in text
    start = text.index("Routing models:")
    routing = text[start:text.index("`zipf:<alpha>`", start)]
    uniform = routing[routing.index("`uniform`"):]
    assert "--moe-router-force-load-balancing" in uniform and "router.py:655-657" in uniform, uniform
