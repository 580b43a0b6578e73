"""NCCL's algorithm x protocol structure (costmodel/nccl_model.py), checked by hand on a toy fabric."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from commbench.costmodel import (Fabric, NcclSystem, Tier, algorithm_protocol_times_s, best_algorithm_protocol,
                                 collective_time_s, load_preset)
from commbench.costmodel.accuracy import by_regime, curve_points
from commbench.costmodel.nccl_eval import _least, fastest_time_s, pair_times_s
from commbench.costmodel.nccl_model import combos
from commbench.errors import CommbenchError

# 4 GPUs per domain, 16 GPUs; NVLink 100 GB/s, NIC 10 GB/s; 2 channels make NCCL's LL128 cap bind
TOY_SYSTEM = NcclSystem(arch="hopper", channels=2, ring_efficiency=0.8, nvls_efficiency=0.6, net_efficiency=0.9,
                        sharp=True, launch_us=0.0)


def toy(**changes) -> Fabric:
    up, out = changes.pop("up_gbps", 100.0), changes.pop("out_gbps", 10.0)
    return Fabric(name="toy", gpu=None, domain_size=4, num_gpus=16, curves=(),
                  tiers={"scale_up": Tier(name="nvlink", link_gbps_per_gpu=up),
                         "scale_out": Tier(name="nic", link_gbps_per_gpu=out)},
                  nccl=dataclasses.replace(TOY_SYSTEM, **changes))


# (collective, ranks, domains, algorithm, protocol, latency_us, algbw_gbps), from tuning.cc's
# baseLat + hops x hwLat and busBw (channels x rate x protocol share, capped) x the algbw ratio, at NVIDIA/nccl
# v2.27.7-1 (nccl_tables.NCCL_RELEASE): tree/Simple base 8.4 and NVLink hop 4.0 (tuning.cc:135, 145), NVLS NVLink hop
# 25 (tuning.cc:147), ring LL at 1/2 the busBw (tuning.cc:279), multi-node LL cap of a non-AMD host 39 / 20.4
# (tuning.cc:166, 234-236)
HAND = [
    # one domain, 4 ranks: 2(n-1) = 6 ring steps over NVLink, busbw base 0.8 x 100 = 80
    ("all_reduce", 4, 1, "ring", "LL", 6.6 + 6 * 0.6, min(141, 80 / 2) * 4 / 6),
    ("all_reduce", 4, 1, "ring", "LL128", 14 + 6 * 1.9, min(80 * 0.92, 2 * 36.7) * 4 / 6),
    ("all_reduce", 4, 1, "ring", "Simple", 8.4 + 6 * 3.4, 80 * 4 / 6),
    ("all_reduce", 4, 1, "tree", "LL", 6.8 + 2 * 3 * 0.6, min(80 * 0.92, 2 * 38.7) / 3.8 / 2),
    ("all_reduce", 4, 1, "tree", "LL128", 14 + 2 * 3 * 1.25, min(80 * 0.92 * 7 / 9, 2 * 36.7) / 2),
    ("all_reduce", 4, 1, "tree", "Simple", 8.4 + 2 * 3 * 4.0, 80 * 0.92 / 2),
    ("all_reduce", 4, 1, "nvls", "Simple", 25.0, 0.6 * 100 * 5 / 6),
    # 2 domains of 4: a ring's base min(80, the 4 ranks' NICs, at most one per channel (2) x 0.9 x 10 = 18),
    # a tree's min(80, 2 x 18 = 36): on 2 nodes NCCL's tree runs at bwIntra, up to twice the NICs' rate
    # (test_tree_across_domains_...); ring: 4 network hops (2 x nodes), 10 NVLink hops paying at least NCCL's
    # net overhead (1 us, x3 for Simple)
    ("all_reduce", 8, 2, "ring", "LL", 6.6 + 10 * 1.0 + 4 * 2.7, min(39, 18 / 2) * 8 / 14),
    ("all_reduce", 8, 2, "ring", "LL128", 14 + 10 * 1.9 + 4 * 4.0, min(18 * 0.92, 2 * 36.7) * 8 / 14),
    ("all_reduce", 8, 2, "ring", "Simple", 8.4 + 10 * 3.4 + 4 * 14.0, 18 * 8 / 14),
    ("all_reduce", 8, 2, "tree", "LL", 6.8 + 2 * (3 * 0.6 + 5.0), 36 * 0.92 / 3.8 / 2),
    ("all_reduce", 8, 2, "tree", "LL128", 14 + 2 * (3 * 1.25 + 8.5), 36 * 0.92 * 120 / 128 / 2),
    ("all_reduce", 8, 2, "tree", "Simple", 8.4 + 2 * (3 * 4.0 + 14.0), 36 * 0.92 / 2),
    # 4 domains of 4: NCCL's tree at bwInter, the NICs in use (2 channels: 18), capped at 2 x 36 (4+ nodes)
    ("all_reduce", 16, 4, "tree", "Simple", 8.4 + 2 * (3 * 4.0 + 2 * 14.0), min(18 * 0.92, 2 * 36.0) / 2),
    ("all_reduce", 8, 2, "nvls", "Simple", 25.0 + 18.0, min(60, 4 * 9) * 5 / 6),  # NVLS across domains: SHARP
    ("all_reduce", 8, 2, "nvls_tree", "Simple", 25.0 + 2 * 14.0, min(60, 4 * 9) * 5 / 6),
    ("all_reduce", 8, 2, "collnet_direct", "Simple", 2 * (3.7 + 3 * 0.4) + 31.0, min(80, 2 * 9) * 0.85 / 2),
    ("all_reduce", 8, 2, "collnet_chain", "Simple", 2 * 3 * 2.8 + 30.0, min(80, 2 * 9) / 2),
    # reduce-scatter with one rank per domain: PAT; n - 1 ring steps
    ("reduce_scatter", 2, 2, "pat", "Simple", 8.0 + 1 * 14.0 / 3.5 + 2 * 2.8, 9 * 0.75 * 2 / 1),
    ("reduce_scatter", 4, 1, "ring", "LL", 6.6 + 3 * 0.6, min(141, 80 / 2) * 4 / 3),
    ("all_gather", 4, 1, "nvls", "Simple", 25.0, 0.6 * 100 * 5 / 6),  # NCCL: NVLS algbw 5/6 of busBw, any collective
    # broadcast: n hops, Simple at tree's per-hop latency
    ("broadcast", 4, 1, "ring", "Simple", 8.4 + 4 * 4.0, 80.0),
    ("broadcast", 4, 1, "ring", "LL", 6.6 + 4 * 0.6, 80 / 2),
]


@pytest.mark.parametrize("case", HAND, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}-{c[3]}-{c[4]}")
def test_each_algorithm_protocol_by_hand(case):
    collective, n, d, algorithm, protocol, latency_us, algbw_gbps = case
    sizes = np.array([0.0, 1 << 20, 1 << 30])
    times = algorithm_protocol_times_s(toy(), collective, sizes, n, d)
    expected = latency_us * 1e-6 + sizes / (algbw_gbps * 1e9)
    np.testing.assert_allclose(times[algorithm, protocol], expected, rtol=1e-9)


def test_only_pairs_nccl_offers_are_returned():
    assert set(algorithm_protocol_times_s(toy(), "all_reduce", 1024.0, 4, 1)) == {
        ("ring", "LL"), ("ring", "LL128"), ("ring", "Simple"), ("tree", "LL"), ("tree", "LL128"), ("tree", "Simple"),
        ("nvls", "Simple")}  # NVLS-tree and CollNet need several domains
    no_sharp = toy(sharp=False, nvls_efficiency=0.0)
    assert set(algorithm_protocol_times_s(no_sharp, "all_reduce", 1024.0, 8, 2)) == {
        ("ring", "LL"), ("ring", "LL128"), ("ring", "Simple"), ("tree", "LL"), ("tree", "LL128"), ("tree", "Simple")}
    assert ("pat", "Simple") not in algorithm_protocol_times_s(toy(), "all_gather", 1024.0, 8, 2)  # 4 per domain
    assert set(algorithm_protocol_times_s(toy(), "broadcast", 1024.0, 8, 2)) == {
        ("ring", "LL"), ("ring", "LL128"), ("ring", "Simple")}


def test_best_is_nccls_own_pick_timed_by_our_model():
    """best_algorithm_protocol names the pair NCCL's own model picks (nccl_own: its tree correction factor and ring
    plateau, none of commbench's terms), with that pair's time by commbench's model; collective_time_s (the planner's)
    stays the least pair by commbench's model."""
    from commbench.costmodel.nccl_own import own_times_us

    sizes = 2.0 ** np.arange(3, 34)
    times = algorithm_protocol_times_s(toy(), "all_reduce", sizes, 8, 2)
    choice = best_algorithm_protocol(toy(), "all_reduce", sizes, 8, 2)
    own = own_times_us(toy(), "all_reduce", sizes, 8, 2)
    for i, (a, p) in enumerate(zip(choice.algorithm, choice.protocol)):
        assert own[str(a), str(p)][i] == min(t[i] for t in own.values())
        assert choice.time_s[i] == times[str(a), str(p)][i]
    least = np.min(np.stack(list(times.values())), axis=0)
    np.testing.assert_allclose(collective_time_s(toy(), "all_reduce", sizes, 8, 2), least)
    assert choice.protocol[0] == "LL" and choice.protocol[-1] == "Simple"  # latency first, bandwidth last
    forced = best_algorithm_protocol(toy(), "all_reduce", sizes, 8, 2, algorithm="ring", protocol="LL128")
    np.testing.assert_allclose(forced.time_s, times["ring", "LL128"])
    np.testing.assert_allclose(collective_time_s(toy(), "all_reduce", sizes, 8, 2, algorithm="ring", protocol="LL128"),
                               times["ring", "LL128"])


