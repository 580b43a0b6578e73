"""moe_all_to_all's parameters read back from commbench's `--format nccl-tests` text, as its JSONL records hold them.

The banner states the MoE layer where a size sweep's minBytes/maxBytes/step stand (measure/view.moe_swept, its setup
from results/render.moe_setup): "tokens per rank: 32,64 ([preset NAME: ]hidden 128, 4 experts, top-2, balanced
routing[ (seed N)], per-expert dispatch in bf16, combine in bf16[, capacity factor 1.25 (padded to capacity|tokens over capacity
dropped)]; size: the busiest rank's dispatch bytes)". Each row's '# commbench point:' line states the rest
(nccl_tests_text.MOE_POINT_KEYS: tokens per rank, seed, expert_tp, the exact capacity factor, a trace's rows). The
exchange's ranks (ep_size) are the row's group, experts_per_rank = experts / (ranks / expert_tp)
(collectives/moe_all_to_all.py). What a log does not say (an older text: no seed on its point lines, or no point
line) is UNKNOWN, never a default: compare then matches no run that states it, rather than take a 4-expert run for an
8-expert one or seed 0 for seed 7.
"""

from __future__ import annotations

import re

from commbench.results.nccl_tests_text import MOE_POINT_KEYS, UNKNOWN, point_value

_SWEPT_RE = re.compile(r"tokens per rank: ([\d,]+) \((.*); size: the busiest rank's dispatch bytes\)")
_SETUP_RE = re.compile(r"(?:preset (?P<preset>\S+): )?hidden (?P<hidden>\d+), (?P<num_experts>\d+) experts, "
                       r"top-(?P<top_k>\d+), (?P<routing>.+) routing(?: \(seed (?P<seed>\d+)\))?, (?P<dispatch_mode>\S+) dispatch in "
                       r"(?P<dispatch_dtype>\S+), combine in (?P<combine_dtype>[^,]+?)"
                       r"(?:, capacity factor (?P<capacity_factor>\S+) \((?P<padding>padded to capacity|tokens over "
                       r"capacity dropped)\))?")
# the MoE keys every record holds (moe/params.MoeParams.as_params), beside tokens_per_rank
LAYER_KEYS = ("hidden", "top_k", "num_experts", "routing", "dispatch_mode", "dispatch_dtype", "combine_dtype", "seed",
              "preset")


def parse_moe_banner(body: str) -> dict | None:
    """The MoE layer a banner line states ({} where its setup cannot be read: every key then unknown), with
    `tokens` the tokens per rank it sweeps; None for a banner of a size sweep."""
    swept = _SWEPT_RE.search(body)
    if swept is None:
        return None
    tokens = [int(t) for t in swept.group(1).split(",") if t]
    setup = _SETUP_RE.fullmatch(swept.group(2).strip())
    if setup is None:
        return {"tokens": tokens}
    layer = {key: setup.group(key) for key in ("routing", "dispatch_mode", "dispatch_dtype", "combine_dtype")}
    layer.update({key: int(setup.group(key)) for key in ("hidden", "num_experts", "top_k")})
    layer["preset"] = setup.group("preset")
    if setup.group("seed") is not None:   # the banner states it from commbench 0.1.0 fix-FN on; the point line always
        layer["seed"] = int(setup.group("seed"))
    if setup.group("capacity_factor") is not None:
        layer["capacity_factor"] = float(setup.group("capacity_factor"))   # %g: the point line's is exact
        layer["pad_to_capacity"] = setup.group("padding") == "padded to capacity"
    return {"tokens": tokens, **layer}


def moe_params(banner: dict | None, point: dict, ranks: int) -> dict:
    """A row's params as the native record holds them (MoeParams.as_params + ep_size, experts_per_rank, a trace's
    trace_rows / trace_recycled / trace_sha256), from the run's banner (parse_moe_banner) and the row's point line; UNKNOWN for what
    neither states."""
    banner = banner or {}
    stated = {key: point_value(key, value) for key, value in point.items() if key in MOE_POINT_KEYS}
    tokens = banner.get("tokens") or []
    params = {"tokens_per_rank": stated.get("tokens_per_rank", tokens[0] if len(tokens) == 1 else UNKNOWN)}
    params.update({key: stated.get(key, banner.get(key, UNKNOWN)) for key in LAYER_KEYS})
    if "capacity_factor" in banner:
        params["capacity_factor"] = stated.get("capacity_factor", banner["capacity_factor"])
        params["pad_to_capacity"] = banner["pad_to_capacity"]
    # expert_tp > 1 only with per-rank dispatch (MoeParams._check_expert_tp): per-expert dispatch is expert_tp 1
    expert_tp = stated.get("expert_tp", 1 if banner.get("dispatch_mode") == "per-expert" or "seed" in stated
                           else UNKNOWN)
    if expert_tp != 1:
        params["expert_tp"] = expert_tp
    params["ep_size"] = ranks
    experts = params["num_experts"]
    params["experts_per_rank"] = (experts // (ranks // expert_tp) if isinstance(experts, int) and
                                  isinstance(expert_tp, int) and expert_tp and ranks % expert_tp == 0 and
                                  ranks // expert_tp else UNKNOWN)
    if str(params["routing"]).startswith("trace:"):
        for key in ("trace_rows", "trace_recycled"):
            params[key] = stated.get(key, UNKNOWN)
        if "trace_sha256" in stated:   # a text of commbench before it: left out, so compare matches on the path
            params["trace_sha256"] = stated["trace_sha256"]
    return params
