"""From measured records (commbench JSONL) to fitted curves, their quality, and a fabric profile.

A curve is every ok point of one (collective, backend, group size, layout, domains spanned). Each
is fitted with `fit.fit_piecewise` against bus bytes, and judged by leave-one-out error on the
sizes >= `min_heldout_bytes`. Which tier a curve measures comes from `num_domains_of`: the
record's params ("num_domains"), else the racks its groups' actual ranks fall in (the run header's racks, else its
hosts: one host name per rank on several hosts, a domain each, as a launch without NVLink fabric information groups
ranks), else the header's topology or emulation rack size ("domain_size" / "ranks_per_node": block placement), else
one domain. That is the hook for two-tier fabrics (real or emulated):
curves spanning domains become scale-out curves, with the scale-out rate recovered from the
composition rules of `formulas`.

Stages of composite records that are plain collectives (MoE dispatch/combine, the reduce-scatters
of a hierarchical gradient reduce-scatter: see `stages`) become points of those collectives;
other stages, and the totals of staged records, are fitted and reported but not used to predict.
MoE records without stages are fitted against the busiest rank's bytes (the larger of metrics bytes_sent_max /
bytes_received_max, as moe/accounting.py writes them, else size).

Each curve names the runs its points come from and their hosts (CurveFit.runs / hosts): one profile may
join curves measured apart (all-reduce on one node, all-to-all on another of the same cluster), and
then says which came from where.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from commbench.comm.nccl_tuning import combo_from_params
from commbench.costmodel.fit import PiecewiseFit, fit_piecewise, leave_one_out_errors
from commbench.costmodel.accuracy import REGIMES
from commbench.costmodel.formulas import COLLECTIVES, bus_factor
from commbench.costmodel.nccl_tables import NCCL_ALGO_NAMES
from commbench.costmodel.stages import STAGE_MAPS, stage_points
from commbench.costmodel.time_growth import CurvePoint, TimeGrowth, time_growth
from commbench.results.records import Measurement, RunHeader, headline_time

MIN_HELDOUT_BYTES = 64 * 1024
# NCCL_ALGO / NCCL_PROTO spellings -> nccl_model's names
_NCCL_ALGORITHMS = {name.lower(): key for key, name in NCCL_ALGO_NAMES.items()} | {"collnet": "collnet_direct",
                                                                                   "nvls_tree": "nvls_tree"}
_NCCL_PROTOCOLS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
POOR_FIT = 0.10  # median held-out relative error above which a fit is called poor
# Times of one size measured several times (several runs, -N cycles) whose largest is more than this over their
# smallest: the runs disagree, and the median per size the curve is fitted to hides it (its held-out error is of the
# medians: two runs 3.3x apart fitted with "0.0% held-out error"; found from outside)
RUN_SPREAD_WARN = 0.25
# A fitted bus bandwidth beyond 100 TB/s per rank is no link's (NVLink 5: 0.9 TB/s a direction; HBM3e: 8 TB/s): the
# times did not grow with size (noise, or a loaded CPU host) and the fit's slope is ~0; 1e21 GB/s was stored and
# `predict` printed 2,566 GB/s for 8 GiB on gloo from it. Points that record their fastest iteration are judged against
# their own noise as well (time_growth): a median that rises by noise fits a bandwidth well under this bound
MAX_PLAUSIBLE_BUSBW = 1e14
_DOMAIN_KEYS = ("ranks_per_rack", "domain_size", "ranks_per_domain", "ranks_per_node", "gpus_per_node")
# what a curve's `latency_us` is (to_report): the alpha-beta fit's intercept, or a latency-only curve's median time
LATENCY_FITTED = "fitted_intercept"
# a curve's warning that its fitted latency is no measurement (its smallest size already bandwidth-bound): predict
# marks every row from such a curve (cli/predict.latency_undetermined)
LATENCY_UNDETERMINED = "smallest size is bandwidth-bound: latency is poorly determined"
LATENCY_MEDIAN_TIME = "latency_only_median_time"
MAX_HOSTS_SHOWN = 3  # a curve's hosts in one line; the fit report lists them all


@dataclass(frozen=True, kw_only=True)
class CurveKey:
    collective: str
    backend: str
    group_size: int
    layout: str
    num_domains: int
    algorithm: str | None = None  # e.g. MoE "dispatch" / "combine"; None: one fitted algorithm
    stage: str | None = None  # the stage of a composite record this curve comes from
    source: str | None = None  # that record's collective, when it differs
    for_prediction: bool = True  # False: fitted and reported only (unknown stages, staged totals)

    @property
    def label(self) -> str:
        where = "1 domain" if self.num_domains == 1 else f"{self.num_domains} domains"
        name = self.collective + (f"[{self.algorithm}]" if self.algorithm else "")
        origin = f" ({self.source} stage {self.stage})" if self.source else (f" stage {self.stage}" if self.stage else "")
        return f"{name}{origin} {self.backend} n={self.group_size} {self.layout} ({where})"


@dataclass(frozen=True, kw_only=True)
class CurveFit:
    key: CurveKey
    fit: PiecewiseFit
    num_points: int
    min_size_bytes: int
    max_size_bytes: int
    heldout_median_rel_error: float | None
    heldout_num_points: int
    warnings: tuple[str, ...]
    heldout_by_regime: tuple[tuple[str, float], ...] = ()  # (latency / middle / bandwidth, median |error|)
    runs: tuple[str, ...] = ()  # the run ids its points come from
    hosts: tuple[str, ...] = ()  # those runs' hostnames (from their headers; none for runs without one)
    dtypes: tuple[str, ...] = ()  # its points' data types: the nccl-tests alignment their sizes were measured under
    # (run id, the measurement records the fitted files held of that run) per run of `runs`: a run that holds more
    # later was written to after the fit (profile.profile_age)
    run_records: tuple[tuple[str, int], ...] = ()
    # its smallest size's and the judged size's fitted and fastest times (None: no fastest iteration to judge by): the
    # noise bandwidth_undetermined judges its growth against
    growth: TimeGrowth | None = None
    # a curve of a predicted collective whose bandwidth is undetermined: the median over its sizes of each size's
    # median time, the latency its points measure (latency_only.py); None for every other curve
    latency_only_s: float | None = None

    @property
    def tier(self) -> str:
        return "scale_out" if self.key.num_domains > 1 else "scale_up"

    @property
    def hosts_text(self) -> str:
        """Where the curve was measured, in a line: 'node-a', 'node-a, node-b', 'n1, n2, n3 +5 more'."""
        if not self.hosts:
            return "hosts unknown"
        shown = ", ".join(self.hosts[:MAX_HOSTS_SHOWN])
        return shown + (f" +{len(self.hosts) - MAX_HOSTS_SHOWN} more" if len(self.hosts) > MAX_HOSTS_SHOWN else "")

    def to_report(self) -> dict[str, Any]:
        return {
            "curve": self.key.label, "collective": self.key.collective, "algorithm": self.key.algorithm,
            "stage": self.key.stage, "source": self.key.source, "for_prediction": self.key.for_prediction,
            "backend": self.key.backend, "group_size": self.key.group_size, "layout": self.key.layout,
            "num_domains": self.key.num_domains, "tier": self.tier, "num_points": self.num_points,
            "min_size_bytes": self.min_size_bytes, "max_size_bytes": self.max_size_bytes,
            # the latency this curve predicts with, as `fit`'s table prints it: a latency-only curve's median time
            # (latency_only.py), else the fitted intercept; `latency_kind` says which, `fitted_intercept_us` keeps
            # the raw intercept (a latency-only curve's is fitted to noise and predicts nothing)
            "latency_us": (self.fit.latency_s if self.latency_only_s is None else self.latency_only_s) * 1e6,
            "latency_kind": LATENCY_FITTED if self.latency_only_s is None else LATENCY_MEDIAN_TIME,
            "fitted_intercept_us": self.fit.latency_s * 1e6,
            # null where the bandwidth is undetermined (time did not grow with size beyond its noise, or a piece's
            # slope is ~0: bandwidth_undetermined): its warning says so, as `fit`'s table prints "-"; the raw slope
            # (~1e21 GB/s, or 0.2 GB/s fitted to noise) is no number to read
            "busbw_gbps": [bw / 1e9 if bw <= MAX_PLAUSIBLE_BUSBW and (self.growth is None or self.growth.resolved)
                           else None for bw in self.fit.busbw_bytes_per_s],
            "knots_bus_bytes": list(self.fit.knots_bytes),
            "heldout_median_rel_error": self.heldout_median_rel_error,
            "heldout_num_points": self.heldout_num_points, "warnings": list(self.warnings),
            "heldout_by_regime": dict(self.heldout_by_regime), "runs": list(self.runs), "hosts": list(self.hosts),
            "dtypes": list(self.dtypes), "run_records": dict(self.run_records),
        } | ({"latency_only_us": self.latency_only_s * 1e6} if self.latency_only_s is not None else {})


def host_racks(header: RunHeader | None) -> list[list[int]]:
    """The ranks of each host, where the header names one host per rank on several hosts and says nothing else of its
    domains (no topology, not emulated): an imported nccl-tests log written before its import recorded them. As a
    launch with no NVLink fabric information groups its ranks (comm/topology.py): a host is a domain."""
    if header is None or header.topology or header.emulated:
        return []
    hosts = list(header.hostnames or [])
    if header.launcher == "nccl-tests" and 1 < len(hosts) < header.world_size and header.world_size % len(hosts) == 0:
        # an nccl-tests -J file imported before its import expanded them: one entry per process (src/util.cu
        # writeDeviceReport), each process's ranks following one another
        hosts = [h for h in hosts for _ in range(header.world_size // len(hosts))]
    if len(hosts) != header.world_size or len(set(hosts)) < 2:
        return []
    return [[rank for rank, h in enumerate(hosts) if h == host] for host in dict.fromkeys(hosts)]


def header_domains(header: RunHeader | None) -> tuple[dict[str, Any], list[list[int]]]:
    """What a run's header says of its scale-up domains: its topology and emulation merged (the rack-size keys,
    _DOMAIN_KEYS), and its racks (else its hosts': host_racks)."""
    info = {**(header.topology or {}), **(header.emulated or {})} if header is not None else {}
    return info, [r for r in info.get("racks") or () if r] or host_racks(header)


def domain_size_in(info: dict[str, Any]) -> int | None:
    """The rack size a merged topology / emulation / params dict states, by _DOMAIN_KEYS' order."""
    return next((int(info[k]) for k in _DOMAIN_KEYS if info.get(k)), None)


def racks_spanned_by_groups(record: Measurement, racks: list[list[int]]) -> int | None:
    """The most racks any one of the record's groups has ranks in, counted from the groups' actual ranks
    (comm/rank_groups.make_groups: the layout's rank lists) and the run's recorded racks; None when that cannot be
    known (the racks do not partition the record's ranks 0..N-1, or the layout is not one make_groups builds).
    All groups of a size run at once and are timed together, so the group spanning the most racks sets the tier.
    Cyclic placement (racks 0,2 / 1,3) puts a contiguous pair across racks and a strided pair inside one."""
    from commbench.comm.rank_groups import LAYOUTS, make_groups
    world = record.world_size
    rack_of = {rank: k for k, rack in enumerate(racks) for rank in rack}
    if len(racks) < 2 or sorted(rack_of) != list(range(world)) or sum(map(len, racks)) != world:
        return None
    if record.group_layout == "world" or record.group_size >= world:
        groups: tuple[tuple[int, ...], ...] = (tuple(range(world)),)
    elif record.group_layout in LAYOUTS and world % record.group_size == 0:
        groups = make_groups(world, record.group_size, record.group_layout)
    else:
        return None
    return max(len({rack_of[rank] for rank in group}) for group in groups)


def placement_unknown(record: Measurement, header: RunHeader | None) -> bool:
    """True where the run's racks are not consecutive rank ranges (cyclic placement) yet the record's groups could
    not be mapped to them (racks_spanned_by_groups: None), so num_domains_of falls back on block placement: fit
    says so in its notes rather than labelling the tier silently."""
    if "num_domains" in record.params:
        return False
    racks = header_domains(header)[1]
    consecutive = all(list(r) == list(range(r[0], r[0] + len(r))) for r in racks)
    return len(racks) > 1 and not consecutive and racks_spanned_by_groups(record, racks) is None


def num_domains_of(record: Measurement, header: RunHeader | None) -> int:
    """Scale-up domains the record's group spans (1 when nothing says otherwise): the record's num_domains, else the
    racks its groups' actual ranks fall in (racks_spanned_by_groups: the run's recorded racks, else its hosts' host_racks), else
    its run's rack size (topology or emulation; block placement: rack k = ranks k*R .. k*R+R-1), else its racks
    (uneven ones: the world spans them all, a subgroup its size over the largest)."""
    if "num_domains" in record.params:
        return max(int(record.params["num_domains"]), 1)
    info, racks = header_domains(header)
    spanned = racks_spanned_by_groups(record, racks)
    if spanned is not None:
        return spanned
    info.update({k: v for k, v in record.params.items() if k in _DOMAIN_KEYS})
    domain_size = domain_size_in(info)
    if not domain_size and len(racks) > 1:
        if record.group_layout == "world" or record.group_size >= record.world_size:
            return len(racks)
        domain_size = max(len(r) for r in racks)
    if not domain_size or domain_size >= record.world_size:
        return 1
    n = record.group_size
    if record.group_layout == "strided":
        return min(n, math.ceil(record.world_size / domain_size))
    return math.ceil(n / domain_size)


def forced_nccl(record: Measurement, header: RunHeader | None) -> str | None:
    """'algorithm/protocol' a sweep forced with NCCL_ALGO / NCCL_PROTO ('ring/Simple', 'nvls/*', '*/LL'),
    from the record's `nccl` settings (a dict on the record or in its params) or the run's NCCL
    environment; None when neither is forced to a single value."""
    settings: dict[str, Any] = {}
    if header is not None:
        settings.update(header.nccl_settings())  # NCCL's configuration files too
    for source in (record.params.get("nccl"), getattr(record, "nccl", None)):
        if isinstance(source, dict):
            settings.update(source)
    lowered = {str(k).lower(): str(v) for k, v in settings.items() if v is not None}

    def one(keys: tuple[str, ...], names: dict[str, str]) -> str | None:
        value = next((lowered[k] for k in keys if k in lowered), None)
        return names.get(value.strip().lower()) if value and "," not in value and "^" not in value else None

    algorithm = one(("nccl_algo", "algo", "algorithm"), _NCCL_ALGORITHMS)
    protocol = one(("nccl_proto", "proto", "protocol"), _NCCL_PROTOCOLS)
    if algorithm is None and protocol is None:
        return None
    return f"{algorithm or '*'}/{protocol or '*'}"


def _payload_bytes(record: Measurement) -> float:
    busiest = [float(record.metrics[k]) for k in ("bytes_sent_max", "bytes_received_max")
               if isinstance(record.metrics.get(k), (int, float))]
    return max(busiest) if busiest else float(record.size_bytes)


def _round_trip_bytes(record: Measurement) -> float:
    """A MoE record's busiest dispatch + combine bytes: its metrics, or (nccl-tests text, which prints none) what its
    own algbw says it moved in its time (commbench's MoE algbw is the round trip's bytes / the iteration's time)."""
    metrics = record.metrics
    if isinstance(metrics.get("round_trip_bytes_max"), (int, float)):
        return float(metrics["round_trip_bytes_max"])
    if isinstance(metrics.get("combine_bytes_max"), (int, float)):
        return _payload_bytes(record) + float(metrics["combine_bytes_max"])
    time_us = headline_time(record)[1]
    if record.algbw_gbps and time_us:
        return max(record.algbw_gbps * 1e3 * time_us, _payload_bytes(record))
    return _payload_bytes(record)


def _bus_bytes(record: Measurement) -> float | None:
    n = record.group_size
    if record.collective == "moe_all_to_all":  # its time is the round trip: busiest dispatch + combine (bench's algbw)
        return _round_trip_bytes(record) * (n - 1) / n
    if record.collective in COLLECTIVES:
        return float(bus_factor(record.collective, n)) * record.size_bytes
    return float(record.size_bytes) * (n - 1) / n if n > 1 else None  # staged / unknown: RS-like


def collect_points(records: Iterable[Measurement], headers: dict[str, RunHeader],
                   runs_of: dict[CurveKey, set[str]] | None = None, dtypes_of: dict[CurveKey, set[str]] | None = None
                   ) -> tuple[dict[CurveKey, list[CurvePoint]], list[str]]:
    """(curve -> [CurvePoint: bus bytes, seconds, size_bytes, the fastest iteration's seconds or None], reasons points
    were skipped); `runs_of` and `dtypes_of`, when given, get each curve's run ids and its points' data types (the
    alignment their sizes were measured under)."""
    points_of: dict[CurveKey, list[CurvePoint]] = {}
    skipped: dict[str, int] = {}
    runs_of = {} if runs_of is None else runs_of
    dtypes_of = {} if dtypes_of is None else dtypes_of

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    def add(key: CurveKey, point: CurvePoint, record: Measurement) -> None:
        points_of.setdefault(key, []).append(point)
        runs_of.setdefault(key, set()).add(record.run_id)
        dtypes_of.setdefault(key, set()).add(record.dtype)

    unchecked = unplaced = 0
    records = list(records)
    # A curve is one form of the collective: where a run measured a point both in place and out of place (nccl-tests'
    # two column groups, bench --format nccl-tests), the out-of-place time goes (commbench's out-of-place all_reduce,
    # reduce and broadcast add a copy into the output).
    in_place = {_form_key(r) for r in records if r.in_place}
    for record in records:
        if not record.in_place and _form_key(record) in in_place:
            skip("out of place where the same point was also measured in place (a curve is the in-place form: "
                 "commbench's out-of-place all_reduce, reduce and broadcast times include a copy into the output)")
            continue
        time_us = headline_time(record)[1]  # nccl-tests' time for records imported from nccl-tests
        if record.status != "ok" or not time_us or time_us <= 0:
            skip("failed or without a time")
            continue
        if record.num_wrong:  # a collective that skipped the work is fast: it would fit a fabric faster than it is
            skip("wrong data (#wrong > 0)")
            continue
        if record.group_size < 2:
            skip("group of one rank")
            continue
        # nccl-tests < 2.13 prints a max error, not #wrong: within its bound it is checked (num_wrong None beside it)
        unchecked += record.num_wrong is None and record.metrics.get("max_abs_error") is None
        if combo_from_params(record.params).channels is not None:  # forced algorithms are keyed: forced_nccl
            skip("forced NCCL channel count (curves model NCCL's own channel choice)")
            continue
        num_domains = num_domains_of(record, headers.get(record.run_id))
        unplaced += placement_unknown(record, headers.get(record.run_id))
        mapped = stage_points(record, num_domains)
        common = dict(backend=record.backend, layout=record.group_layout)
        for stage, (point, time_s) in mapped.items():
            key = CurveKey(collective=point.collective, algorithm=point.algorithm, group_size=point.group_size,
                           num_domains=point.num_domains, stage=stage, source=record.collective, **common)
            x = float(bus_factor(point.collective, point.group_size)) * point.size_bytes
            add(key, CurvePoint(x, time_s, int(point.size_bytes)), record)
        x = _bus_bytes(record)
        if x is None or x <= 0:
            skip("no bytes moved")
            continue
        staged = bool(record.stages_us_median)
        # A composite workload's time is its whole iteration (moe_all_to_all: count exchange + dispatch + combine),
        # never one collective's: without stage times (nccl-tests text) it is reported, not used to predict one.
        whole = staged or record.collective in STAGE_MAPS
        if record.collective in STAGE_MAPS and not staged and "total" not in mapped:
            skip(f"as predictors, {record.collective} points without stage times (nccl-tests text): their time is "
                 "the whole iteration, fitted only as the report-only 'stage total' curve; fit commbench's JSONL of "
                 "the run to predict its stages")
        if "total" not in mapped:
            forced = forced_nccl(record, headers.get(record.run_id)) if not staged else None
            key = CurveKey(collective=record.collective, group_size=record.group_size, num_domains=num_domains,
                           stage="total" if whole else None, algorithm=forced,
                           for_prediction=record.collective in COLLECTIVES and not mapped and not whole, **common)
            fastest_s = record.time_us_min * 1e-6 if record.time_us_min else None   # of the same iterations
            add(key, CurvePoint(x, time_us * 1e-6, record.size_bytes, fastest_s), record)
        for stage, stage_us in (record.stages_us_median or {}).items():
            if stage not in mapped and stage_us and stage_us > 0:
                key = CurveKey(collective=record.collective, group_size=record.group_size, num_domains=num_domains,
                               stage=stage, for_prediction=False, **common)
                add(key, CurvePoint(x, stage_us * 1e-6, record.size_bytes), record)
    notes = [f"{count} point(s) skipped: {reason}" for reason, count in skipped.items()]
    if unplaced:
        notes.append(f"{unplaced} point(s) of runs whose racks are not consecutive rank ranges could not be placed "
                     "on those racks (their ranks do not match the racks recorded): their tier assumes block "
                     "placement (rack k = ranks k*R..k*R+R-1) and may be wrong")
    if unchecked:  # used (their times are measured), but said: compare fails them, nccl-tuner leaves them out
        notes.append(f"{unchecked} point(s) fitted were measured without the data check (-c 0: #wrong unknown): "
                     "a collective that skipped its work would look fast; measure with -c 1 to be sure")
    return points_of, notes


def _form_key(record: Measurement) -> tuple:
    """A point of a run but for its in-place / out-of-place form."""
    return (record.run_id, record.collective, record.backend, record.size_bytes, record.dtype, record.op,
            record.group_size, record.group_layout, record.num_groups, repr(sorted(record.params.items())))


def _median_by_size(points: list[CurvePoint]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Repeated sizes (several runs) become their median time (their spread is warned: repeat_spread_warning)."""
    by_size: dict[int, list[tuple[float, float]]] = {}
    for x, t, size, *_ in points:
        by_size.setdefault(size, []).append((x, t))
    sizes = np.array(sorted(by_size), dtype=np.float64)
    x = np.array([np.median([p[0] for p in by_size[s]]) for s in sorted(by_size)])
    t = np.array([np.median([p[1] for p in by_size[s]]) for s in sorted(by_size)])
    return x, t, sizes


def repeat_spread_warning(points: list[CurvePoint]) -> str | None:
    """One warning where sizes measured more than once (several runs, -N cycles) disagree by more than
    RUN_SPREAD_WARN (largest time / smallest - 1), naming how many sizes and the worst one; None where they agree."""
    from commbench.units import format_size

    by_size: dict[int, list[float]] = {}
    for _, t, size, *_ in points:
        by_size.setdefault(size, []).append(t)
    repeated = {size: (min(ts), max(ts)) for size, ts in by_size.items() if len(ts) > 1 and min(ts) > 0}
    apart = {size: hi / lo - 1 for size, (lo, hi) in repeated.items() if hi / lo - 1 > RUN_SPREAD_WARN}
    if not apart:
        return None
    worst = max(apart, key=apart.get)
    lo, hi = repeated[worst]
    return (f"repeated measurements disagree: at {len(apart)} of {len(repeated)} sizes measured more than once the "
            f"times differ by more than {RUN_SPREAD_WARN:.0%} (worst {format_size(worst)}: {lo * 1e6:,.1f} to "
            f"{hi * 1e6:,.1f} us, {hi / lo:.2f}x); the curve is fitted to their median per size and its held-out error "
            "does not include this spread: fit the runs apart, or measure again")


def _uncovered_regimes(sizes: np.ndarray) -> list[str]:
    """One warning per size regime (latency / middle / bandwidth) below or above every measured size: the
    profile predicts there from the other regimes' points."""
    from commbench.units import format_size

    measured = f"measured {format_size(int(sizes[0]))}..{format_size(int(sizes[-1]))}"
    out = []
    for name, lo, hi in REGIMES:
        if not np.any((sizes >= lo) & (sizes < hi)) and (hi <= sizes[0] or lo > sizes[-1]):
            bounds = f"< {format_size(int(hi))}" if lo == 0 else (
                f">= {format_size(int(lo))}" if hi == float("inf") else f"{format_size(int(lo))}..{format_size(int(hi))}")
            out.append(f"no size in the {name} regime ({bounds}): {measured}; predictions there are extrapolated")
    return out


def bandwidth_undetermined(fit: PiecewiseFit, growth: TimeGrowth | None) -> bool:
    """True where the measured times do not grow with size, so the points determine no bandwidth: their growth from
    the smallest size to every larger one is within the noise their iterations show (`growth`, time_growth:
    medians that rise by noise fitted 0.2-2 GB/s on gloo at 1 KiB..64 KiB where the next run of the same command
    was refused), or some piece's bus bandwidth is beyond any link's (MAX_PLAUSIBLE_BUSBW: times that fall or stay
    flat; the only test for points without a fastest iteration, growth None). `fit` keeps such a curve from
    prediction, and `bench`/`sweep` say so at their end (costmodel/fit_readiness.py) by this same test."""
    return max(fit.busbw_bytes_per_s) > MAX_PLAUSIBLE_BUSBW or (growth is not None and not growth.resolved)


def fit_curve(key: CurveKey, points: list[CurvePoint] | list[tuple[float, float, int]], *,
              min_heldout_bytes: int = MIN_HELDOUT_BYTES) -> CurveFit | None:
    points = [CurvePoint(*p) for p in points]
    x, t, sizes = _median_by_size(points)
    if len(x) < 2:
        return None
    fit = fit_piecewise(x, t)
    errors = leave_one_out_errors(x, t, num_knots=len(fit.knots_bytes))
    big = (sizes >= min_heldout_bytes) & np.isfinite(errors)
    warnings = []
    if not np.any(big):
        big = np.isfinite(errors)
        if np.any(big):
            warnings.append(f"no sizes >= {min_heldout_bytes} B: held-out error is over all sizes")
    heldout = float(np.median(errors[big])) if np.any(big) else None
    by_regime = tuple((name, float(np.median(errors[in_regime]))) for name, lo, hi in REGIMES
                      if np.any(in_regime := (sizes >= lo) & (sizes < hi) & np.isfinite(errors)))
    if heldout is None:
        warnings.append(f"only {len(x)} sizes: no held-out error (need >= 4)")
    elif heldout > POOR_FIT:
        warnings.append(f"poor fit: median held-out error {heldout:.0%} (> {POOR_FIT:.0%}); "
                        "predictions from this curve are unreliable")
    growth = time_growth(points)
    latency_only_s = None
    if bandwidth_undetermined(fit, growth):
        if key.for_prediction and key.collective in COLLECTIVES:   # its times measure its latency, no bandwidth
            latency_only_s = float(np.median(t))
        key = dataclasses.replace(key, for_prediction=False)
        from commbench.units import format_size
        within = "" if growth is None or growth.resolved else (
            f" beyond its noise (fastest iteration {growth.smallest_fastest_s * 1e6:,.1f} -> "
            f"{growth.judged_fastest_s * 1e6:,.1f} us at {format_size(growth.judged_bytes)}, "
            + ("a rise within" if growth.judged_fastest_s > growth.smallest_fastest_s else "a fall; noise")
            + f" {growth.noise_s * 1e6:,.1f} us"
            + (f" incl. {growth.inversion_s * 1e6:,.1f} us of a smaller size slower than a larger"
               if growth.inversion_s > 0 else "") + ")")
        kept = (f"; kept latency-only ({latency_only_s * 1e6:,.1f} us, the median time): predicts these sizes "
                "alone" if latency_only_s is not None else "; reported, not used to predict")
        warnings.append(f"bandwidth undetermined: time does not grow with size ({format_size(int(sizes[0]))}.."
                        f"{format_size(int(sizes[-1]))}){within}{kept}")
    bandwidth_s = float(x[-1]) / fit.busbw_bytes_per_s[-1]
    if latency_only_s is not None:   # predicted inside its sizes alone, refused beyond: nothing is extrapolated
        pass
    elif bandwidth_s < fit.latency_s:
        warnings.append("largest size is latency-bound: bandwidth is poorly determined (measure larger sizes)")
    if float(x[0]) / fit.busbw_bytes_per_s[0] > fit.latency_s:
        warnings.append(f"{LATENCY_UNDETERMINED} (measure smaller sizes)")
    warnings += _uncovered_regimes(sizes) if latency_only_s is None else []
    if (spread := repeat_spread_warning(points)) is not None:
        warnings.append(spread)
    return CurveFit(key=key, fit=fit, num_points=len(x), min_size_bytes=int(sizes[0]),
                    max_size_bytes=int(sizes[-1]), heldout_median_rel_error=heldout,
                    heldout_num_points=int(np.sum(big)), warnings=tuple(warnings), heldout_by_regime=by_regime,
                    growth=growth, latency_only_s=latency_only_s)


def fit_all(records: Iterable[Measurement], headers: dict[str, RunHeader], *,
            min_heldout_bytes: int = MIN_HELDOUT_BYTES) -> tuple[list[CurveFit], list[str]]:
    runs_of: dict[CurveKey, set[str]] = {}
    dtypes_of: dict[CurveKey, set[str]] = {}
    points, notes = collect_points(records, headers, runs_of, dtypes_of)

    def provenance(key: CurveKey) -> dict:
        runs = tuple(sorted(runs_of.get(key, ())))
        return {"runs": runs, "dtypes": tuple(sorted(dtypes_of.get(key, ()))),
                "hosts": tuple(sorted({h for r in runs if r in headers for h in headers[r].hostnames}))}

    fits = [dataclasses.replace(fit, **provenance(key)) for key, pts in sorted(points.items(), key=lambda kv: kv[0].label)
            if (fit := fit_curve(key, pts, min_heldout_bytes=min_heldout_bytes)) is not None]
    dropped = len(points) - len(fits)
    if dropped:
        notes.append(f"{dropped} curve(s) with a single size were not fitted")
    return fits, notes