def _first_size_leaving_ll(fabric, n: int, d: int) -> float:
    sizes = 2.0 ** np.arange(6, 34, 0.25)
    choice = best_algorithm_protocol(fabric, "all_reduce", sizes, n, d, algorithm="ring")
    return float(sizes[np.argmax(choice.protocol != "LL")])


def test_protocol_switch_moves_up_with_bandwidth_and_with_latency():
    base = _first_size_leaving_ll(toy(), 4, 1)
    # twice the link rate: every transfer takes half as long, so latency rules to larger sizes
    assert _first_size_leaving_ll(toy(up_gbps=200.0), 4, 1) > base
    # more ranks: more hops, a larger latency gap between LL and LL128/Simple
    assert _first_size_leaving_ll(toy(), 16, 4) > _first_size_leaving_ll(toy(), 4, 4)


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather", "broadcast"])
def test_monotone_in_size_and_bandwidth(collective):
    sizes = np.sort(2.0 ** np.random.default_rng(1).uniform(0, 35, 400))
    for n, d in ((4, 1), (8, 2), (16, 4), (4, 4)):
        for name, time_s in algorithm_protocol_times_s(toy(), collective, sizes, n, d).items():
            assert np.all(np.diff(time_s) >= 0), (n, d, name)
        slow = collective_time_s(toy(), collective, sizes, n, d)
        fast = collective_time_s(toy(up_gbps=200.0, out_gbps=20.0), collective, sizes, n, d)
        assert np.all(np.diff(slow) >= 0) and np.all(fast <= slow)


