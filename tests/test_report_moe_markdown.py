"""`commbench report`'s README.md tabled MoE all-to-all points with the plain collectives' columns: one 'busbw
(GB/s)' of 0.109 (the round trip's, unnamed) under a figure drawing dispatch 0.144 and combine 0.150 GB/s against
tokens per rank, and no tokens per rank at all. Now its table has the terminal's MoE columns (render._moe_columns)."""

from __future__ import annotations

from commbench.results.records import Measurement
from commbench.results.report import markdown_table, write_report


def _moe(tokens: int) -> Measurement:
    return Measurement(run_id="r", collective="moe_all_to_all", backend="gloo", size_bytes=532 * tokens, count=1,
                       dtype="bfloat16", op=None, in_place=False, world_size=2, group_size=2, iters=3, warmup_iters=1,
                       time_us_median=623.4, algbw_gbps=0.218, busbw_gbps=0.109, num_wrong=0,
                       params={"tokens_per_rank": tokens, "hidden": 256, "routing": "uniform",
                               "dispatch_mode": "per-expert", "dispatch_dtype": "bf16"},
                       metrics={"dispatch_busbw_gbps": 0.144, "combine_busbw_gbps": 0.150, "imbalance_rank": 1.04})


def test_moe_markdown_names_dispatch_combine_and_round_trip():
    lines = markdown_table([_moe(64)])
    header = lines[0].replace("\\|", "/")   # "p99\|max": an escaped pipe inside a cell
    assert "tok/rank" in header and "dispatch busbw (GB/s)" in header and "combine busbw (GB/s)" in header
    assert "round-trip busbw (GB/s)" in header and "| busbw (GB/s) |" not in header
    row = lines[2].split("|")
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row]))
    assert cells["tok/rank"] == "64" and cells["dispatch busbw (GB/s)"] == "0.144"
    assert cells["combine busbw (GB/s)"] == "0.150" and cells["round-trip busbw (GB/s)"] == "0.109"


def test_report_readme_moe_table(tmp_path):
    write_report([_moe(64), _moe(128)], tmp_path, sources=["moe.jsonl"])
    readme = (tmp_path / "README.md").read_text()
    assert "| 64 | " in readme and "dispatch busbw (GB/s)" in readme
