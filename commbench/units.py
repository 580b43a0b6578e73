"""Sizes with K/M/G/T suffixes (powers of 1024, as nccl-tests' -b/-e) and rates (GB = 1e9 B)."""

from __future__ import annotations

import re

from commbench.errors import invalid

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
SIZE_SUFFIXES = "K/M/G/T = 1024^n, or KiB/MiB/GiB/TiB"   # every unit _size_multiplier takes, named alike everywhere
SIZE_FORMS = f"a positive whole byte count such as 8, 64K, 16M, 2G, 1T or 1536KiB ({SIZE_SUFFIXES}, as nccl-tests)"


def _size_multiplier(suffix: str) -> int:
    """Bytes per unit of a size suffix: '' or 'B', K/M/G/T (any case) or KiB/MiB/GiB/TiB. A lower-case
    'b' is bits, and 'MB' is 10^6 B to SI (and in commbench's own tables: format_size prints '80 MB' for
    80,000,000 B) but 2^20 B to nccl-tests: both are refused, saying what to write."""
    unit = suffix[:1].lower() if suffix[:1].lower() in ("k", "m", "g", "t") else ""
    tail = suffix[len(unit):]
    letter = unit.upper()
    if tail.endswith("b"):
        meant = f"{letter} or {letter}iB" if unit else "the count alone or B"
        raise ValueError(f"a lower-case b means bits; sizes are bytes: write {meant}")
    if tail in ("", "B") and not unit or tail in ("", "iB", "IB") and unit:
        return _SIZE_MULT[unit]
    if unit and tail == "B":
        power = " kmgt".index(unit)
        raise ValueError(f"{letter}B is ambiguous: 10^{3 * power} B in SI (and in commbench's tables), 2^{10 * power} B "
                         f"in nccl-tests: write {letter} or {letter}iB for 2^{10 * power} B, or the bytes in digits")
    raise ValueError(f"unknown unit {suffix!r}: {SIZE_FORMS}")


def parse_size_bytes(text: str | int, field: str = "size") -> int:
    """Parse '8', '64K', '16M', '2G', '1.5MiB' into bytes (K = 1024, as nccl-tests). Refused, in one line
    naming `field`: bits ('1Mb'), the ambiguous 'MB' (10^6 or 2^20?), and a fraction of a byte ('1.3K')."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise invalid(field, text, SIZE_FORMS)
        try:
            mult = _size_multiplier(match.group(2))
        except ValueError as exc:
            raise invalid(field, text, str(exc)) from None
        exact = float(match.group(1)) * mult
        if exact != int(exact):
            raise invalid(field, text, f"not a whole number of bytes ({exact:g} B); {SIZE_FORMS}")
        value = int(exact)
    if value <= 0:
        raise invalid(field, text, "sizes must be positive")
    return value


def format_size(size_bytes: float) -> str:
    """A size people read exactly: 8 B, 64 KiB, 1536 KiB, 16 MiB in the binary unit that makes it whole
    (at most 4 digits); else the decimal unit that does (80 MB = 80,000,000 B); else the exact bytes, as
    nccl-tests prints them (268434432 B, never "262143 KiB"). A size that is not a whole number of bytes
    (a plot tick) keeps one decimal in the largest binary unit."""
    if size_bytes != int(size_bytes):
        for suffix, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if size_bytes >= mult:
                return f"{size_bytes / mult:.1f} {suffix}"
        return f"{size_bytes:g} B"
    n = int(size_bytes)
    for suffix, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= mult and n % mult == 0 and n // mult < 10_000:
            return f"{n // mult} {suffix}"
    for suffix, mult in (("TB", 10 ** 12), ("GB", 10 ** 9), ("MB", 10 ** 6)):
        if n >= mult and n % mult == 0 and n // mult < 1000:
            return f"{n // mult} {suffix}"
    return f"{n} B"


# --max-bytes defaults, one rule for every command: what is measured stops at 16 MiB (seconds on one
# machine, past the latency regime; raise it for bandwidth), what is predicted goes to 8 GiB (free to
# compute, and the bandwidth regime of every fabric preset).
MEASURED_MAX_BYTES = "16M"
PREDICTED_MAX_BYTES = "8G"
MIN_TIMEOUT_S = 0.1  # gloo counts whole milliseconds: 1e-9 s became 0 ms and every collective failed at once
MAX_TIMEOUT_S = 86_400.0  # a day: a collective timeout beyond this is a typo (and overflows torch's timedelta)


def timeout_problem(value: object) -> str | None:
    """Why `value` is not a usable timeout in seconds (finite, > 0, at most a day), or None."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "a number of seconds"
    if not math.isfinite(value) or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        return f"a finite number of seconds from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g}"
    return None


