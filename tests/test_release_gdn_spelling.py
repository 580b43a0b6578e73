"""Qwen3-Next (Gated DeltaNet) plans at --software 25.11 wrote core_v0.16.1's --experimental-attention-variant
gated_delta_net, an option 25.11's Megatron-LM (0d8e0714cd29, megatron-core 0.16.0rc0) does not have: it spells the
layer type --linear-attention-type (arguments.py:3282-3283, read from the fetched tree). The plan now writes the
release's spelling (release_flags.RELEASE_SPELLINGS), and refuses 25.09, whose core_v0.14.0 has no GDN, in one line.
The same argv through 25.11's own parse_args: tests/test_megatron_release_trees.py (needs MEGATRON_LM_GIT)."""

from __future__ import annotations

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.data.reference import megatron_release_flags_json
from commbench.planner import Layout, check_layout, load_model
from commbench.planner.emit.megatron import megatron_args
from commbench.planner.layout.release_flags import RELEASE_SPELLINGS, refused_flags, release_args


def _argv(release: str) -> list[str]:
    model, layout = load_model("qwen3-next-80b-a3b"), Layout.for_world(64, tp=1, pp=2, vp=2, ep=8, etp=1, mbs=1,
                                                                        gbs=512)
    check_layout(model, layout, 64)
    return release_args(megatron_args(layout, model, release=release), release)


def test_25_11_gets_its_own_spelling_and_no_flag_it_refuses():
    argv = _argv("25.11")
    assert argv[argv.index("--linear-attention-type") + 1] == "gated_delta_net"
    assert "--experimental-attention-variant" not in argv
    assert refused_flags(argv, "25.11") == []
    newer = _argv("26.02")   # megatron-core 0.16.0 on: the target's spelling
    assert newer[newer.index("--experimental-attention-variant") + 1] == "gated_delta_net"


def test_the_spelling_cites_the_tree_the_table_records_for_25_11():
    data = megatron_release_flags_json()["releases"]["25.11"]
    assert "--experimental-attention-variant" in data["lacks"] and "--linear-attention-freq" not in data["lacks"]
    (source,) = [src for old, _, new, src in RELEASE_SPELLINGS if new[0] == "--linear-attention-type"]
    assert source.startswith(data["ref"][:12])


def test_25_09_is_refused_in_one_line():
    result = CliRunner().invoke(app, ["plan", "--model", "qwen3-next-80b-a3b", "--system", "gb200-nvl72", "--gpus",
                                      "64", "--software", "25.09", "--layout", "tp=1,pp=2,vp=2,ep=8,mbs=1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    line = " ".join(result.output.split())
    assert "--software='25.09' is invalid" in line and "cannot build qwen3-next-80b-a3b: it has no Gated DeltaNet" in line
    assert "the releases that build it: 25.11," in line