def test_large_batches_match_the_exhaustive_minimum():
    fabric = load_preset("h100-hgx", num_gpus=64)
    rng = np.random.default_rng(7)
    domains = rng.integers(1, 9, 20_000)
    groups = domains * rng.integers(1, 9, 20_000)
    sizes = 2.0 ** rng.uniform(0, 34, 20_000)
    for collective in ("all_reduce", "reduce_scatter"):
        pairs = combos(collective)
        exact = _least(pair_times_s(fabric, collective, sizes, groups, domains, pairs)[0], groups)
        fast, _ = fastest_time_s(fabric, collective, sizes, groups, domains, pairs)
        assert np.all(fast >= exact * (1 - 1e-12)) and np.all(fast <= exact * 1.005)


def test_errors_name_the_field():
    with pytest.raises(CommbenchError, match="protocol='LL64'"):
        best_algorithm_protocol(toy(), "all_reduce", 1024, 4, 1, protocol="LL64")
    with pytest.raises(CommbenchError, match="algorithm='pat'"):
        best_algorithm_protocol(toy(), "all_reduce", 1024, 4, 1, algorithm="pat")
    with pytest.raises(CommbenchError, match="NCCL-tuned"):
        algorithm_protocol_times_s(toy(), "all_to_all", 1024, 4, 1)
    with pytest.raises(CommbenchError, match="arch"):
        NcclSystem(arch="volta", channels=2, ring_efficiency=0.8, net_efficiency=0.9)


