"""The published [[measured]] figures of hardware.toml, restated as predictions to compare with.

Each `PublishedFigure` names the [[measured]] row it comes from (a substring of its `system`), the
preset and the collective, group and size that the figure describes. `check_presets()` predicts
each one; tests/test_costmodel_presets.py requires every [[measured]] row to have at least one
figure here and every prediction within 10% of it, and `commbench systems --checks` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commbench.costmodel.accuracy import regime_of
from commbench.costmodel.choice import best_algorithm_protocol, uses_nccl_model
from commbench.costmodel.formulas import bus_factor, collective_time_s, moe_all_to_all_time_s
from commbench.costmodel.presets import load_preset
from commbench.data.reference import published_measurements

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10
_DEEPEP_TOKENS_BYTES = 4096 * 8 * 7168  # 4096 tokens x top-8 x hidden 7168, FP8 (1 B/element)


@dataclass(frozen=True, kw_only=True)
class PublishedFigure:
    row: str  # substring of the [[measured]] row's `system`
    preset: str
    collective: str
    group_size: int
    size_bytes: int
    busbw_gbps: float
    num_domains: int = 1
    num_gpus: int | None = None
    algorithm: str | None = None  # for MoE: the phase (dispatch / combine)
    what: str = ""


def _fig(row: str, preset: str, collective: str, group_size: int, size_bytes: int, busbw_gbps: float,
         **kw) -> PublishedFigure:
    return PublishedFigure(row=row, preset=preset, collective=collective, group_size=group_size,
                           size_bytes=size_bytes, busbw_gbps=busbw_gbps, **kw)


_H100_RING = "8x H100, ring"
_H200 = "8x H200"
_GB200 = "GB200 NVL72 full rack"
PUBLISHED_FIGURES: tuple[PublishedFigure, ...] = (
    _fig("8x H100 (NVLink 4)", "h100-hgx", "all_reduce", 8, 8 * GiB, 480, what="NVLS, 8 GiB"),
    _fig(_H100_RING, "h100-hgx", "all_reduce", 8, 8 * GiB, 370, algorithm="ring", what="ring, 8 GiB"),
    _fig(_H100_RING, "h100-hgx", "all_gather", 8, 8 * GiB, 370, what="8 GiB"),
    _fig(_H100_RING, "h100-hgx", "reduce_scatter", 8, 8 * GiB, 370, what="8 GiB"),
    _fig(_H100_RING, "h100-hgx", "all_to_all", 8, 8 * GiB, 370, what="8 GiB"),
    # published as NVLS runs (Azure ND H200 v5): NCCL's NVLS, whatever else would be faster
    _fig(_H200, "h200-hgx", "all_reduce", 8, 8 * GiB, 480, algorithm="nvls", what="NVLS, 8 GiB"),
    _fig(_H200, "h200-hgx", "all_reduce", 8, 1 * KiB, 0.06, algorithm="nvls", what="NVLS, 1 KiB (latency)"),
    _fig(_H200, "h200-hgx", "all_reduce", 8, 1 * MiB, 53, algorithm="nvls", what="NVLS, 1 MiB"),
    _fig(_H200, "h200-hgx", "all_reduce", 8, 64 * MiB, 368, algorithm="nvls", what="NVLS, 64 MiB"),
    _fig(_H200, "h200-hgx", "all_reduce", 8, 256 * MiB, 432, algorithm="nvls", what="NVLS, 256 MiB"),
    _fig(_GB200, "gb200-nvl72", "all_reduce", 72, 4 * GiB, 840, what="4 GiB"),
    _fig(_GB200, "gb200-nvl72", "all_reduce", 72, 8 * GiB, 840, what="8 GiB"),
    _fig(_GB200, "gb200-nvl72", "all_reduce", 72, 512 * MiB, 586, what="512 MiB"),
    _fig(_GB200, "gb200-nvl72", "all_reduce", 72, 1 * GiB, (681 + 724) / 2, what="1 GiB (681-724)"),
    # the per-NIC rate ("46-48 GB/s per NIC" for NDR 400 Gb/s, nccl-tests issue 290): a ring across
    # two nodes with one rank (one NIC) on each; with m ranks per node the ring's channels use their
    # m NICs together (nccl-tests issue 160: a ring's busbw is the node's total NIC bandwidth)
    _fig("one ConnectX-7", "h100-hgx", "all_reduce", 2, 8 * GiB, 47, num_domains=2, num_gpus=16,
         algorithm="ring", what="2 nodes x 1 GPU, ring, 8 GiB"),
    _fig("one ConnectX-7", "h100-hgx", "sendrecv", 2, 8 * GiB, 47, num_domains=2, num_gpus=16,
         what="sendrecv across 2 nodes, 8 GiB"),
    _fig("H800, intranode EP8", "h800-hgx", "moe_all_to_all", 8, _DEEPEP_TOKENS_BYTES, 153,
         algorithm="dispatch", what="dispatch, FP8"),
    _fig("H800, intranode EP8", "h800-hgx", "moe_all_to_all", 8, 2 * _DEEPEP_TOKENS_BYTES, 158,
         algorithm="combine", what="combine, BF16"),
    # DeepEP's internode figures are logical (every (token, node) pair over the time, the token's own node included:
    # presets._DEEPEP_RDMA), read here as the busbw of a 32-rank all-to-all: within 3%, as (n-1)/n = 31/32
    _fig("internode EP32", "h800-hgx", "moe_all_to_all", 32, _DEEPEP_TOKENS_BYTES, 58,
         num_domains=4, num_gpus=32, algorithm="dispatch", what="4 nodes, dispatch, FP8"),
    _fig("DeepEP at EP32 over multi-node NVLink", "gb200-nvl72", "moe_all_to_all", 32,
         _DEEPEP_TOKENS_BYTES, 400, algorithm="dispatch", what="dispatch, FP8"),
    _fig("DeepEP at EP32 over multi-node NVLink", "gb200-nvl72", "moe_all_to_all", 32,
         2 * _DEEPEP_TOKENS_BYTES, 190, algorithm="combine", what="combine, BF16"),
)


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    figure: PublishedFigure
    predicted_busbw_gbps: float
    source: str
    chosen: str = ""  # the (algorithm/protocol) NCCL's structure picks, where it predicts the figure

    @property
    def regime(self) -> str:
        return regime_of(self.figure.size_bytes)

    @property
    def relative_error(self) -> float:
        return self.predicted_busbw_gbps / self.figure.busbw_gbps - 1.0


def chosen_pair(figure: PublishedFigure) -> str:
    """'algorithm/protocol' NCCL's structure runs for the figure ('' where the alpha-beta curves predict it)."""
    fabric = load_preset(figure.preset, num_gpus=figure.num_gpus)
    if not uses_nccl_model(fabric, figure.collective):
        return ""
    choice = best_algorithm_protocol(fabric, figure.collective, figure.size_bytes, figure.group_size,
                                     figure.num_domains, algorithm=figure.algorithm)
    return f"{choice.algorithm}/{choice.protocol}"


