"""What every Measurement must hold, checked when it is built: so a record is validated on write (bench,
sweep, import) and on read (a results file's line that fails is skipped and said, never counted)."""

from __future__ import annotations

import math
import re

from commbench.results.print_rounding import printed_bandwidth_slack_gbps, printed_half_unit_gbps

STATUSES = ("ok", "failed", "skipped")
MAX_SIZE_BYTES = 1 << 50  # 1 PiB: far above any buffer one collective moves
# commbench's dtypes and the other names nccl-tests prints (importers/nccl_tests.py DTYPE_NAMES)
RECORD_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "uint32", "uint64",
                 "float8_e4m3", "float8_e5m2",
                 # nccl-tests' own spellings, as files imported before the names were mapped hold them
                 "float", "half", "double", "bf16", "fp32", "fp16", "fp64", "int", "char")
RECORD_OPS = ("sum", "prod", "max", "min", "avg", "mulsum", "premulsum")  # ours and nccl-tests' redop names
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _bad(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"{name}={value!r} is invalid: {allowed}")


def check_measurement(m) -> None:
    """What any Measurement must hold, written or read: names from the known sets, counts in range, and
    for a measured point ("ok") positive finite times and finite bandwidths. A ValueError names the field."""
    if not _NAME_RE.fullmatch(str(m.collective)):
        raise _bad("collective", m.collective, "a name of letters, digits, '_', '.' or '-'")
    if m.dtype not in RECORD_DTYPES:
        raise _bad("dtype", m.dtype, f"allowed {', '.join(RECORD_DTYPES)}")
    if m.op is not None and m.op not in RECORD_OPS:
        raise _bad("op", m.op, f"allowed {', '.join(RECORD_OPS)} or null")
    if m.status not in STATUSES:
        raise _bad("status", m.status, f"allowed {', '.join(STATUSES)}")
    for name in ("size_bytes", "count"):
        if not 0 <= getattr(m, name) <= MAX_SIZE_BYTES:
            raise _bad(name, getattr(m, name), f"from 0 to {MAX_SIZE_BYTES:,}")
    for name in ("world_size", "group_size", "num_groups"):
        if not 1 <= getattr(m, name) <= 1 << 17:
            raise _bad(name, getattr(m, name), "from 1 to 131,072")
    if m.iters < 0 or m.warmup_iters < 0:
        raise _bad("iters", (m.iters, m.warmup_iters), "iteration counts >= 0")
    if m.status != "ok":
        return  # a failed or skipped point carries no numbers that count
    times = {name: getattr(m, name) for name in ("time_us_median", "time_us_mean", "time_us_min", "time_us_max",
                                                  "time_us_p99")}
    times.update({f"loop_time_us.{k}": v for k, v in m.loop_time_us.items()})
    for name, value in times.items():
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise _bad(name, value, "a finite time > 0 µs, or null")
    for name in ("algbw_gbps", "busbw_gbps"):
        value = getattr(m, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise _bad(name, value, "a finite bandwidth >= 0, or null")
    if not all(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in m.iter_times_us):
        raise _bad("iter_times_us", "[...]", "finite times >= 0 µs")
    if m.time_us_median is None and not m.loop_time_us:
        raise _bad("time_us_median", None, "a measured (status ok) point needs a time (or loop_time_us)")


SAMPLE_ROUNDING_US = 0.001   # iter_times_us are kept rounded to 1 ns (measure/harness.py time_statistics)
SUMMARY_DISAGREES = "the record's summary disagrees with its own iter_times_us"   # how such a line's reason reads


class SummaryDisagrees(ValueError):
    """A record whose summary times disagree with its own samples (check_summary_matches_samples): readers that
    refuse such a file rather than skip the line (fit) tell it from other unreadable lines by this type."""


def check_summary_matches_samples(data: dict) -> None:
    """A measured record's summary times (time_us_min/median/mean/max/p99) as its own per-iteration samples
    (iter_times_us) give them, within the samples' rounding: the harness computes both from one array, so a record
    whose summary disagrees was edited or corrupted (a summary x10 beside unchanged samples passed compare, which
    shows the median and judges the min from the samples). A ValueError names the fields, both values and that they
    disagree (SummaryDisagrees). Checked on the parsed line (records.iter_records) before a reader drops the samples; a median or
    percentile anywhere between its two neighbouring samples counts as theirs (conventions differ)."""
    samples = data.get("iter_times_us")
    if data.get("status") != "ok" or not isinstance(samples, list) or not samples \
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in samples):
        return   # no samples (an import), or samples check_measurement refuses itself
    ordered = sorted(samples)
    n = len(ordered)

    def between(position: float) -> tuple[float, float]:
        return ordered[math.floor(position)], ordered[math.ceil(position)]

    expected = {"time_us_min": (ordered[0], ordered[0]), "time_us_median": between((n - 1) / 2),
                "time_us_mean": (math.fsum(ordered) / n,) * 2, "time_us_max": (ordered[-1], ordered[-1])}
    if n >= 100:
        expected["time_us_p99"] = between(0.99 * (n - 1))
    wrong = []
    for name, (low, high) in expected.items():
        value = data.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        slack = SAMPLE_ROUNDING_US + 1e-9 * abs(value)
        if not low - slack <= value <= high + slack:
            shown = f"{low:.6g}" if low == high else f"{low:.6g}..{high:.6g}"
            wrong.append(f"{name}={value:.6g} (its samples: {shown})")
    if wrong:
        raise SummaryDisagrees(f"{', '.join(wrong)}: {SUMMARY_DISAGREES} ({n} samples) "
                         "beyond their rounding: edited or corrupted, not a measurement to judge")


