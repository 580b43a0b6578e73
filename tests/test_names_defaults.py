"""One meaning per option name (issue 29, item 5): --racks is a count of racks in every command (a rank
list is --rack-ranks; the old list spelling works with a notice); --max-bytes defaults to 16M where
measured and 8G where predicted."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.topology import TopologySpec

runner = CliRunner()


def header(path):
    return json.loads(path.read_text().splitlines()[0])


def test_racks_is_a_count_in_bench_and_the_rank_list_moved_to_rack_ranks(tmp_path):
    count = tmp_path / "count.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "8", "-n", "2", "-w", "1",
                                 "--racks", "2", "-J", str(count)])
    assert result.exit_code == 0, result.output
    assert header(count)["topology"]["racks"] == [[0], [1]]
    old = tmp_path / "old.jsonl"
    result = runner.invoke(app, ["bench", "all_reduce", "--nproc", "2", "-b", "8", "-e", "8", "-n", "2", "-w", "1",
                                 "--racks", "0;1", "-J", str(old)])
    assert result.exit_code == 0, result.output
    assert "--racks with a rank list is now --rack-ranks" in " ".join(result.output.split())
    assert header(old)["topology"]["racks"] == [[0], [1]]


def test_racks_count_must_divide_the_ranks():
    with pytest.raises(Exception, match="divides the 4 ranks"):
        TopologySpec(racks="3").resolve(4, [])
    assert TopologySpec(racks="2").resolve(4, []).racks == ((0, 1), (2, 3))
    result = runner.invoke(app, ["bench", "all_reduce", "--racks", "2", "--rack-ranks", "0;1"])
    assert result.exit_code == 2 and "conflict" in result.output


def test_max_bytes_defaults_follow_one_rule():
    from commbench.units import MEASURED_MAX_BYTES, PREDICTED_MAX_BYTES
    assert (MEASURED_MAX_BYTES, PREDICTED_MAX_BYTES) == ("16M", "8G")
    doc = json.loads(runner.invoke(app, ["predict", "--system", "h200-hgx", "-c", "all_reduce", "-g", "8",
                                         "--json"]).stdout)
    assert max(p["size_bytes"] for p in doc["rows"]) == 8 << 30
    for command in (["verify-plan", "--help"], ["nccl-tuner", "--help"], ["bench", "--help"]):
        text = " ".join(runner.invoke(app, command, env={"COLUMNS": "250"}).output.split())
        assert ("16M" in text) if command[0] in ("verify-plan", "bench") else ("8G" in text)
