"""Which tier a sub-group curve measures comes from the racks its groups' actual ranks fall in, not from the layout's
name (found from outside: `bench --rack-ranks '0,2;1,3' --group-layout contiguous,strided` -- cyclic Slurm placement --
was fitted 'contiguous (1 domain) scale_up' and 'strided (2 domains) scale_out', though contiguous {0,1},{2,3} each
span both racks and strided {0,2},{1,3} each sit inside one: the profile swapped the tiers)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel.fit_records import num_domains_of, racks_spanned_by_groups
from commbench.results.records import JsonlWriter, Measurement, RunHeader


def _header(racks=None, hostnames=("h",) * 4, world: int = 4) -> RunHeader:
    topology = None if racks is None else {"tiers": ["scale-up", "scale-out"], "num_racks": len(racks),
                                           "ranks_per_rack": len(racks[0]), "racks": racks, "source": "--rack-ranks"}
    return RunHeader(run_id="r", started_at="2026-01-01T00:00:00", argv=["synthetic"], commbench_version="0",
                     python_version="3.11", torch_version=None, nccl_version=None, cuda_version=None,
                     cupy_version=None, backend="gloo", world_size=world, hostnames=list(hostnames),
                     devices=["cpu"] * world, nccl_env={}, launcher="synthetic", topology=topology)


def _record(group: int, layout: str, size: int = 1 << 20, world: int = 4) -> Measurement:
    return Measurement(run_id="r", collective="all_reduce", backend="gloo", size_bytes=size, count=size // 4,
                       dtype="float32", op="sum", in_place=True, world_size=world, group_size=group,
                       group_layout=layout, num_groups=world // group, iters=5, warmup_iters=1,
                       time_us_median=50 + size / 1e3 * (2 if layout == "contiguous" else 1), num_wrong=0)


def test_cyclic_racks_put_contiguous_pairs_across_racks_and_strided_pairs_inside_one():
    cyclic = _header([[0, 2], [1, 3]])
    assert num_domains_of(_record(2, "contiguous"), cyclic) == 2
    assert num_domains_of(_record(2, "strided"), cyclic) == 1
    assert num_domains_of(_record(4, "world"), cyclic) == 2
    block = _header([[0, 1], [2, 3]])   # block placement keeps what the layout names say
    assert num_domains_of(_record(2, "contiguous"), block) == 1
    assert num_domains_of(_record(2, "strided"), block) == 2


def test_cyclic_hosts_count_like_recorded_racks_and_uneven_racks_take_the_widest_group():
    hosts = _header(hostnames=("a", "b", "a", "b"))   # a launch with no topology: a host is a domain
    assert num_domains_of(_record(2, "contiguous"), hosts) == 2
    assert num_domains_of(_record(2, "strided"), hosts) == 1
    uneven = _header([[0, 1, 2], [3]])   # {0,1} inside rack 0, {2,3} across: timed together, the wider sets the tier
    assert racks_spanned_by_groups(_record(2, "contiguous"), [[0, 1, 2], [3]]) == 2
    assert num_domains_of(_record(2, "contiguous"), uneven) == 2
    assert racks_spanned_by_groups(_record(2, "contiguous"), [[0, 1], [2]]) is None   # rank 3 in no rack: unknown


def test_fit_labels_the_tiers_of_a_cyclic_run_from_its_racks(tmp_path):
    path = tmp_path / "cyclic.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(_header([[0, 2], [1, 3]]))
        for layout in ("contiguous", "strided"):
            for size in (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22):
                writer.write(_record(2, layout, size))
    result = CliRunner().invoke(app, ["fit", str(path), "--json"])
    assert result.exit_code == 0, result.output
    tiers = {c["layout"]: (c["num_domains"], c["tier"]) for c in json.loads(result.output)["curves"]}
    assert tiers == {"contiguous": (2, "scale_out"), "strided": (1, "scale_up")}


def test_a_record_that_cannot_be_placed_on_cyclic_racks_is_said_in_the_notes():
    from commbench.costmodel.fit_records import collect_points, placement_unknown

    header = _header([[0, 2], [1, 3]])
    odd = _record(2, "contiguous", world=6)   # a 6-rank record in a 4-rank run: its ranks match no recorded rack
    assert placement_unknown(odd, header) and not placement_unknown(_record(2, "contiguous"), header)
    assert not placement_unknown(odd, _header([[0, 1], [2, 3]]))   # block racks: the fallback is what they say
    notes = collect_points([odd, _record(2, "strided")], {"r": header})[1]
    assert any("1 point(s) of runs whose racks are not consecutive" in n for n in notes), notes
