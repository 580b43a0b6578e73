"""The racks a group spans are the most any of the layout's groups spans, as megatron-core's RankGenerator places them
(found from outside: DeepSeek-V3's EP64 groups on 1,152 GB200, 14 of 18 straddling two racks, were charged NVLink only,
their plan saying "across 2 racks"; Kimi-K2's EP96 on 288 GB300 said "across 3 racks" where each spans 2)."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.planner.layout.placement import domains_touched, racks_spanned

CASES = [  # (world, per_rack, etp, ep, pp)
    (1152, 72, 1, 64, 2), (1152, 72, 1, 32, 1), (288, 72, 1, 96, 1), (2304, 72, 1, 128, 1), (2304, 72, 2, 64, 1),
    (256, 64, 1, 64, 4), (576, 72, 1, 16, 2), (144, 72, 1, 8, 1), (4608, 72, 1, 256, 2), (216, 72, 1, 8, 3),
]


def _rank_groups(world: int, etp: int, ep: int, pp: int) -> list[list[int]]:
    """The EP groups megatron-core 0.16.1 builds: the expert grid's order etp-ep-edp-pp (parallel_state)."""
    generator = pytest.importorskip("megatron.core.parallel_state").RankGenerator
    return generator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order="tp-ep-dp-pp").get_ranks("ep")


@pytest.mark.parametrize("world, per_rack, etp, ep, pp", CASES)
def test_ep_racks_are_the_most_megatron_cores_groups_span(world, per_rack, etp, ep, pp):
    groups = _rank_groups(world, etp, ep, pp)
    most = max(len({rank // per_rack for rank in group}) for group in groups)
    assert int(racks_spanned(etp * ep, per_rack, world)) == most
    assert domains_touched(np.array([etp * ep]), np.array([ep]), per_rack, world // per_rack)[0] == min(most, ep)


def test_spans_that_divide_or_are_divided_by_the_rack_keep_the_aligned_count():
    spans = np.array([8, 72, 144, 64, 256])
    assert list(domains_touched(spans, spans, 72)) == [1, 1, 2, 2, 5]   # 64 and 256 straddle; 8, 72, 144 do not
    assert list(domains_touched(np.array([64, 256]), np.array([64, 256]), 64)) == [1, 4]
    assert np.shape(domains_touched(64.0, 64, 72)) == () and int(racks_spanned(8, 72)) == 1


@pytest.mark.parametrize("gpus, per_rack", [(1148, 72), (1151, 72), (4600, 72), (100, 72), (256, 64), (512, 64),
                                             (1152, 72), (216, 72), (48, 48)])
def test_a_gpu_count_off_the_racks_is_whole_racks_and_a_partial_one_not_an_invented_rack_size(gpus, per_rack):
    """1,148 GB300 (one 4-GPU tray down from 16 racks) were modelled as 28 'racks' of 41, so a tray-aligned EP4 group
    read 'across 2 racks'; 1,151 as one GPU per NVLink domain (found from outside). A divisor filling a rack to 85%
    stays the usual deployment (256 = 4 x 64); otherwise racks of 72, the last partial."""
    from commbench.planner.layout.placement import gpus_per_rack
    assert gpus_per_rack(gpus, 72) == per_rack
    assert int(racks_spanned(4, gpus_per_rack(gpus, 72), gpus)) == 1   # a tray-aligned group stays in its rack


@pytest.mark.parametrize("world, per_rack, etp, ep, pp", CASES)
def test_the_thin_side_is_the_fewest_members_megatron_cores_groups_have_in_one_rack(world, per_rack, etp, ep, pp):
    """An EP64 group split 8 + 56 over two racks: its 8 ranks' NICs carry their traffic to the other 56, not an even
    split's 32 (formulas.collective_time_s fewest_per_domain)."""
    from commbench.planner.layout.placement import fewest_in_one_domain
    groups = _rank_groups(world, etp, ep, pp)
    fewest = min(min(sum(1 for rank in group if rank // per_rack == rack) for rack in {r // per_rack for r in group})
                 for group in groups)
    assert fewest_in_one_domain(np.array([etp * ep]), np.array([ep]), per_rack, world // per_rack)[0] == fewest


def test_an_uneven_split_sends_the_thin_sides_bytes_through_its_own_nics():
    """All-to-all over 64 ranks in two domains: each rank's off-domain share is (64 - m) / 64 with m ranks on its
    side; 8 + 56 leaves 56/64 of the thin side's bytes to its NICs, an even 32 + 32 only 32/64."""
    from commbench.costmodel import collective_time_s, load_preset
    fabric = load_preset("gb200-nvl72", num_gpus=1152)
    size = np.array([256e6])
    even = collective_time_s(fabric, "all_to_all", size, 64, 2)
    thin = collective_time_s(fabric, "all_to_all", size, 64, 2, fewest_per_domain=8)
    assert thin[0] / even[0] == pytest.approx(56 / 32, rel=0.05)
    assert collective_time_s(fabric, "all_to_all", size, 64, 2, fewest_per_domain=32)[0] == pytest.approx(even[0])
