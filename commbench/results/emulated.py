"""`commbench emulate`'s fabric as a run header records it (RunHeader.emulated) and as every text names it: one
description and one text, so the text a run prints (its --format nccl-tests intro line) reads back into the header
the run's JSONL holds (importers/nccl_tests.py)."""

from __future__ import annotations

import re

TOOL = "commbench emulate"
SCALE_UP = "loopback inside one network namespace per rack (no rate limit)"
SCALE_OUT = "veth per rack with a tbf rate limit (bandwidth only, no added latency)"


def description(num_racks: int, ranks_per_rack: int, scale_out_rate_bits_per_s: float) -> dict:
    """The header's `emulated` object of a fabric of `num_racks` racks of `ranks_per_rack` ranks."""
    return {"emulated": True, "tool": TOOL, "num_racks": num_racks, "ranks_per_rack": ranks_per_rack,
            "scale_out_rate_bits_per_s": scale_out_rate_bits_per_s, "scale_up": SCALE_UP, "scale_out": SCALE_OUT}


def rate_text(bits_per_s: float) -> str:
    """'0.1 Gbit/s': every digit of the rate (a rate read back from it is the rate set)."""
    return f"{float(bits_per_s) / 1e9:.12g} Gbit/s"


def fabric_text(emulated: dict) -> str:
    """'EMULATED fabric: 2 racks x 1 ranks, 0.1 Gbit/s per rack uplink'; 'EMULATED fabric' (its free text) where the
    header's object does not come from commbench emulate."""
    if "num_racks" not in emulated:
        detail = emulated.get("description")
        return "EMULATED fabric" + (f" ({detail})" if detail else "")
    rate = emulated.get("scale_out_rate_bits_per_s")
    return (f"EMULATED fabric: {emulated.get('num_racks')} racks x {emulated.get('ranks_per_rack')} ranks"
            + (f", {rate_text(rate)} per rack uplink" if rate else ""))


def setup_text(emulated: dict | None) -> str:
    """The fabric as a setup: 'real fabric', or 'emulated fabric: 2 racks x 1 ranks, 0.1 Gbit/s per rack uplink'
    (every parameter that sets its links). compare's setup check, fit's refusal of mixed fabrics and report's labels
    read it: two emulated fabrics of another rate or other racks are two setups (one rule)."""
    if not emulated:
        return "real fabric"
    return "emulated fabric" + fabric_text(emulated)[len("EMULATED fabric"):]


_FABRIC_RE = re.compile(r"EMULATED fabric: (\d+) racks x (\d+) ranks, (\d+(?:\.\d+)?(?:e[+-]?\d+)?) Gbit/s per rack uplink")
# the intro line before fabric_text named it (commbench 0.1.0 until this): 'EMULATED fabric: 2 racks joined at 0.1 Gbit/s'
_OLD_FABRIC_RE = re.compile(r"EMULATED fabric: (\d+) racks joined at (\d+(?:\.\d+)?(?:e[+-]?\d+)?) Gbit/s")


def from_text(text: str, world_size: int | None = None) -> dict | None:
    """The header's `emulated` object a line naming the fabric (fabric_text) says, or None where it names none. The
    old form names no ranks per rack: the world's ranks over the racks (emulate starts as many in each)."""
    if (match := _FABRIC_RE.search(text)):
        racks, per_rack, rate = int(match.group(1)), int(match.group(2)), match.group(3)
    elif (match := _OLD_FABRIC_RE.search(text)) and world_size and world_size % int(match.group(1)) == 0:
        racks, rate = int(match.group(1)), match.group(2)
        per_rack = world_size // racks
    else:
        return None
    return description(racks, per_rack, float(round(float(rate) * 1e9)))