BANDWIDTH_DISAGREES = "its algbw is not size_bytes / its time"   # how such a line's reason reads


def check_algbw_matches_size(m) -> None:
    """A measured record's algbw_gbps as its size_bytes and time give it, for the collectives whose algbw is size /
    time (nccl-tests' tests, importers/nccl_tests.py DERIVED_BANDWIDTH: bench computes it so, measure/harness.py
    measure_point, and import derives it so, derived_bandwidths; moe_all_to_all, grad_reduce_scatter and the rest count
    other bytes and are not checked). Commbench's own record (its median: harness) holds algbw = size / median to
    float precision; an import (nccl-tests' time, loop_time_us, no median) may hold the bandwidth nccl-tests printed
    (files imported before the importer derived it), so it is allowed the print rounding of the time and of the
    bandwidth. A record whose size_bytes was edited (or corrupted) beside its unchanged algbw and time was read,
    tabled and compared as a point of another size: a SummaryDisagrees naming both values."""
    from commbench.results.importers.nccl_tests import DERIVED_BANDWIDTH

    if m.status != "ok" or m.algbw_gbps is None or m.collective not in DERIVED_BANDWIDTH:
        return
    own = m.time_us_median is not None
    time_us_value = m.time_us_median if own else next(
        (m.loop_time_us[k] for k in ("avg", "rank0", "min", "max") if k in m.loop_time_us), None)
    if not time_us_value:
        return
    derived_gbps = m.size_bytes / (time_us_value * 1e-6) / 1e9
    slack = 1e-6 * derived_gbps + 1e-12 if own else printed_bandwidth_slack_gbps(m.algbw_gbps, derived_gbps,
                                                                                    time_us_value)
    if abs(m.algbw_gbps - derived_gbps) > slack:
        time_name = "time_us_median" if own else "loop_time_us"
        raise SummaryDisagrees(
            f"algbw_gbps={m.algbw_gbps:.6g} but size_bytes={m.size_bytes} / {time_name}={time_us_value:.6g} gives "
            f"{derived_gbps:.6g} GB/s: {BANDWIDTH_DISAGREES}, edited or corrupted, not a measurement to judge")


BUSBW_DISAGREES = "its busbw is not algbw x nccl-tests' bus factor"   # how such a line's reason reads


def _agrees(value: float, expected: float, own: bool, slack_gbps: float = 0.0) -> bool:
    """`value` as `expected` within float precision (commbench's own record) or, for an import, `slack_gbps` (the
    print rounding of the printed numbers it may hold)."""
    return abs(value - expected) <= 1e-6 * abs(expected) + 1e-12 + (0.0 if own else slack_gbps)


