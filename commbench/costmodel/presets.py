"""Preset fabrics for NVL72 racks and 8-GPU HGX nodes, built from commbench/data/hardware.toml.

Link rates come from each GPU's datasheet row; efficiency (busbw / link rate) and latency terms
come from the published [[measured]] figures in the same file, and every number below names the
figure that set it (see `reference_checks` and tests/test_costmodel_presets.py, which reproduce
each figure within 10%). Where no figure exists for a system, the nearest measured sibling's
efficiency is borrowed and the curve's `source` says "borrowed"; latencies with no measured
anchor follow NCCL's own tuning model (src/graph/tuning.cc, baseLat/hwLat) and say "assumed".
Each preset also carries its [nccl_model.<name>] parameters (nccl_system), with which the NCCL
collectives are predicted by NCCL's algorithm x protocol structure (nccl_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from commbench.costmodel.fabric import AlgorithmCurve, Fabric, Tier
from commbench.costmodel.nccl_model import NcclSystem
from commbench.errors import invalid
from commbench.data.reference import gpu_spec, hardware_toml


@dataclass(frozen=True, kw_only=True)
class CurveTerm:
    """One curve relative to its tier's link rate: busbw = efficiency * link GB/s."""

    collective: str
    algorithm: str
    latency_us: float
    latency_per_step_us: float
    efficiency: float
    source: str


def _up(collective: str, algorithm: str, latency_us: float, per_step_us: float, efficiency: float,
        source: str) -> CurveTerm:
    return CurveTerm(collective=collective, algorithm=algorithm, latency_us=latency_us,
                     latency_per_step_us=per_step_us, efficiency=efficiency, source=source)


# --- scale-up (NVLink) terms -------------------------------------------------------------------
_H100_RING = 370 / 450  # 8x H100 ring AR/AG/RS/alltoall 370 GB/s busbw on 450 GB/s NVLink 4
_RING_SRC = "8x H100 ring 370 GB/s busbw (nccl-tests #212) / 450 GB/s NVLink 4"
_RING_LAT = (8.4, 1.5)  # base: NCCL baseLat Simple; per step: 8x H200 AR 1 MB = 53 GB/s busbw
_LL_SRC = "latency: NCCL tuning.cc LL (assumed); LL at 1/8 of the link rate (assumed)"
_LOW_LATENCY = [_up("all_reduce", "tree", 6.8, 0.6, 0.125, _LL_SRC)] + [
    _up(name, "ring_ll", 6.6, 0.6, 0.125, _LL_SRC) for name in ("reduce_scatter", "all_gather")]


def _ring_family(per_step_us: float, efficiency: float, source: str) -> list[CurveTerm]:
    base = _RING_LAT[0]
    return [
        _up("all_reduce", "ring", base, per_step_us, efficiency, source),
        _up("reduce_scatter", "ring", base, per_step_us, efficiency, source),
        _up("all_gather", "ring", base, per_step_us, efficiency, source),
        _up("broadcast", "ring", base, per_step_us, efficiency, source),
        _up("all_to_all", "pairwise", base, per_step_us, efficiency, source),
        _up("sendrecv", "p2p", base, 0.0, efficiency, source),
    ] + _LOW_LATENCY