def test_profile_round_trip_keeps_the_nccl_parameters(tmp_path):
    fabric = load_preset("gb200-nvl72")
    again = Fabric.from_json(fabric.to_json())
    assert again.nccl == fabric.nccl
    np.testing.assert_allclose(collective_time_s(again, "all_reduce", 1 << 20, 72), collective_time_s(fabric, "all_reduce", 1 << 20, 72))


def test_held_out_published_curves_stay_within_what_was_measured():
    """benchmarks/data/published-curves.json; issue 20's goal: median <= 15% over all sizes, <= 10%
    from 1 MiB up, no regime biased by more than 25%. These bounds held on the curves of the preset's own
    fabric before the 8x H100 NCCL 2.18.5 curve joined them (from 1 MiB up then 11.3%, now 9.5%; its small
    sizes, set on H200 at NCCL 2.20.5, are 11-39% optimistic from 64 KiB to 16 MiB: middle bias now +10.2%), so a change that
    makes them worse fails."""
    data = json.loads((Path(__file__).parents[1] / "benchmarks" / "data" / "published-curves.json").read_text())
    errors = [(p.size_bytes, p.relative_error) for curve in data["curves"]
              if curve["role"] == "heldout" and not curve.get("note") for p in curve_points(curve)]
    summary = by_regime(errors)
    assert summary["all"].median_abs <= 0.15
    assert summary["from 1 MiB"].median_abs <= 0.12
    assert all(abs(s.bias) <= 0.25 for name, s in summary.items())


def test_ring_across_domains_uses_the_nics_of_its_ranks_in_each_domain():
    """A ring crossing domains moves its bytes through the NICs of its ranks in each domain together (NCCL
    spreads channels over NICs; nccl-tests issue 160): one rank per domain runs at one NIC's rate, m ranks
    at m NICs' rate until the in-domain ring bounds it (an 8-GPU node's 8 NICs: about its NVLink ring)."""
    fabric = load_preset("h100-hgx", num_gpus=64)
    size = 8 * 2**30

    def ring_busbw(n, d):
        t = float(collective_time_s(fabric, "all_gather", size, n, d, algorithm="ring"))
        return size * (n - 1) / n / t / 1e9

    one_nic, two_nics, four_nics = ring_busbw(2, 2), ring_busbw(4, 2), ring_busbw(8, 2)
    inside = ring_busbw(8, 1)
    assert 40 <= one_nic <= 50                      # 46-48 GB/s per 400 Gb/s NIC (nccl-tests issue 290)
    assert two_nics == pytest.approx(2 * one_nic, rel=0.05)
    assert four_nics == pytest.approx(4 * one_nic, rel=0.05)
    assert ring_busbw(16, 2) == pytest.approx(inside, rel=0.05)   # 8 NICs' 376 GB/s: the NVLink ring bounds it
    assert ring_busbw(16, 2) <= inside * 1.001


# NCCL's tree across nodes (NVIDIA/nccl v2.20.3-1 src/graph/tuning.cc, ncclTopoTuneModel, lines 175-183:
# bw = nNodes <= 2 ? bwIntra : bwInter; busBw = nChannels x bw; tree: min(busBw x .92, nChannels x
# perChMaxTreeBw)). A tree graph's channels each enter and leave a node on one NIC and spread over the node's
# NICs (search.cc: nChannels x bwInter is the NICs in use), and on 2 nodes the search raises bwIntra up to
# 2 x bwInter ("increase bwIntra for trees (2 nodes or collnet)", search.cc lines 1014-1016), bounded by the
# in-node links. So: busBw = min(.92 x min(in-domain ring, k x NICs in use x NIC rate), channels x cap), k = 2
# on 2 nodes, 1 beyond; NICs in use = min(ranks per domain, channels). The cap commbench times with is what the tree
# achieves (nccl_tables.TREE_ACHIEVED_PER_CHANNEL_GBPS: NVIDIA's Blackwell tuning data from v2.28.3-1).
def _tree_busbw_nccl(fabric, m: int, d: int) -> float:
    s = fabric.nccl
    up_ring = s.ring_efficiency * fabric.tiers["scale_up"].link_gbps_per_gpu
    net = s.net_efficiency * fabric.tiers["scale_out"].link_gbps_per_gpu
    from commbench.costmodel import nccl_tables as T
    cap = T.TREE_ACHIEVED_PER_CHANNEL_GBPS[s.arch][min(d, 3) - 1]
    nics = min(m, s.channels)
    return min(0.92 * min(up_ring, (2 if d <= 2 else 1) * nics * net), s.channels * cap)


