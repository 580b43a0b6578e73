"""plan.json's megatron.launch is true only where the release's own parse_args takes every flag written: a section
whose release_flags.refused_flags is not empty said launch true (probe EJ F4: a cpu_offload_layers pin at 25.09 wrote
--cpu-offloading-num-layers, which 25.09's arguments.py has not, with launch true and the refused flag listed beside
it). Pins like it are refused before planning now (tests/test_release_pin_flags.py); this holds for any flag."""

from __future__ import annotations

from commbench.planner import load_model
from commbench.planner.emit.plan import megatron_section
from commbench.planner.layout.spec import Layout


def _section(release: str):
    layout = Layout.for_world(8, tp=1, pp=1, ep=1, mbs=1, gbs=128, cpu_offload_layers=4)
    return megatron_section(layout, load_model("llama3-8b"), gpu_name="h100", fabric_name="h100-hgx", release=release)


def test_a_line_its_release_cannot_parse_is_no_launch():
    section = _section("25.09")
    assert section["release"]["refused_flags"] and section["args"]   # written, for editing by hand
    assert section["launch"] is False
    assert "25.09" in section["refused"] and "--cpu-offloading-num-layers" in section["refused"]


def test_a_line_its_release_parses_is_a_launch():
    section = _section("26.02")
    assert section["release"]["refused_flags"] == [] and section["launch"] is True and "refused" not in section