def predicted_busbw_gbps(figure: PublishedFigure) -> float:
    fabric = load_preset(figure.preset, num_gpus=figure.num_gpus)
    if figure.collective == "moe_all_to_all":
        time_s = moe_all_to_all_time_s(fabric, figure.size_bytes, figure.group_size, figure.num_domains,
                                       phase=figure.algorithm)
    else:
        time_s = collective_time_s(fabric, figure.collective, figure.size_bytes, figure.group_size,
                                   figure.num_domains, algorithm=figure.algorithm)
    factor = bus_factor(figure.collective, figure.group_size)
    return float(factor * figure.size_bytes / np.asarray(time_s) / 1e9)


def check_presets() -> list[CheckResult]:
    rows = published_measurements()
    results = []
    for figure in PUBLISHED_FIGURES:
        matching = [row for row in rows if figure.row in row["system"]]
        source = matching[0].get("source", "") if matching else "(row missing from hardware.toml)"
        results.append(CheckResult(figure=figure, predicted_busbw_gbps=predicted_busbw_gbps(figure),
                                   source=source, chosen=chosen_pair(figure)))
    return results


def unchecked_rows() -> list[str]:
    """[[measured]] rows of hardware.toml that no PublishedFigure reproduces."""
    return [row["system"] for row in published_measurements()
            if not any(fig.row in row["system"] for fig in PUBLISHED_FIGURES)]