@pytest.mark.parametrize("preset", ["h100-hgx", "h200-hgx", "h800-hgx", "b200-hgx", "b300-hgx",
                                    "gb200-nvl72", "gb300-nvl72"])
def test_tree_across_domains_spreads_its_channels_over_the_nics_as_nccl_models_it(preset):
    """Every preset, one to all ranks per domain, 2 to 16 domains: the tree Simple's busBw is NCCL's, not one
    NIC's rate for all channels together (the old model priced a 2x8 H100 tree at ~40 GB/s busbw)."""
    from commbench.costmodel.presets import preset_names
    assert set(preset_names()) == {"h100-hgx", "h200-hgx", "h800-hgx", "b200-hgx", "b300-hgx",
                                   "gb200-nvl72", "gb300-nvl72"}  # a new preset joins this test
    probe = load_preset(preset)
    fabric = load_preset(preset, num_gpus=16 * probe.domain_size)
    sizes = np.array([1.0, 2.0]) * 2**30
    for m in sorted({1, 2, 4, 8, fabric.domain_size}):
        for d in (2, 3, 4, 16):
            t = algorithm_protocol_times_s(fabric, "all_reduce", sizes, m * d, d)["tree", "Simple"]
            algbw = (sizes[1] - sizes[0]) / (t[1] - t[0]) / 1e9
            assert algbw * 2 == pytest.approx(_tree_busbw_nccl(fabric, m, d), rel=1e-9), (m, d)


def test_two_node_tree_goes_beyond_one_nic():
    """The probe's case: 2 x 8 H100, forced tree, 8 GiB: nccl-tests busbw well above one 400G NIC's ~47 GB/s
    ("On two nodes, NCCL uses the tree ... which can indeed go beyond the network bottleneck", NVIDIA/nccl-tests
    issue 196)."""
    fabric = load_preset("h100-hgx", num_nodes=4)
    size = 8 * 2**30
    for n, d in ((16, 2), (32, 4)):
        t = float(collective_time_s(fabric, "all_reduce", size, n, d, algorithm="tree"))
        busbw = size / t * 2 * (n - 1) / n / 1e9
        assert busbw > 4 * 47, (n, d, busbw)


def test_tree_across_many_gb200_racks_is_timed_at_blackwells_retuned_cap_and_picked_by_nccls_own():
    """coreweave/nccl-tests README "Expected Performance / GB200 / 20 Racks" (NCCL 2.26.2, NVLS and CollNet off): 16 GiB
    all_reduce 404.77 GB/s busbw on 1,440 GPUs. NCCL's tree across 3+ nodes is nChannels x bwInter x .92, capped at
    nChannels x perChMaxTreeBw (v2.27.7-1 src/graph/tuning.cc:266, 281): 16 channels on 16 NICs give ~690, which
    v2.26.2/v2.27.7's Blackwell cap (2 x 36 = 72 per channel) leaves alone (the model said 671, +66%). NVIDIA
    retuned GB200-NVL72 from v2.28.3-1 to 24 per channel on 3+ nodes (tuning.cc:191; 20 for LL128, :185): 384. NCCL's
    own pick (at NCCL_RELEASE, the older caps) still names the tree there, as the run's release did."""
    from commbench.costmodel import nccl_tables as T
    from commbench.costmodel.nccl_own import own_times_us

    fabric = load_preset("gb200-nvl72", num_gpus=1440)
    size = 16 * 2**30
    times = algorithm_protocol_times_s(fabric, "all_reduce", np.array([size / 2, size]), 1440, 20)
    t = times["tree", "Simple"]
    asymptote = (size / 2) / (t[1] - t[0]) / 1e9 * 2    # NCCL's busBw: a tree's algbw is half of it
    assert asymptote == pytest.approx(16 * 24.0, rel=1e-9)
    busbw = size / t[1] * 2 * 1439 / 1440 / 1e9
    assert busbw == pytest.approx(404.77, rel=0.10)     # was 671
    assert T.TREE_MAX_PER_CHANNEL_GBPS["blackwell"] == (2 * 38.7, 2 * 41.4, 2 * 36.0)   # NCCL's own, unchanged
    own = own_times_us(fabric, "all_reduce", np.array([float(size)]), 1440, 20)
    # NVLS off (the run's NCCL_NVLS_ENABLE=0); Simple: v2.26.2 ran no LL128 over GB200's C2C-attached NICs
    offered = {k: v for k, v in own.items() if k[0] in ("ring", "tree") and k[1] == "Simple"}
    assert min(offered, key=lambda k: offered[k][0]) == ("tree", "Simple")
    assert T.TREE_ACHIEVED_PER_CHANNEL_GBPS["hopper"] == T.TREE_MAX_PER_CHANNEL_GBPS["hopper"]   # Hopper unchanged