HOPPER_UP = _ring_family(_RING_LAT[1], _H100_RING, _RING_SRC) + [
    # 8x H200 NVLS: 64 MB 368 and 256 MB 432 GB/s busbw give ~475 GB/s and ~72 us (9 us per rank)
    _up("all_reduce", "nvls", 0.0, 9.0, 475 / 450,
        "8x H100/H200 NVLS all_reduce 480 GB/s (nccl-tests #212, Azure ND H200 v5)"),
    _up("moe_all_to_all", "dispatch", 20.0, _RING_LAT[1], 153 / 200,
        "DeepEP H800 EP8 dispatch 153 GB/s / 200 GB/s NVLink; 20 us base assumed"),
    _up("moe_all_to_all", "combine", 20.0, _RING_LAT[1], 158 / 200,
        "DeepEP H800 EP8 combine 158 GB/s / 200 GB/s NVLink; 20 us base assumed"),
]
_BW_SRC = "ring efficiency borrowed from 8x H100 (370/450)"
BLACKWELL_MOE = [
    _up("moe_all_to_all", "dispatch", 20.0, _RING_LAT[1], 400 / 900,
        "DeepEP GB200 EP32 multi-node NVLink dispatch 400 GB/s (24 SMs) / 900 GB/s NVLink 5"),
    _up("moe_all_to_all", "combine", 20.0, _RING_LAT[1], 190 / 900,
        "DeepEP GB200 EP32 multi-node NVLink combine 190 GB/s (24 SMs) / 900 GB/s NVLink 5"),
]
# Ring per-step latency on NVL72: NCCL's hwLat for NVLink ring Simple (3.4 us); Hopper's 1.5 us
# would make the ring beat the 586 GB/s measured at 512 MiB on 72 GPUs.
NVL72_UP = _ring_family(3.4, _H100_RING, _BW_SRC + "; per-step latency NCCL tuning.cc") + BLACKWELL_MOE + [
    # GB200 NVL72 72-GPU all_reduce: 512 MiB 586, 1 GiB ~700, 4-8 GiB 840 -> ~880 GB/s, ~600 us
    _up("all_reduce", "nvls", 0.0, 8.4, 880 / 900,
        "GB200 NVL72 72-GPU all_reduce 840 GB/s at 4-8 GiB (coreweave/nccl-tests PR 43)"),
]
HGX_BLACKWELL_UP = _ring_family(_RING_LAT[1], _H100_RING, _BW_SRC) + BLACKWELL_MOE + [
    _up("all_reduce", "nvls", 0.0, 8.4, 475 / 450,
        "NVLS efficiency borrowed from 8x H100/H200 (475/450); per-rank latency from GB200"),
]

# --- scale-out (one NIC per GPU) terms ---------------------------------------------------------
_NIC_EFF = 47 / 50  # ~47 GB/s busbw per 400 Gb/s ConnectX-7 (nccl-tests #290, #267)
_NIC_SRC = "47 GB/s busbw per 400 Gb/s NIC (nccl-tests #290, #267); NET latency from NCCL tuning.cc"
# DeepEP's internode normal kernels (legacy V1 table: H800, one CX7 400 Gb/s NIC per GPU, 4096 tokens, hidden 7168,
# top-4 groups, top-8, FP8 dispatch / BF16 combine): dispatch 58 GB/s at EP32, 51 at EP64; combine 57 and 50. These
# are LOGICAL rates: the bytes of every (token, destination node) pair, the token's own node included, over the time
# (tests/test_internode.py: num_rdma_token_sent counts the distinct nodes of each token's experts, local one included;
# the V2 README: "the results are logical bandwidth ... 90 GB/s actually contains local rank traffic"). The NIC
# carries the (D-1)/D of those pairs bound for other nodes: 58 x 3/4 = 43.5 and 51 x 7/8 = 44.6 GB/s (combine
# 42.8, 43.8) of the 50 GB/s link, not the 47 of NCCL's ring (EP16 is left out: on H800 its NVLink forwarding leg,
# 160 GB/s, binds, as moe_comm.py charges it). Means over EP32 and EP64:
_DEEPEP_RDMA = {"dispatch": (58 * 3 / 4 + 51 * 7 / 8) / 2 / 50, "combine": (57 * 3 / 4 + 50 * 7 / 8) / 2 / 50}
_DEEPEP_SRC = ("DeepEP normal kernels internode, H800 + CX7 400G: logical RDMA 58/51 GB/s (EP32/EP64) dispatch, "
               "57/50 combine, x (D-1)/D leaving the node (deepseek-ai/DeepEP docs/legacy.md, tests/test_internode.py)")
