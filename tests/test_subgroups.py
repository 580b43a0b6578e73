"""Sub-group sweeps: the right groups (contiguous vs strided), all at once, recorded in each Measurement."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from commbench.measure.bench import BenchConfig, PlannedPoint
from commbench.cli.app import app
from commbench.errors import CommbenchError
from commbench.measure.subgroups import SubgroupSpec, expand_points, make_groups, parse_group_sizes
from collectives import get_collective
from collectives.base import PointSpec
from commbench.dtypes import get_dtype
from commbench.comm.topology import from_ranks_per_rack


def test_contiguous_and_strided_groups():
    assert make_groups(8, 2, "contiguous") == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert make_groups(8, 2, "strided") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert make_groups(8, 4, "strided") == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert make_groups(8, 8, "strided") == make_groups(8, 8, "contiguous")


def test_default_sizes_are_powers_of_two_up_to_n():
    assert SubgroupSpec().sizes_for(8) == [2, 4, 8]
    assert SubgroupSpec().sizes_for(6) == [2, 6]
    assert parse_group_sizes("pow2") is None and parse_group_sizes("2,4") == (2, 4)


@pytest.mark.parametrize("sizes,match", [((16,), "must be <= the 8 ranks"), ((3,), "must divide the 8 ranks")])
def test_bad_sizes(sizes, match):
    with pytest.raises(CommbenchError, match=match):
        SubgroupSpec(sizes=sizes).sizes_for(8)
    with pytest.raises(CommbenchError, match="--group-layout='diagonal'"):
        SubgroupSpec(layouts=("diagonal",))


def test_expand_points_by_layout_size_and_algorithm():
    config = BenchConfig(collective="grad_reduce_scatter", sizes_bytes=(1024,),
                         subgroups=SubgroupSpec(sizes=(2, 4), layouts=("contiguous", "strided")))
    point = PlannedPoint(spec=PointSpec(size_bytes=1024, dtype=get_dtype("float32"),
                                        params={"algorithm": "flat,hierarchical"}), label="1 KiB")
    points = expand_points([point], config, get_collective("grad_reduce_scatter"), 4, from_ranks_per_rack(4, 2))
    keys = [(p.spec.params["algorithm"], len(p.groups[0]), p.group.layout, p.group.num_groups) for p in points]
    # g = 4 strided is the same group as contiguous: measured once
    assert keys == [("flat", 2, "contiguous", 2), ("hierarchical", 2, "contiguous", 2),
                    ("flat", 2, "strided", 2), ("hierarchical", 2, "strided", 2),
                    ("flat", 4, "contiguous", 1), ("hierarchical", 4, "contiguous", 1)]
    assert all(p.spec.params["ranks_per_rack"] == 2 for p in points)
    assert points[2].groups == ((0, 2), (1, 3))


def test_bench_cli_records_group_size_and_layout(tmp_path):
    out = tmp_path / "r.jsonl"
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--nproc", "4", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1",
                                      "--group-sizes", "2,4", "--group-layout", "contiguous,strided",
                                      "--ranks-per-rack", "2", "-J", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, records = lines[0], lines[1:]
    assert header["topology"]["racks"] == [[0, 1], [2, 3]]
    assert [(r["group_size"], r["group_layout"], r["num_groups"]) for r in records] == [
        (2, "contiguous", 2), (2, "strided", 2), (4, "contiguous", 1)]
    assert all(r["num_wrong"] == 0 for r in records)


def test_hierarchical_on_strided_subgroups(tmp_path):
    """Strided groups of 2 on 2x2 hold one rank per rack: hierarchical is just the cross-rack stage."""
    out = tmp_path / "g.jsonl"
    result = CliRunner().invoke(app, ["bench", "grad_reduce_scatter", "--nproc", "4", "-b", "64K", "-e", "64K", "-n", "2",
                                      "-w", "1", "--group-sizes", "2,4", "--group-layout", "strided",
                                      "--ranks-per-rack", "2", "--algorithm", "hierarchical", "-J", str(out)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()][1:]
    assert [(r["group_size"], r["group_layout"], r["metrics"]["num_racks_in_group"]) for r in records] == [
        (2, "strided", 2), (4, "strided", 2)]
    assert list(records[0]["stages_us_median"]) == [] and records[0]["metrics"]["ranks_per_rack_in_group"] == 1
    assert set(records[1]["stages_us_median"]) == {"rack_rs", "cross_rack_rs"}
    assert all(r["num_wrong"] == 0 for r in records)


@pytest.mark.parametrize("args,match", [
    (["--ranks-per-rack", "3"], "--ranks-per-rack=3"),
    (["--group-sizes", "3"], "--group-sizes=3"),
    (["--group-sizes", "8"], "--group-sizes=8"),
    (["--algorithm", "ring"], "--algorithm='ring'"),
    (["--racks", "0;1;2"], "--racks='0;1;2'"),  # the old spelling: its notice names --rack-ranks, the error --racks
    (["--rack-ranks", "0;1;2"], "--rack-ranks='0;1;2'"),
])
def test_bad_options_are_one_line_exit_2(args, match):
    result = CliRunner().invoke(app, ["bench", "grad_reduce_scatter", "--nproc", "4", "-b", "1K", "-e", "1K", *args])
    assert result.exit_code == 2
    assert match in result.output and "Traceback" not in result.output


def test_sizes_on_sub_groups_are_aligned_on_the_group_not_on_the_world(tmp_path):
    """all_gather on 4 ranks, -b 100 --group-sizes 2,4: the 2-rank groups measured 64 B (100 B aligned for 4 ranks,
    then for 2), while the header said '100 B -> 96 B' on 2 ranks, what nccl-tests measures on 2 ranks (4 B x
    (25 // 2 & -4) x 2). Each group size's sizes are now aligned on that group size."""
    out = tmp_path / "ag.jsonl"
    result = CliRunner().invoke(app, ["bench", "all_gather", "--nproc", "4", "-b", "100", "-e", "100", "-n", "2", "-w", "0",
                                      "--group-sizes", "2,4", "-J", str(out)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()][1:]
    assert [(r["group_size"], r["size_bytes"], r["count"], r["num_wrong"]) for r in records] == [
        (2, 96, 12, 0), (4, 64, 4, 0)]
