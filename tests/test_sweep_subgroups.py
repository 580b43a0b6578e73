"""Sub-group and rack entries in sweep files: parsed with bench's option names, expanded through the
same functions bench uses, recorded per point, resumable (gloo, 4 forked ranks)."""

from __future__ import annotations

from collections import Counter

import pytest

from commbench.errors import CommbenchError
from commbench.results.records import Measurement, RunHeader, read_records
from commbench.measure.subgroups import SubgroupSpec
from commbench.sweep import SweepJob, parse_sweep, plan_sweep, run_sweep_on_backend
from commbench.sweep.plan import keys_known_before_launch
from commbench.sweep.resume import finished_before_launch
from commbench.comm.topology import TopologySpec
from tests.distributed import run_ranks

PAIRS = {"collective": "all_reduce", "sizes": ["1K", "16K"], "group_sizes": [2], "group_layout": "contiguous,strided"}
GRAD_RS = {"collective": "grad_reduce_scatter", "sizes": ["64K"], "algorithm": "flat,hierarchical"}


def sweep_of(*runs, **defaults):
    return parse_sweep({"defaults": {"iters": 3, "warmup_iters": 1, "timeout_s": 20, **defaults}, "run": list(runs)},
                       "t.toml")


def test_entry_keys_build_the_bench_specs():
    spec = sweep_of(PAIRS, {**GRAD_RS, "ranks_per_rack": 2}, {"collective": "all_gather", "sizes": ["1K"],
                                                              "group_sizes": "pow2"})
    pairs, grad_rs, gather = spec.entries
    assert pairs.subgroups == SubgroupSpec(sizes=(2,), layouts=("contiguous", "strided")) and pairs.params == {}
    assert gather.subgroups == SubgroupSpec(sizes=None) and grad_rs.subgroups is None
    assert spec.topology == TopologySpec(ranks_per_rack=2) and pairs.topology is None
    assert grad_rs.params == {"algorithm": "flat,hierarchical"}  # declared by grad_reduce_scatter.param_names
    assert sweep_of(PAIRS, topology="nvl72").topology == TopologySpec(preset="nvl72")


@pytest.mark.parametrize("run, fragment", [
    ({**PAIRS, "group_sizes": ["two"]}, "group_sizes=['two'] is invalid"),
    ({**PAIRS, "group_sizes": [0]}, "group_sizes=0 is invalid"),
    ({**PAIRS, "group_layout": "diagonal"}, "group_layout='diagonal' is invalid: allowed: contiguous, strided"),
    ({**PAIRS, "ranks_per_rack": 0}, "ranks_per_rack=0 is invalid"),
    ({**PAIRS, "topology": "dgx1"}, "topology='dgx1' is invalid: allowed presets: nvl72, hgx8"),
    ({**PAIRS, "ranks_per_rack": 2, "racks": "0-1;2-3"}, "ranks_per_rack and racks conflict"),
    ({**GRAD_RS, "algorithim": "flat"}, "algorithim='flat' is invalid: unknown key"),
    ({"collective": "moe_all_to_all", "tokens_per_rank": [8], "top_kk": 2}, "top_kk=2 is invalid: unknown key"),
])
def test_bad_rack_and_group_keys_name_the_entry_and_field(run, fragment):
    with pytest.raises(CommbenchError) as info:
        sweep_of(PAIRS, run)
    assert "run[1]" in str(info.value) and fragment in str(info.value), str(info.value)


def test_entries_must_agree_on_one_rack_topology():
    with pytest.raises(CommbenchError, match=r"run\[1\].*ranks_per_rack=4.*differ from run\[0\]'s.*ranks_per_rack=2"):
        sweep_of({**GRAD_RS, "ranks_per_rack": 2}, {**GRAD_RS, "ranks_per_rack": 4})


def test_planning_checks_groups_against_the_world():
    with pytest.raises(CommbenchError, match=r"run\[0\] \(all_reduce\) on 4 ranks: group_sizes=3 .*divide"):
        plan_sweep(sweep_of({**PAIRS, "group_sizes": [3]}), 4, backend="gloo")
    moe = {"collective": "moe_all_to_all", "tokens_per_rank": [8], "hidden": 64, "num_experts": 4, "top_k": 2,
           "group_sizes": [2, 4]}
    assert [p.point.group.num_groups for p in plan_sweep(sweep_of(moe), 4, backend="gloo")] == [2, 1]


def test_points_expand_per_layout_and_algorithm_with_unique_keys():
    points = plan_sweep(sweep_of(PAIRS, GRAD_RS, ranks_per_rack=2), 4, backend="gloo")
    assert [p.label for p in points] == ["0:all_reduce float32 1 KiB g=2 contiguous",
                                         "0:all_reduce float32 16 KiB g=2 contiguous",
                                         "0:all_reduce float32 1 KiB g=2 strided",
                                         "0:all_reduce float32 16 KiB g=2 strided",
                                         "1:grad_reduce_scatter float32 64 KiB flat",
                                         "1:grad_reduce_scatter float32 64 KiB hierarchical"]
    assert len({p.key for p in points}) == len(points)
    assert [p.point.groups for p in points[:3:2]] == [((0, 1), (2, 3)), ((0, 2), (1, 3))]
    assert all(p.point.spec.params["ranks_per_rack"] == 2 for p in points[4:])  # the launch's racks