def _undominated_by_pairs(terms):
    """The definition _undominated computes at once: a pair goes where one other pair is no worse on latency, rate
    and ramp for every group (of two exactly equal pairs the first stays)."""
    names = list(terms)
    keep = []
    for i, name in enumerate(names):
        lat, rate, fill = (np.broadcast_to(x, np.shape(terms[name][0])) for x in terms[name])
        dominated = np.zeros(lat.shape, dtype=bool)
        for j, other in enumerate(names):
            if j != i:
                o_lat, o_rate, o_fill = terms[other]
                no_worse = (o_lat <= lat) & (o_rate <= rate) & (o_fill <= fill)
                if j > i:
                    no_worse &= (o_lat < lat) | (o_rate < rate) | (o_fill < fill)
                dominated |= no_worse
        if not dominated.all():
            keep.append(name)
    return keep


def test_undominated_pairs_are_those_no_other_pair_beats_everywhere():
    """_undominated compares all pairs at once (a small call's cost): the same pairs as one by one, ties, inf and nan
    included."""
    from commbench.costmodel.nccl_eval import _undominated
    rng = np.random.default_rng(3)
    for _ in range(2000):
        rows = int(rng.integers(0, 5))

        def column():
            return rng.choice([0.0, 1.0, 2.0, np.inf, np.nan], rows)

        terms = {(f"a{i}", "Simple"): (column(), np.broadcast_to(np.float64(rng.integers(0, 3)), (rows,))
                                       if rng.random() < 0.3 else column(), column())
                 for i in range(int(rng.integers(1, 9)))}
        assert _undominated(terms) == _undominated_by_pairs(terms)


def test_distinct_groups_are_numbered_as_the_pairs_sort():
    """_group_table numbers the distinct (ranks, domains) of a batch too wide for a dense table by one integer per
    group: the same table and numbering as the pairs' own sort, non-integral groups included."""
    from commbench.costmodel.nccl_eval import _group_table
    rng = np.random.default_rng(5)
    for n in (rng.choice([1.0, 2, 8, 72, 1024, 4096], 9000), rng.choice([1.0, 2.5, 8, 4096], 9000)):
        d = rng.choice([1.0, 2, 15, 57], n.size)
        key, table_n, table_d = _group_table(n, d, n, d)
        pairs, want = np.unique(np.stack([n, d]), axis=1, return_inverse=True)
        assert np.array_equal(key, want.reshape(n.shape))
        assert np.array_equal(table_n, pairs[0]) and np.array_equal(table_d, pairs[1])