def check_busbw_matches_algbw(m) -> None:
    """A measured record's busbw_gbps as its algbw_gbps x nccl-tests' bus factor for its collective on its group's
    ranks (nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast,
    reduce, sendrecv 1; commbench's moe_all_to_all (n-1)/n, collectives/moe_all_to_all.py busbw_factor), as bench
    (measure/harness.py) and import (importers/nccl_tests.derived_bandwidths) write it; and moe_all_to_all's algbw
    (round_trip_bytes_max / its time) and its stage metrics (dispatch/combine algbw = their bytes / their time, busbw =
    algbw x the factor, round_trip_us their sum) recomputed from the record's own bytes and times. An import may hold
    printed 2-decimal bandwidths (files imported before the importer derived them): allowed their print rounding. A
    record whose busbw or MoE figures were edited was printed as measured by `report`: a SummaryDisagrees naming them."""
    from commbench.results.importers.nccl_tests import NCCL_TESTS_BUS_FACTOR, ROUND_TRIP_BUS_FACTOR

    factors = {**NCCL_TESTS_BUS_FACTOR, **ROUND_TRIP_BUS_FACTOR}
    if m.status != "ok" or m.collective not in factors or m.algbw_gbps is None:
        return
    own = m.time_us_median is not None
    factor = factors[m.collective](m.group_size)
    wrong = []
    if m.busbw_gbps is not None:
        slack = printed_half_unit_gbps(m.busbw_gbps) + factor * printed_half_unit_gbps(m.algbw_gbps)
        if not _agrees(m.busbw_gbps, m.algbw_gbps * factor, own, slack):
            wrong.append(f"busbw_gbps={m.busbw_gbps:.6g} but algbw_gbps={m.algbw_gbps:.6g} x {factor:.6g} "
                         f"({m.collective} on {m.group_size} ranks) gives {m.algbw_gbps * factor:.6g}")
    metrics = m.metrics or {}
    if m.collective in ROUND_TRIP_BUS_FACTOR:
        wrong += _moe_figures_disagree(m, metrics, factor, own)
    if wrong:
        raise SummaryDisagrees(f"{'; '.join(wrong)}: {BUSBW_DISAGREES} (or its MoE figures are not its bytes / its "
                               "times), edited or corrupted, not a measurement to judge")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _moe_figures_disagree(m, metrics: dict, factor: float, own: bool) -> list[str]:
    """moe_all_to_all's figures that are not its bytes / its times (collectives/moe_all_to_all.py stage_metrics)."""
    wrong = []
    round_trip = metrics.get("round_trip_bytes_max")
    time_us_value = m.time_us_median if own else next(
        (m.loop_time_us[k] for k in ("avg", "rank0", "min", "max") if k in m.loop_time_us), None)
    if _number(round_trip) and _number(time_us_value) and time_us_value > 0:
        expected = round_trip / time_us_value / 1e3
        slack = printed_bandwidth_slack_gbps(m.algbw_gbps, expected, time_us_value)
        if not _agrees(m.algbw_gbps, expected, own, slack):
            wrong.append(f"algbw_gbps={m.algbw_gbps:.6g} but round_trip_bytes_max={round_trip} / "
                         f"{'time_us_median' if own else 'loop_time_us'}={time_us_value:.6g} gives {expected:.6g}")
    stages = (("dispatch", m.size_bytes), ("combine", metrics.get("combine_bytes_max")))
    for stage, num_bytes in stages:
        stage_us = metrics.get(f"{stage}_us")
        if not (_number(stage_us) and stage_us > 0 and _number(num_bytes)):
            continue
        algbw = num_bytes / stage_us / 1e3
        for name, expected in ((f"{stage}_algbw_gbps", algbw), (f"{stage}_busbw_gbps", algbw * factor)):
            value = metrics.get(name)
            if _number(value) and not _agrees(value, expected, True):
                wrong.append(f"metrics.{name}={value:.6g} but {num_bytes} B / {stage}_us={stage_us:.6g} "
                             f"{'x ' + format(factor, '.6g') + ' ' if 'busbw' in name else ''}gives {expected:.6g}")
    parts = [metrics.get("dispatch_us"), metrics.get("combine_us")]
    total = metrics.get("round_trip_us")
    if _number(total) and all(_number(p) for p in parts) and not _agrees(total, sum(parts), True, 0.0):
        wrong.append(f"metrics.round_trip_us={total:.6g} but dispatch_us + combine_us gives {sum(parts):.6g}")
    return wrong


