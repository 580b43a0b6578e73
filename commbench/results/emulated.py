"""`commbench emulate`'s fabric as a run header records it (RunHeader.emulated) and as every text names it: one
description and one text, so the text a run prints (its --format nccl-tests intro line) reads back into the header
the run's JSONL holds (importers/nccl_tests.py)."""

from __future__ import annotations

import re

TOOL = "commbench emulate"
SCALE_UP = "loopback inside one network namespace per rack (no rate limit)"
SCALE_OUT = "veth per rack with a tbf rate limit (bandwidth only, no added latency)"
NO_SCALE_OUT = "none: one rack, no uplink (no veth, no rate limit)"


def description(num_racks: int, ranks_per_rack: int, scale_out_rate_bits_per_s: float | None,
                tbf_burst_bytes: int | None = None) -> dict:
    """The header's `emulated` object of a fabric of `num_racks` racks of `ranks_per_rack` ranks; one rack has no
    scale-out link, so no rate (emulate refuses one). `tbf_burst_bytes`: the uplinks' tbf bucket, what crosses at
    loopback speed once it has refilled (emulate/fabric.py tbf_burst_bytes); None where unknown."""
    rate = scale_out_rate_bits_per_s if num_racks > 1 else None
    found = {"emulated": True, "tool": TOOL, "num_racks": num_racks, "ranks_per_rack": ranks_per_rack,
             "scale_out_rate_bits_per_s": rate, "scale_up": SCALE_UP, "scale_out": SCALE_OUT if num_racks > 1
             else NO_SCALE_OUT}
    if rate is not None and tbf_burst_bytes is not None:
        found["tbf_burst_bytes"] = tbf_burst_bytes
    return found


def rate_text(bits_per_s: float) -> str:
    """'0.1 Gbit/s': every digit of the rate (a rate read back from it is the rate set)."""
    return f"{float(bits_per_s) / 1e9:.12g} Gbit/s"


def fabric_text(emulated: dict) -> str:
    """'EMULATED fabric: 2 racks x 1 ranks, 0.1 Gbit/s per rack uplink' ('1 rack x 2 ranks, no scale-out link');
    'EMULATED fabric' (its free text) where the header's object does not come from commbench emulate."""
    if "num_racks" not in emulated:
        detail = emulated.get("description")
        return "EMULATED fabric" + (f" ({detail})" if detail else "")
    racks, rate = emulated.get("num_racks"), emulated.get("scale_out_rate_bits_per_s")
    burst = emulated.get("tbf_burst_bytes")
    return (f"EMULATED fabric: {racks} {'rack' if racks == 1 else 'racks'} x {emulated.get('ranks_per_rack')} ranks"
            + (", no scale-out link" if racks == 1 else f", {rate_text(rate)} per rack uplink" if rate else "")
            + (f", tbf burst {burst} B" if rate and burst else ""))


def setup_text(emulated: dict | None) -> str:
    """The fabric as a setup: 'real fabric', or 'EMULATED fabric: 2 racks x 1 ranks, 0.1 Gbit/s per rack uplink'
    (every parameter that sets its links; EMULATED in capitals as everywhere an emulated run is named: report's legend
    entries and headings read it). compare's setup check, fit's refusal of mixed fabrics and report's labels
    read it: two emulated fabrics of another rate or other racks are two setups (one rule)."""
    if not emulated:
        return "real fabric"
    # its racks, ranks and rate: the burst follows from the rate (tbf_burst_bytes), and runs written before the
    # header recorded it are the same fabric
    return fabric_text({k: v for k, v in emulated.items() if k != "tbf_burst_bytes"})


_FABRIC_RE = re.compile(r"EMULATED fabric: (\d+) racks? x (\d+) ranks, (?:(\d+(?:\.\d+)?(?:e[+-]?\d+)?) Gbit/s per rack "
                        r"uplink(?:, tbf burst (\d+) B)?|no scale-out link)")
# the intro line before fabric_text named it (commbench 0.1.0 until this): 'EMULATED fabric: 2 racks joined at 0.1 Gbit/s'
_OLD_FABRIC_RE = re.compile(r"EMULATED fabric: (\d+) racks joined at (\d+(?:\.\d+)?(?:e[+-]?\d+)?) Gbit/s")


def from_text(text: str, world_size: int | None = None) -> dict | None:
    """The header's `emulated` object a line naming the fabric (fabric_text) says, or None where it names none. The
    old form names no ranks per rack: the world's ranks over the racks (emulate starts as many in each)."""
    burst = None
    if (match := _FABRIC_RE.search(text)):
        racks, per_rack, rate, burst = int(match.group(1)), int(match.group(2)), match.group(3), match.group(4)
    elif (match := _OLD_FABRIC_RE.search(text)) and world_size and world_size % int(match.group(1)) == 0:
        racks, rate = int(match.group(1)), match.group(2)
        per_rack = world_size // racks
    else:
        return None
    return description(racks, per_rack, float(round(float(rate) * 1e9)) if rate else None,
                       int(burst) if burst else None)
