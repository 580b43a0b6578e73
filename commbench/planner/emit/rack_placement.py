"""What a launch must do to get the rack placement a plan prices, and which of its groups leave a rack.

The step model prices ranks placed `gpus_per_rack` at a time (layout/placement.gpus_per_rack): 64 per 72-GPU rack
for 256 GPUs on NVL72. A plain `srun -N64 --ntasks-per-node=4` on Slurm's block topology fills racks 72 at a time,
and Megatron-Core's rank order then puts groups the plan prices inside one rack across two (DeepSeek-V3's EP64 on
256 GB200: group 64-127 becomes 8 + 56). Megatron-Bridge's perf launcher gets 64 per rack with `sbatch --segment`
(SEGMENT_SOURCE); a hostfile in rack order does too. These lines say it on the terminal and in launch.env.
"""

from __future__ import annotations

from commbench.planner.layout.placement import Placement

# GPUs per compute tray (one Slurm node) of a GB200/GB300 NVL72 rack: 18 trays x 4 GPUs; Megatron-Bridge's launcher
# sets --segment only for 4-GPU nodes (SEGMENT_SOURCE)
TRAY_GPUS = 4
MAX_SEGMENT_NODES = 18   # a segment is at most one rack's 18 trays (SEGMENT_SOURCE)
SEGMENT_SOURCE = "Megatron-Bridge v0.6.0 scripts/performance/utils/executors.py:168-176,209"
# what a HybridEP group across NVLink domains needs (search/hybridep_split.py: evenly split, which the search keeps)
HYBRIDEP_ACROSS_DOMAINS = (
    "DeepEP built with HYBRID_EP_MULTINODE=1 (Megatron-Bridge v0.6.0 docker/Dockerfile.ci:55 builds it so; Megatron-LM "
    "core_v0.16.1 docker/Dockerfile.ci.dev:62-77 does not, and hybrid_ep.cu:71-77 at eb9cee7 then asserts 'Inter-node "
    "communication is not supported'), and NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN left to DeepEP's detection, not "
    "set to the EP size as Megatron-Bridge's perf scripts set it (scripts/performance/utils/overrides.py:265-283 at "
    "v0.6.0, which also refuse HybridEP with EP > 72 on GB200/GB300)")
RACK_FILL_HEAD = "placement (priced):"   # how rack_fill_line begins (the terminal prints the plan's line)
KINDS = ("tp", "cp", "dp", "pp", "etp", "ep", "edp")   # Megatron-Core's group kinds (dp_cp repeats dp and cp)


def bridge_segment(num_gpus: int) -> int | None:
    """The --segment (nodes per rack) Megatron-Bridge's launcher gives `num_gpus` on 4-GPU nodes: all the nodes up to
    18, else the largest divisor of the node count <= 18 (SEGMENT_SOURCE); None when the count is not whole nodes."""
    if num_gpus % TRAY_GPUS:
        return None
    nodes = num_gpus // TRAY_GPUS
    return nodes if nodes <= MAX_SEGMENT_NODES else max(s for s in range(1, MAX_SEGMENT_NODES + 1) if nodes % s == 0)


def _crossing(placement: Placement, kind: str) -> int:
    return sum(len(racks) > 1 for racks in placement.racks_of_groups(kind))


def _kinds(placement: Placement) -> list[str]:
    return [k for k in KINDS if placement.groups.get(k) and len(placement.groups[k][0]) > 1]