def check_world_size_matches_header(m, header_world_size: int | None) -> None:
    """A record's world_size as its run header's (every writer takes both from one launch): a record edited to another
    world size (4 in a 2-rank run) was drawn by `report` as a curve of its own. A SummaryDisagrees naming both."""
    if header_world_size is not None and m.world_size != header_world_size:
        raise SummaryDisagrees(f"world_size={m.world_size} but its run {m.run_id}'s header says {header_world_size} "
                               "ranks: edited or corrupted, not a measurement to judge")


# element bytes of every name RECORD_DTYPES allows (nccl-tests' own spellings as importers/nccl_tests.py maps them)
RECORD_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int32": 4,
                   "int64": 8, "uint32": 4, "uint64": 8, "float8_e4m3": 1, "float8_e5m2": 1, "float": 4, "half": 2,
                   "double": 8, "bf16": 2, "fp32": 4, "fp16": 2, "fp64": 8, "int": 4, "char": 1}
SIZE_DISAGREES = "its size_bytes is not its count x element bytes"   # how such a line's reason reads


def _sizes_for_count(m, itemsize: int) -> tuple[int, ...] | None:
    """The size_bytes a record of `m`'s collective and count can hold, or None where no rule is known. nccl-tests'
    count semantics (commbench/nccl_tests_counts.py; src/common.cu prints count = the collective's count argument):
    one rank's chunk for the chunked collectives (size = count x bytes x the group's ranks), the whole buffer for the
    others; grad_reduce_scatter counts one shard, or all of them for hierarchical-allreduce
    (collectives/grad_reduce_scatter.py _point_count); moe_all_to_all's count is its size / the record dtype's bytes
    (collectives/moe_all_to_all.py point_size: the size is routed bytes, possibly of a narrower dispatch dtype)."""
    from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES, WHOLE_BUFFER_COLLECTIVES

    chunk = m.count * itemsize
    if m.collective == "grad_reduce_scatter":
        return chunk * m.group_size, chunk
    if m.collective in CHUNKED_COLLECTIVES:
        return (chunk * m.group_size,)
    if m.collective == "moe_all_to_all":
        return tuple(range(chunk, chunk + itemsize))
    if m.collective in WHOLE_BUFFER_COLLECTIVES:
        return (chunk,)
    return None


def check_size_matches_count(m, sweep_entries: list | None = None, *, imported: bool = False) -> None:
    """A record's size_bytes as its count and dtype give it (nccl-tests' count semantics: _sizes_for_count), and, in
    a sweep run whose header lists its entries (`sweep_entries`), as nccl-tests' alignment of one of the sizes the run
    planned for its collective and dtype on its group's ranks (nccl_tests_counts.nccl_tests_count; a point that could
    not be sized keeps its requested size, count 0). Every writer takes size and count from one buffer, so a record
    edited to another size (an all_to_all of 96 KiB said to be 384 KiB, its bandwidths scaled to match, its count
    left) was tabled, compared and fitted as a point of that size: a SummaryDisagrees naming the fields. `imported`:
    an nccl-tests import, whose log may not list its ranks (importers/nccl_tests.count_mismatch): a chunked
    collective's size any whole multiple of its chunk there."""
    itemsize = RECORD_ITEMSIZE.get(m.dtype)
    if itemsize is None:
        return
    if m.count > 0:
        sizes = _sizes_for_count(m, itemsize)
        from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES

        if imported and m.collective in CHUNKED_COLLECTIVES and m.count * itemsize:
            sizes = (m.size_bytes,) if m.size_bytes % (m.count * itemsize) == 0 else sizes
        if sizes is not None and m.size_bytes not in sizes:
            expected = sizes[0] if len(sizes) == 1 or m.collective == "moe_all_to_all" else " or ".join(map(str, sizes))
            raise SummaryDisagrees(
                f"size_bytes={m.size_bytes} but count={m.count} x {itemsize} B ({m.dtype})"
                f"{f' x {m.group_size} ranks' if sizes[0] != m.count * itemsize else ''} gives {expected} "
                f"({m.collective}): {SIZE_DISAGREES}, edited or corrupted, not a measurement to judge")
    planned = planned_sizes(m, itemsize, sweep_entries)
    if planned and m.size_bytes not in planned:
        raise SummaryDisagrees(
            f"size_bytes={m.size_bytes} but its run {m.run_id}'s header plans {m.collective} {m.dtype} at "
            f"{', '.join(map(str, sorted(planned)))} B on {m.group_size} ranks (sweep_entries, as nccl-tests aligns "
            "them): edited or corrupted, not a measurement to judge")