def test_remembered_group_terms_are_each_fabrics_own():
    """The size-independent terms are remembered per fabric and table (nccl_eval._table_terms): a repeat call gives
    the same times as the first, and another fabric with the same groups (a what-if on the link rate) its own."""
    sizes, n, d = np.array([1e6, 1e8, 4e9]), np.array([4, 8, 16]), np.array([1, 2, 4])
    slow, fast = toy(), toy(up_gbps=200.0, out_gbps=20.0)
    first = collective_time_s(slow, "all_reduce", sizes, n, d)
    other = collective_time_s(fast, "all_reduce", sizes, n, d)
    assert np.array_equal(collective_time_s(slow, "all_reduce", sizes, n, d), first)
    assert np.all(other < first)
    assert np.array_equal(collective_time_s(toy(up_gbps=200.0, out_gbps=20.0), "all_reduce", sizes, n, d), other)


def test_nvls_tree_crosses_domains_on_at_most_32_heads_nics():
    """NCCL prices NVLS tree at nChannels x min(bwIntra, nNodes <= 2 ? bwInter : bwInter / 2) (NVIDIA/nccl v2.27.7-1
    src/graph/tuning.cc:275-276) on the NVLS graph, whose channels (heads, one NIC each) are at most
    min(NCCL_MAX_NVLS_ARITY = 32, GPUs of the node) (src/graph/search.cc:1014, src/include/device.h:206). A 72-GPU
    domain crosses on 32 NICs, not 72: the old model let NVLS tree across 3+ racks reach 72 NICs' rate / 2. Here the
    multicast (nvls_efficiency 1.0 of 900 GB/s) is faster than 32 NICs / 2, so the NICs bound it; at 24 ranks per
    domain all their NICs are heads."""
    net = 0.94 * 50.0
    fabric = Fabric(name="nvl72-what-if", gpu=None, domain_size=72, num_gpus=72 * 20, curves=(),
                    tiers={"scale_up": Tier(name="nvlink", link_gbps_per_gpu=900.0),
                           "scale_out": Tier(name="nic", link_gbps_per_gpu=50.0)},
                    nccl=NcclSystem(arch="blackwell", channels=16, ring_efficiency=0.8222, nvls_efficiency=1.0,
                                    net_efficiency=0.94))
    sizes = np.array([1.0, 2.0]) * 2**30

    def nvls_tree_busbw(m, d):
        t = algorithm_protocol_times_s(fabric, "all_reduce", sizes, m * d, d)["nvls_tree", "Simple"]
        return (sizes[1] - sizes[0]) / (t[1] - t[0]) / 1e9 / (5 / 6)   # NCCL's busBw: algbw is 5/6 of it

    assert nvls_tree_busbw(72, 20) == pytest.approx(32 * net / 2, rel=1e-9)   # was min(900, 72 x 47 / 2) = 900
    assert nvls_tree_busbw(72, 4) == pytest.approx(32 * net / 2, rel=1e-9)
    assert nvls_tree_busbw(72, 2) == pytest.approx(900.0, rel=1e-9)          # 32 NICs' 1504 on 2 racks: multicast bounds
    assert nvls_tree_busbw(24, 20) == pytest.approx(24 * net / 2, rel=1e-9)


def test_a_curve_run_with_nvls_off_is_predicted_without_nvls():
    """coreweave/nccl-tests' 20-rack GB200 curve came from jobs that set NCCL_NVLS_ENABLE=0 and NCCL_COLLNET_ENABLE=0
    (bee97e7 slurm/nccl-test-distributed-gb200-nvl72-enroot.slurm:18,21): NCCL chose ring or tree there, so the
    curve is priced without NVLS / NVLS tree / CollNet (it was priced as NVLS tree, 'too fast' by up to 63%). A
    setting the model cannot honour is refused in one line naming nccl_env."""
    data = json.loads((Path(__file__).parents[1] / "benchmarks" / "data" / "published-curves.json").read_text())
    racks20 = next(c for c in data["curves"] if c["preset"] == "gb200-nvl72" and c["num_domains"] == 20)
    assert racks20["nccl_env"] == {"NCCL_NVLS_ENABLE": "0", "NCCL_COLLNET_ENABLE": "0"}
    assert {p.algorithm for p in curve_points(racks20)} <= {"ring", "tree"}
    default = {p.algorithm for p in curve_points({**racks20, "nccl_env": None})}
    assert default == {"nvls_tree"}
    with pytest.raises(CommbenchError, match="nccl_env.*NCCL_ALGO=Ring"):
        curve_points({**racks20, "nccl_env": {"NCCL_ALGO": "Ring"}})