def rack_fill_line(placement: Placement, domain_size: int) -> str | None:
    """One line: the GPUs per rack the plan prices and how a launch gets them, the partial rack, and the groups whose
    racks depend on it; None where every domain is full and a plain launch fills them as priced (or one domain)."""
    per_rack, n, racks = placement.gpus_per_rack, placement.num_gpus, placement.num_racks
    partial = n % per_rack
    if per_rack == domain_size and not partial and racks > 1:
        return (f"{RACK_FILL_HEAD} {per_rack} GPUs per {domain_size}-GPU NVLink domain, {racks} domains, in rank "
                "order: what a launch filling domains in order builds")
    if n <= domain_size and domain_size <= 8:
        return None   # one HGX node
    head = (f"{RACK_FILL_HEAD} {per_rack} of each {domain_size}-GPU NVLink domain's GPUs, {racks} domain(s), "
            "ranks in domain order")
    if partial:
        head = (f"{RACK_FILL_HEAD} {domain_size} GPUs per NVLink domain, {racks} domains, the last one partial "
                f"({partial} of its {domain_size} GPUs)")
    how = []
    if domain_size > 8 and per_rack % TRAY_GPUS == 0 and not partial:
        how.append(f"allocate {per_rack // TRAY_GPUS} {TRAY_GPUS}-GPU nodes per rack (Slurm: sbatch "
                   f"--segment={per_rack // TRAY_GPUS}, as {SEGMENT_SOURCE} does)")
    how.append(f"{'or ' if how else ''}a hostfile (or allocation) listing ranks rack by rack, {per_rack} per rack"
               + (f", then {partial}" if partial else ""))
    text = f"{head}; to launch it: {', '.join(how)}"
    if partial:
        segment = bridge_segment(n) if domain_size > 8 else None
        if segment is not None and segment * TRAY_GPUS != per_rack:
            per_bridge_rack = MAX_SEGMENT_NODES // segment * segment * TRAY_GPUS
            text += (f"; Megatron-Bridge's launcher (--segment={segment}: segments of {segment * TRAY_GPUS} GPUs, each "
                     f"in one rack) would place up to {per_bridge_rack} per rack instead")
    elif per_rack < domain_size and n > per_rack:
        filled = Placement(num_gpus=n, gpus_per_rack=domain_size, groups=placement.groups)
        moved = [f"{_crossing(filled, k)} of {len(placement.groups[k])} {k.upper()}{len(placement.groups[k][0])} "
                 f"groups" for k in _kinds(placement) if _crossing(filled, k) > _crossing(placement, k)]
        text += (f"; a plain launch fills domains {domain_size} at a time, where "
                 + (", ".join(moved) + " would cross domains that the plan prices inside one" if moved
                    else "no group crosses more domains than priced"))
    return text


def groups_leaving_line(placement: Placement, domain_size: int) -> str:
    """Which group kinds leave their NVLink domain under the priced placement (scale-out network) and which stay."""
    kinds = _kinds(placement)
    out = [f"{k.upper()}{len(placement.groups[k][0])} ({_crossing(placement, k)} of {len(placement.groups[k])} "
           f"groups, up to {placement.max_racks(k)} domains)" for k in kinds if _crossing(placement, k)]
    inside = [f"{k.upper()}{len(placement.groups[k][0])}" for k in kinds if not _crossing(placement, k)]
    return (f"groups leaving the {domain_size}-GPU NVLink domain (scale-out network): {', '.join(out) or 'none'}; "
            f"inside one domain: {', '.join(inside) or 'none'}")


HYBRIDEP_ACROSS_HEAD = "HybridEP across NVLink domains"


def hybridep_domains_line(placement: Placement, dispatcher: str, flex_backend: str | None) -> str | None:
    """Where the plan's HybridEP groups cross NVLink domains: what the launch needs for them (HYBRIDEP_ACROSS_DOMAINS);
    None elsewhere (no such group, another dispatcher or backend)."""
    if dispatcher != "flex" or flex_backend != "hybridep" or not placement.groups.get("ep") or \
            not _crossing(placement, "ep"):
        return None
    return (f"{HYBRIDEP_ACROSS_HEAD} ({_crossing(placement, 'ep')} of {len(placement.groups['ep'])} EP groups): "
            f"the launch needs {HYBRIDEP_ACROSS_DOMAINS}")