def measurements(path):
    return [r for r in read_records([path]) if isinstance(r, Measurement)]


def test_sub_group_sweep_on_4_ranks_records_groups_and_racks_and_resumes(tmp_path):
    out = tmp_path / "out.jsonl"
    first = sweep_of({**PAIRS, "sizes": ["1K"]}, ranks_per_rack=2)
    job = SweepJob(sweep=first, backend="gloo", output_path=str(out), show_progress=False)
    assert run_ranks(run_sweep_on_backend, 4, args=(job,), timeout_s=90)[0].num_ok == 2

    full = sweep_of(PAIRS, GRAD_RS, ranks_per_rack=2)
    assert finished_before_launch(out, full, 4, "gloo") is None
    job = SweepJob(sweep=full, backend="gloo", output_path=str(out), resume=True, show_progress=False)
    outcome = run_ranks(run_sweep_on_backend, 4, args=(job,), timeout_s=90)[0]
    assert (outcome.num_skipped, outcome.num_ok, outcome.num_failed, outcome.stopped) == (2, 4, 0, None)
    assert finished_before_launch(out, full, 4, "gloo") == 6  # the keys the ranks recorded, racks included

    records = measurements(out)
    planned = [p.key for p in plan_sweep(full, 4, backend="gloo")]
    assert Counter(r.point_key for r in records) == Counter(planned)  # every point exactly once
    assert all(r.status == "ok" and r.num_wrong == 0 for r in records)
    groups = [(r.collective, r.group_size, r.group_layout, r.num_groups) for r in records]
    assert groups == [("all_reduce", 2, "contiguous", 2), ("all_reduce", 2, "strided", 2),
                      ("all_reduce", 2, "contiguous", 2), ("all_reduce", 2, "strided", 2),
                      ("grad_reduce_scatter", 4, "world", 1), ("grad_reduce_scatter", 4, "world", 1)]
    assert sorted(r.params["algorithm"] for r in records[4:]) == ["flat", "hierarchical"]
    headers = [r for r in read_records([out]) if isinstance(r, RunHeader)]
    assert len(headers) == 2 and all(h.topology["racks"] == [[0, 1], [2, 3]] for h in headers)


def test_keys_with_racks_from_host_names_are_known_only_on_the_ranks(monkeypatch):
    from commbench.comm.topology import RANKS_PER_RACK_ENV

    monkeypatch.delenv(RANKS_PER_RACK_ENV, raising=False)
    assert keys_known_before_launch(sweep_of(PAIRS))  # all_reduce's keys hold no racks
    assert keys_known_before_launch(sweep_of(GRAD_RS, ranks_per_rack=2))
    assert not keys_known_before_launch(sweep_of(GRAD_RS))


def test_sub_group_points_and_their_size_notes_are_aligned_on_the_group():
    """all_gather of 100 B on 2-rank groups of a 4-rank world was planned as 64 B (aligned for 4 ranks) and the dry
    run's note said '100 B -> 64 B' on 4 ranks; nccl-tests on 2 ranks measures 96 B. Both now align on the group."""
    from commbench.sweep.plan import size_notes

    spec = parse_sweep({"defaults": {"iters": 2}, "run": [{"collective": "all_gather", "sizes": ["100"],
                                                           "group_sizes": [2, 4]}]}, "t.toml")
    points = plan_sweep(spec, 4, backend="gloo")
    assert [(len(p.point.groups[0]), p.point.spec.size_bytes) for p in points] == [(2, 96), (4, 64)]
    notes = size_notes(spec, 4)
    assert len(notes) == 2 and "on 2 ranks" in notes[0] and "100 B -> 96 B" in notes[0] and "100 B -> 64 B" in notes[1]


def test_pow2_on_an_odd_world_says_which_sizes_it_left_out():
    # found from outside: --group-sizes pow2 on 3 ranks measured only g=3 and said nothing of g=2
    from commbench.sweep.plan import size_notes

    note = SubgroupSpec(sizes=None).left_out(3)
    assert note is not None and "group size(s) 2 left out" in note and "divide the 3 ranks" in note
    assert "group size(s) 4 left out" in SubgroupSpec(sizes=None).left_out(6) and "measured: 2, 6" in \
        SubgroupSpec(sizes=None).left_out(6)
    assert "group size(s) 2, 4 left out" in SubgroupSpec(sizes=None).left_out(5)
    assert SubgroupSpec(sizes=None).left_out(4) is None and SubgroupSpec(sizes=(3,)).left_out(3) is None
    notes = size_notes(sweep_of({"collective": "all_gather", "sizes": ["1K"], "group_sizes": "pow2"}), 3)
    assert any("run[0]" in n and "group_sizes pow2 on 3 ranks: group size(s) 2 left out" in n for n in notes), notes


def _bench_header_notes(backend):
    from collectives import get_collective
    from commbench.measure.bench import BenchConfig, subgroup_notes

    config = BenchConfig(collective="all_reduce", sizes_bytes=(100,), subgroups=SubgroupSpec(sizes=None))
    return subgroup_notes(config, get_collective("all_reduce"), backend.world_size)


def test_bench_pow2_on_three_ranks_notes_the_left_out_size_in_its_header():
    assert any("group size(s) 2 left out" in n for n in run_ranks(_bench_header_notes, 3)[0])