SCALE_OUT = [
    _up("all_reduce", "ring", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("all_reduce", "tree", 6.8, 5.0, _NIC_EFF, _NIC_SRC),
    _up("reduce_scatter", "ring", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("reduce_scatter", "ring_ll", 6.6, 2.7, _NIC_EFF / 8, _NIC_SRC + "; LL at 1/8 (assumed)"),
    _up("all_gather", "ring_ll", 6.6, 2.7, _NIC_EFF / 8, _NIC_SRC + "; LL at 1/8 (assumed)"),
    _up("all_gather", "ring", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("broadcast", "ring", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("all_to_all", "pairwise", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("sendrecv", "p2p", 8.4, 14.0, _NIC_EFF, _NIC_SRC),
    _up("moe_all_to_all", "dispatch", 20.0, 14.0, _DEEPEP_RDMA["dispatch"], _DEEPEP_SRC),
    _up("moe_all_to_all", "combine", 20.0, 14.0, _DEEPEP_RDMA["combine"], _DEEPEP_SRC),
]


@dataclass(frozen=True, kw_only=True)
class PresetSpec:
    gpu: str
    scale_up_name: str
    scale_out_name: str
    scale_up_terms: list[CurveTerm]
    description: str
    # the presets whose published figures (checks.PUBLISHED_FIGURES) set its scale-up terms and [nccl_model] (its
    # own and those hardware.toml says it borrows), "PRESET:COLLECTIVE" where only that collective's; scale-out
    # (SCALE_OUT) is shared: every preset's cross-domain figures set it
    calibrated_on: tuple[str, ...]


# Hopper: ring/NVLS figures of 8x H100 and 8x H200, DeepEP's H800 ones; NVL72 and HGX Blackwell borrow the ring
# efficiency (8x H100) and launch term (8x H200), HGX Blackwell the NVLS ones too and GB200's DeepEP figures
_HOPPER = ("h100-hgx", "h200-hgx", "h800-hgx:moe_all_to_all")
_NVL72 = ("gb200-nvl72", "h100-hgx", "h200-hgx")
_HGX_BLACKWELL = ("h100-hgx", "h200-hgx", "gb200-nvl72:moe_all_to_all")
PRESETS: dict[str, PresetSpec] = {
    "gb300-nvl72": PresetSpec(gpu="gb300", scale_up_name="NVLink 5 (NVL72 rack)",
                              scale_out_name="ConnectX-8 800G", scale_up_terms=NVL72_UP,
                              description="GB300 NVL72: 72 GPUs per rack, 800 Gb/s NIC per GPU",
                              calibrated_on=_NVL72),
    "gb200-nvl72": PresetSpec(gpu="gb200", scale_up_name="NVLink 5 (NVL72 rack)",
                              scale_out_name="ConnectX-7 400G", scale_up_terms=NVL72_UP,
                              description="GB200 NVL72: 72 GPUs per rack, 400 Gb/s NIC per GPU",
                              calibrated_on=_NVL72),
    "b200-hgx": PresetSpec(gpu="b200", scale_up_name="NVLink 5 (8-GPU NVSwitch)",
                           scale_out_name="ConnectX-7 400G", scale_up_terms=HGX_BLACKWELL_UP,
                           description="HGX/DGX B200: 8 GPUs per node, 400 Gb/s NIC per GPU",
                           calibrated_on=_HGX_BLACKWELL),
    "b300-hgx": PresetSpec(gpu="b300", scale_up_name="NVLink 5 (8-GPU NVSwitch)",
                           scale_out_name="ConnectX-8 800G", scale_up_terms=HGX_BLACKWELL_UP,
                           description="HGX B300: 8 GPUs per node, 800 Gb/s NIC per GPU",
                           calibrated_on=_HGX_BLACKWELL),
    "h100-hgx": PresetSpec(gpu="h100", scale_up_name="NVLink 4 (8-GPU NVSwitch)",
                           scale_out_name="ConnectX-7 400G", scale_up_terms=HOPPER_UP,
                           description="HGX/DGX H100: 8 GPUs per node, 400 Gb/s NIC per GPU",
                           calibrated_on=_HOPPER),
    "h200-hgx": PresetSpec(gpu="h200", scale_up_name="NVLink 4 (8-GPU NVSwitch)",
                           scale_out_name="ConnectX-7 400G", scale_up_terms=HOPPER_UP,
                           description="HGX H200: 8 GPUs per node, 400 Gb/s NIC per GPU",
                           calibrated_on=_HOPPER),
    "h800-hgx": PresetSpec(gpu="h800", scale_up_name="NVLink 4, 400 GB/s (8-GPU NVSwitch)",
                           scale_out_name="InfiniBand 400G", scale_up_terms=HOPPER_UP,
                           description="H800 (DeepSeek-V3's cluster): 8 GPUs per node, 400 Gb/s IB per GPU",
                           calibrated_on=_HOPPER),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def _curves(terms: list[CurveTerm], tier: str, link_gbps: float) -> list[AlgorithmCurve]:
    return [AlgorithmCurve(collective=t.collective, tier=tier, algorithm=t.algorithm,
                           latency_us=t.latency_us, latency_per_step_us=t.latency_per_step_us,
                           busbw_gbps=t.efficiency * link_gbps, source=t.source) for t in terms]


SMALL_SIZE_TERMS = ("launch_us", "fill_us_per_rank")


def small_sizes_statement(gpu: str, sources: dict, where: str = "small_sizes_from") -> str:
    """Whose runs set the small-size terms, one clause per run: "launch_us, fill_us_per_rank borrowed from RUN:
    not measured on GPU" where another GPU's run set them, "... measured on RUN" where this GPU's did."""
    by_run: dict[tuple[str, str], list[str]] = {}
    for term in SMALL_SIZE_TERMS:
        if term not in sources:
            raise invalid(where, sorted(sources), f"[GPU, run] for each of {', '.join(SMALL_SIZE_TERMS)}")
        run_gpu, run = sources[term]
        by_run.setdefault((str(run_gpu), str(run)), []).append(term)
    return "; ".join(f"{', '.join(terms)} borrowed from {run}: not measured on {gpu}" if run_gpu != gpu
                     else f"{', '.join(terms)} measured on {run}" for (run_gpu, run), terms in by_run.items())


def nccl_system(name: str) -> NcclSystem:
    """The [nccl_model.<name>] parameters of hardware.toml (NCCL's structure, per system)."""
    row = dict(hardware_toml().get("nccl_model", {}).get(name, {}))
    if not row:
        raise invalid("system", name, "a preset with an [nccl_model] table in hardware.toml")
    row["fill_us_per_rank"] = dict(row.get("fill_us_per_rank", {}))
    row["small_sizes"] = small_sizes_statement(PRESETS[name].gpu, row.pop("small_sizes_from", {}),
                                               f"[nccl_model.{name}] small_sizes_from")
    return NcclSystem(**row)


def load_preset(name: str, *, num_gpus: int | None = None, num_racks: int | None = None,
                num_nodes: int | None = None) -> Fabric:
    """The preset fabric `name`, scaled to `num_gpus` GPUs or `num_racks`/`num_nodes` domains
    (at most one; default: one domain)."""
    spec = PRESETS.get(name.lower())
    if spec is None:
        raise invalid("--system", name, f"known presets: {', '.join(PRESETS)}")
    given = {k: v for k, v in (("num_gpus", num_gpus), ("num_racks", num_racks), ("num_nodes", num_nodes))
             if v is not None}
    if len(given) > 1:
        raise invalid("scale", given, "give one of num_gpus, num_racks, num_nodes")
    option = {"num_gpus": "--gpus", "num_racks": "--racks", "num_nodes": "--nodes"}
    for field, value in given.items():
        if int(value) < 1:
            raise invalid(option[field], value, "must be >= 1")
    gpu = gpu_spec(spec.gpu)
    domain_size = gpu.scale_up_domain
    total = int(num_gpus) if num_gpus is not None else domain_size * int(num_racks or num_nodes or 1)
    tiers = {
        "scale_up": Tier(name=spec.scale_up_name, link_gbps_per_gpu=gpu.nvlink_gbps_per_dir,
                         description=f"{domain_size} GPUs per domain"),
        "scale_out": Tier(name=spec.scale_out_name, link_gbps_per_gpu=gpu.scale_out_gbps,
                          description=f"{gpu.scale_out_gbit_per_gpu:g} Gb/s per GPU"),
    }
    curves = _curves(spec.scale_up_terms, "scale_up", gpu.nvlink_gbps_per_dir) + \
        _curves(SCALE_OUT, "scale_out", gpu.scale_out_gbps)
    return Fabric(name=name.lower(), gpu=gpu, domain_size=domain_size, num_gpus=total,
                  tiers=tiers, curves=tuple(curves), source="preset", nccl=nccl_system(name.lower()),
                  notes=(spec.description, f"GPU datasheet: {gpu.source}"))