MAX_POINTS = 10_000  # sizes in one range: more is a typo (-i 1 up to 1T), not a measurement plan
# nccl-tests' own -i default (src/common.cu at v2.19.6, a0b82b2, :94-95: stepBytes = 1*1024*1024, stepFactor = 1): its
# size loop (:936) adds stepBytes whenever stepFactor is not > 1, so `-f 1` alone steps by 1 MiB
NCCL_TESTS_STEP_BYTES = 1 << 20


def size_step(step_factor: float | None, step_bytes: int | None) -> tuple[float, str]:
    """What the size loop steps by, as nccl-tests' loop picks it: (factor, "factor") when -f > 1 (2 when neither is
    given), else (bytes, "bytes"): -i, or nccl-tests' 1 MiB default for `-f 1` alone."""
    if step_factor == 1 or (step_bytes is not None and step_factor is None):
        return (NCCL_TESTS_STEP_BYTES if step_bytes is None else step_bytes), "bytes"
    return (2.0 if step_factor is None else step_factor), "factor"


def size_range(min_bytes: int, max_bytes: int, step_factor: float | None = None,
               step_bytes: int | None = None, *, names: tuple[str, str] = ("--step-bytes", "--step-factor")) -> list[int]:
    """The sizes nccl-tests visits: geometric with -f, or arithmetic with -i; given both, -f when it is > 1, as
    nccl-tests' size loop does (size = stepFactor > 1 ? size * stepFactor : size + stepBytes); -f 1 alone steps by
    nccl-tests' default stepBytes, 1 MiB (size_step); at most MAX_POINTS of them (counted before any list is built)."""
    import math

    if min_bytes > max_bytes:
        raise invalid("--min-bytes", min_bytes, f"must be <= --max-bytes ({max_bytes})")
    step, kind = size_step(step_factor, step_bytes)
    if kind == "bytes":
        step = int(step)
        if step <= 0:
            raise invalid(names[0], step, "must be > 0")
        count = (max_bytes - min_bytes) // step + 1
        if count > MAX_POINTS:   # -f 1 alone: the step is nccl-tests' default, named as such (no -i was given)
            option, value, given = ((names[0], step, "") if step_bytes is not None else
                                    (names[1], step_factor, "without -i, steps of nccl-tests' default 1 MiB: "))
            raise invalid(option, value, f"{given}{count:,} sizes from {min_bytes} to {max_bytes}; at most "
                          f"{MAX_POINTS:,} per range: use a larger step, or split the range")
        return list(range(min_bytes, max_bytes + 1, step))
    factor = step
    if not (math.isfinite(factor) and factor > 1):
        raise invalid(names[1], step_factor, "a finite number > 1" + (
            f", or 1 for steps of a fixed size: {names[0]} (-i SIZE; 1 MiB unless given, as nccl-tests)"
            if names[0] == "--step-bytes" else ""))
    count = math.floor(math.log(max_bytes / max(min_bytes, 1)) / math.log(factor)) + 1 if min_bytes > 0 else MAX_POINTS + 1
    if count > MAX_POINTS:
        raise invalid(names[1], step_factor, f"about {count:,} sizes from {min_bytes} to {max_bytes}; at most "
                      f"{MAX_POINTS:,} per range: use a larger factor, or split the range")
    sizes, size = [], float(min_bytes)
    while size <= max_bytes:
        sizes.append(int(size))
        size *= factor
    return sizes


# tc(8) RATES and iproute2 tc/tc_util.c's suffix table (matched without case): bit (or a bare number) and SI or IEC
# multiples are bits per second; bps and its multiples are BYTES per second (100mbps = 800 Mbit/s)
TC_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
                 "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40,
                 "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
                 "kibps": 8 * 2**10, "mibps": 8 * 2**20, "gibps": 8 * 2**30, "tibps": 8 * 2**40}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)([a-z]*)\s*$", re.IGNORECASE)


def parse_rate_bits_per_s(text: str, field: str = "rate") -> float:
    """A link rate in tc's syntax (tc(8) RATES): '1gbit', '800mbit', '1mibit' are bits per second, '100mbps' bytes per
    second (800 Mbit/s), a bare number bits; in bits per second. What tc refuses ('100m') is refused."""
    match = _RATE_RE.match(str(text))
    unit = match.group(2).lower() if match else None
    if unit is not None and unit not in TC_RATE_UNITS and unit in ("k", "m", "g", "t", "kb", "mb", "gb", "tb"):
        prefix = unit[0]
        raise invalid(field, text, f"a unit as tc(8) reads it: {match.group(1)}{prefix}bit (bits per second) or "
                                   f"{match.group(1)}{prefix}bps (BYTES per second)")
    if unit is None or unit not in ("", *TC_RATE_UNITS):
        raise invalid(field, text, "a rate as tc(8) reads it, e.g. 1gbit, 800mbit (bits per second; also kbit, "
                                   "kibit, mibit, ...) or 100mbps (BYTES per second)")
    value = float(match.group(1)) * TC_RATE_UNITS.get(unit, 1)
    if value <= 0:
        raise invalid(field, text, "rates must be positive")
    return value
