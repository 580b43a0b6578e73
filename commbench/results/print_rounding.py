"""How far a number nccl-tests printed may sit from the value it rounded: half its last printed digit.

Shared by the readers that compare a printed time or bandwidth with one derived from other fields: compare's
same-run match of a JSONL against its --format nccl-tests text, the importer's printed-vs-derived bandwidth note and
record_checks' size x time x algbw check."""

from __future__ import annotations

import math


def printed_half_unit_us(time_us_value: float) -> float:
    """Half the last printed digit of a time in an nccl-tests text table, the coarser of its two layouts, with a little
    slack for the float sums that import does: older nccl-tests (src/common.cu: "%7.0f" from 10000 us, "%7.1f" from
    100 us, else "%7.2f") and 2.17's getFloatStr (src/util.cu, commbench's --format nccl-tests: "%.2f" while 7 wide,
    then "%.1f", "%.0f", from 1e7 us "%.1e": two significant digits)."""
    if time_us_value >= 1e7:
        step = 10.0 ** (math.floor(math.log10(time_us_value)) - 1)
    else:
        step = 1.0 if time_us_value >= 10000.0 else 0.1 if time_us_value >= 100.0 else 0.01
    return step / 2 * 1.001 + 1e-9


def printed_half_unit_gbps(value: float) -> float:
    """Half the last digit nccl-tests prints of a bandwidth: "%6.2f" (before 2.17), getFloatStr 6 wide (2.17: two
    decimals below 1000, one below 10000, none below 1e6, then "%.1e")."""
    if value < 1000:
        return 0.005
    if value < 1e4:
        return 0.05
    return 0.5 if value < 1e6 else 10.0 ** (math.floor(math.log10(value)) - 1) / 2


def printed_bandwidth_slack_gbps(printed_gbps: float, derived_gbps: float, time_us_value: float) -> float:
    """How far a printed bandwidth may sit from size / time when both the bandwidth and the time were printed
    rounded: the bandwidth's half digit plus what the time's half digit moves size / time (1% slack)."""
    return (printed_half_unit_gbps(printed_gbps)
            + derived_gbps * printed_half_unit_us(time_us_value) / time_us_value * 1.01)
