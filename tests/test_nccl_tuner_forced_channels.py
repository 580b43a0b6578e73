"""Predicted nccl-tuner rules are priced at the channel count they force (probe CG, finding 1).

`nccl-tuner --system h100-hgx --gpus 8 --channels 1` wrote `broadcast,8388608,8388608,ring,ll128,1,1,8,1,0` and said
"dropped 0": both the choice (predicted_points) and the check against NCCL's own pick priced the pair at the preset's
16 channels whatever N. NCCL's bus bandwidth is its channels times the per-channel bandwidth (`float busBw =
graphs[a]->nChannels * bw;`, NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc:276, then the protocols' caps, :279-283), and
the tuner's count is the call's (`info->nMaxChannels = nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`,
src/enqueue.cc:1935), at most the communicator's (scheduleCollTasksToPlan, src/enqueue.cc:549-550). On one channel
that broadcast runs 423.5 us where NCCL's own pick (ring/LL128 on 16) runs 53.8 us, by NCCL's own model.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset, preset_names
from commbench.costmodel.nccl_model import CHANNEL_SCALED
from commbench.costmodel.nccl_own import own_times_us, slower_than_nccl_pick
from commbench.units import PREDICTED_MAX_BYTES, parse_size_bytes, size_range
from commbench.workflows import nccl_tuner as flow
from tests.test_nccl_tuner_nccl_own import losses_in_walk

SIZES = size_range(1024, parse_size_bytes(PREDICTED_MAX_BYTES, "--max-bytes"), 2.0, None)  # nccl-tuner's default


def _rules(text: str) -> list[list[str]]:
    return [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]


def test_the_probes_one_channel_config_forces_no_slower_rule(tmp_path):
    """h100-hgx, 8 GPUs, --channels 1: no rule forces one channel where that is slower than NCCL's own pick, and the
    header says which choices --channels 1 made slower (the probe's rules: broadcast ring/LL128 at 8 MiB, all-gather
    ring/LL up to 2 MiB)."""
    out = tmp_path / "h8c1.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "8", "--channels", "1",
                                      "-O", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    forced = [r for r in _rules(text) if r[5] == "1"]
    assert not [r for r in forced if r[0] == "broadcast" and int(r[2]) >= 8 << 20], forced
    assert not [r for r in forced if r[0] == "allgather" and int(r[2]) >= 2 << 20], forced
    assert "dropped 0 " not in text
    assert "at 1 channel(s)" in text and "at 1 channel(s)" in result.output   # said, not silent


def test_a_pair_is_priced_at_the_channels_it_is_given():
    """The probe's numbers, by NCCL's formula at N channels: broadcast ring/LL128 at 8 MiB on 1 of h100-hgx's 16
    channels (per channel 0.8222 x 450 / 16 = 23.1 GB/s, x 0.92, under LL128's 36.7 per channel) 29.2 + 8 MiB / 21.3
    GB/s = 423.5 us; at 16 channels and above (NCCL runs at most the communicator's count) 53.8 us."""
    fabric = load_preset("h100-hgx", num_gpus=8)
    one = own_times_us(fabric, "broadcast", [8 << 20], 8, 1, channels=1)
    assert one["ring", "LL128"][0] == pytest.approx(423.5, abs=0.05)
    for channels in (None, 16, 32):
        assert own_times_us(fabric, "broadcast", [8 << 20], 8, 1, channels=channels)["ring", "LL128"][0] == \
            pytest.approx(53.8, abs=0.05)
    loss = slower_than_nccl_pick(fabric, "broadcast", ("ring", "LL128"), 8 << 20, 8 << 20, 8, 1, channels=1)
    assert loss is not None and loss[2] == ("ring", "LL128") and loss[1] / loss[3] > 7.8
    assert slower_than_nccl_pick(fabric, "broadcast", ("ring", "LL128"), 8 << 20, 8 << 20, 8, 1) is None


@pytest.mark.parametrize("system", preset_names())
def test_no_size_of_any_rule_is_slower_than_nccls_own_pick_at_the_rules_channels(system):
    """Every preset x --gpus {2,3,4,8,16,72,144} x --channels {1,2,4,8,16,32} x both --for targets (fewest nodes): no
    size of any emitted rule, priced at the channel count it names, is slower by NCCL's own model than NCCL's pick."""
    for gpus in (2, 3, 4, 8, 16, 72, 144):
        fabric = load_preset(system, num_gpus=gpus)
        nodes = math.ceil(gpus / fabric.domain_size)
        checked, domains = flow.node_domains(fabric, ranks=gpus, nodes=nodes)
        for channels in (1, 2, 4, 8, 16, 32):
            for target in ("commbench", "example-plugin"):
                result = flow.from_fabric(fabric, ranks=gpus, nodes=nodes, sizes_bytes=SIZES, target=target,
                                          channels=channels)
                assert result.rules or target == "commbench"
                # a count only on pairs the model prices at it (NVLS, NVLS tree, CollNet run on counts of their own)
                assert all(r.algo in CHANNEL_SCALED for r in result.rules if r.channels > 0), (system, gpus, channels)
                losses = losses_in_walk(result.rules, checked, gpus, domains)
                assert losses == [], (system, gpus, channels, target, losses[:3])