def planned_sizes(m, itemsize: int, sweep_entries: list | None) -> set[int]:
    """The sizes (requested, and as nccl-tests aligns them on `m`'s group) a sweep header's entries plan for `m`'s
    collective and dtype; empty where the header lists none (bench, imports, moe_all_to_all's routed sizes)."""
    from commbench.nccl_tests_counts import CHUNKED_COLLECTIVES, WHOLE_BUFFER_COLLECTIVES, nccl_tests_count

    if m.collective == "moe_all_to_all" or m.collective not in CHUNKED_COLLECTIVES | WHOLE_BUFFER_COLLECTIVES:
        return set()
    out: set[int] = set()
    for entry in sweep_entries or ():
        if not isinstance(entry, dict) or entry.get("collective") != m.collective \
                or m.dtype not in (entry.get("dtypes") or ()):
            continue
        for requested in entry.get("sizes_bytes") or ():
            if isinstance(requested, int) and not isinstance(requested, bool) and requested >= 0:
                out |= {requested, nccl_tests_count(m.collective, requested, itemsize, m.group_size)[1]}
    return out


HEADER_DISAGREES = "its header contradicts its own world_size"   # how such a line's reason reads


def header_contradiction(h) -> str | None:
    """Why a run header of commbench's own launch disagrees with its own world_size, or None: its per-rank lists
    (hostnames, devices, torch_threads: provenance.collect_header gathers one entry from every rank; a one-entry list
    is a launcher's own header, sweep/combos.skipped_header), its topology's racks (each rank in one rack:
    comm/topology.py) and, for a local launch, argv's --nproc (the ranks it started). A header edited to another
    world size, records and all (3 host names, 3 devices, racks [[0,1,2]], --nproc 3, world size 4), fitted a scale-out
    curve of 4 ranks. Imported runs (launcher nccl-tests) list what the log printed, which may be cut: not checked."""
    from commbench.results.records import IMPORTED_LAUNCHER

    if h.launcher == IMPORTED_LAUNCHER:
        return None
    world = h.world_size
    wrong = [f"{name} lists {len(value)}" for name, value in (("hostnames", h.hostnames), ("devices", h.devices),
                                                               ("torch_threads", h.torch_threads))
             if isinstance(value, list) and len(value) > 1 and len(value) != world]
    racks = (h.topology or {}).get("racks") if isinstance(h.topology, dict) else None
    if isinstance(racks, list) and racks and all(isinstance(r, list) for r in racks):
        ranks = sorted(x for r in racks for x in r if isinstance(x, int))
        if ranks != list(range(world)):
            wrong.append(f"topology racks hold ranks {_ranks_text(ranks)}")
    argv = [str(a) for a in h.argv or ()]
    nproc = next((argv[i + 1] if a == "--nproc" and i + 1 < len(argv) else a.partition("=")[2]
                  for i, a in enumerate(argv) if a == "--nproc" or a.startswith("--nproc=")), None)
    if h.launcher == "local" and nproc is not None and nproc.isdigit() and int(nproc) != world:
        wrong.append(f"argv's --nproc says {nproc}")
    if not wrong:
        return None
    return (f"world_size={world} but {', '.join(wrong)} (run {h.run_id}): {HEADER_DISAGREES}, edited or corrupted, "
            "not a run to judge")


def _ranks_text(ranks: list[int]) -> str:
    if ranks and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}..{ranks[-1]}" if len(ranks) > 2 else ", ".join(map(str, ranks))
    return ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")
