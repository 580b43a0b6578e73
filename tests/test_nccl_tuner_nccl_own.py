"""Predicted nccl-tuner rules against NCCL's own model (probe BI, finding 1).

`nccl-tuner --system h100-hgx --gpus 2` wrote `allreduce,1048576,1048576,tree,simple` on every preset at 2 GPUs:
nccl_tables mixed NCCL releases (tree/Simple base latency 0 from <= 2.22 with the NVLink hop 4.0 from >= 2.23) and
the tuner never priced NCCL's tree correction factor. The tables are now one release's (NVIDIA/nccl v2.27.7-1
src/graph/tuning.cc), costmodel.nccl_own prices a pair as NCCL's ncclTopoGetAlgoTime does, and the emitter drops
every predicted choice that model rates slower than NCCL's own pick, saying how many in the file's header.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.costmodel import load_preset, preset_names
from commbench.costmodel.nccl_own import check_sizes, own_times_us, slower_than_nccl_pick, tree_correction
from commbench.results.nccl_tuner import PLUGIN_COLLECTIVES
from commbench.units import PREDICTED_MAX_BYTES, parse_size_bytes, size_range
from commbench.workflows import nccl_tuner as flow

SIZES = size_range(1024, parse_size_bytes(PREDICTED_MAX_BYTES, "--max-bytes"), 2.0, None)  # nccl-tuner's default
GPUS = (2, 3, 4, 8, 16, 72, 144)


def test_two_ranks_priced_as_nccl_2_27_does():
    """Hand-worked at v2.27.7-1 tuning.cc: h100-hgx, 2 ranks on NVLink, 1 MiB. Ring/Simple latency 8.4 + 2 x 3.4,
    bandwidth 0.8222 x 450 x nRanks/nsteps (1); tree/Simple latency 8.4 + 2 x 1 x 4.0, bandwidth 0.92 x that x 1/2
    x treeCorrectionFactor[Simple][log2(1 MiB / 64) = 14] = 0.5."""
    fabric = load_preset("h100-hgx")
    ring_bw = 0.8222 * 450
    times = own_times_us(fabric, "all_reduce", [1 << 20], 2, 1)
    assert times["ring", "Simple"][0] == pytest.approx(8.4 + 2 * 3.4 + (1 << 20) / (1000 * ring_bw), rel=1e-6)
    assert times["tree", "Simple"][0] == pytest.approx(8.4 + 2 * 4.0 + (1 << 20) / (1000 * ring_bw * 0.92 * 0.5 * 0.5),
                                                       rel=1e-6)
    assert ("nvls", "Simple") not in times   # NCCL: no NVLS with <= 2 GPUs (src/transport/nvls.cc:160)
    slower = slower_than_nccl_pick(fabric, "all_reduce", ("tree", "Simple"), 1 << 20, 1 << 20, 2, 1)
    assert slower is not None and slower[2] != ("tree", "Simple")


def test_tree_correction_steps_where_nccl_steps():
    assert list(tree_correction(np.array([0, 63, 64, 127, 128, 1 << 20, (64 << 23) - 1, 64 << 23]), "Simple")) == \
        [1.0, 1.0, .9, .9, .9, .5, .9, 1.0]
    # both sides of every step of the correction and of the ring plateau (64 B x channels x ranks) are checked
    sizes = set(check_sizes(100, 1 << 20, 16, 2))
    assert {100, 127, 128, 2047, 2048, (1 << 20) - 1, 1 << 20} <= sizes


@pytest.mark.parametrize("system", preset_names())
def test_no_predicted_rule_nccl_rates_slower_than_its_own_pick(system):
    """Every preset x --gpus x collective, at the fewest nodes and (to 16 GPUs) one rank per node: no rule names a
    pair NCCL's own model rates slower than NCCL's pick anywhere in the rule's sizes, and the header counts drops."""
    for gpus in GPUS:
        fabric = load_preset(system, num_gpus=gpus)
        fewest = math.ceil(gpus / fabric.domain_size)
        for nodes in sorted({fewest, gpus if gpus <= 16 else fewest}):
            result = flow.from_fabric(fabric, ranks=gpus, nodes=nodes, sizes_bytes=SIZES)
            checked, domains = flow.node_domains(fabric, ranks=gpus, nodes=nodes)
            header = [note for note in result.notes if note.startswith("checked against NCCL's own model")]
            assert len(header) == 1 and "v2.27.7-1" in header[0]
            dropped = [note for note in result.notes if note.startswith("  dropped: ")]
            assert f"dropped {len(dropped)} predicted choice(s)" in header[0]
            names = {plugin: name for name, plugin in PLUGIN_COLLECTIVES.items()}
            for rule in result.rules:
                loss = slower_than_nccl_pick(checked, names[rule.collective], (rule.algo, rule.proto.replace(
                    "simple", "Simple").replace("ll128", "LL128").replace("ll", "LL")), rule.min_bytes,
                    rule.max_bytes, gpus, domains)
                assert loss is None, (system, gpus, nodes, rule, loss)
                if gpus == 2:
                    assert (rule.algo, rule.proto) != ("tree", "simple"), (system, rule)


def test_the_probes_two_gpu_config_has_no_tree_rule(tmp_path):
    out = tmp_path / "p.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", "--system", "h100-hgx", "--gpus", "2", "-O", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert not [line for line in rules if ",tree," in line]
    assert "# checked against NCCL's own model (NVIDIA/nccl v2.27.7-1" in text


def test_a_dropped_choice_is_left_to_nccl_and_counted():
    """16 ranks one per node (b300-hgx): the cost model's tree/LL at 256-384 KiB loses to NCCL's tree/LL128 once
    NCCL's tree correction factor (LL 0.4 there) is priced: no rule there, and the header says why."""
    fabric = load_preset("b300-hgx", num_gpus=16)
    result = flow.from_fabric(fabric, ranks=16, nodes=16, sizes_bytes=SIZES)
    dropped = [note for note in result.notes if note.startswith("  dropped: ")]
    assert dropped and all("NCCL's own model" in note and "left to NCCL" in note for note in dropped)
    assert not [rule for rule in result.rules if rule.collective == "allreduce" and rule.algo == "tree"
                and rule.proto == "ll" and rule.min_bytes <= 262144 <= rule.max_bytes]
