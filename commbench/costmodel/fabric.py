"""A fabric profile: two tiers (scale-up domain, scale-out network) and alpha-beta curves on each.

Presets also carry `nccl` (nccl_model.NcclSystem): NCCL's own algorithm x protocol structure,
which predicts the NCCL collectives (all-reduce, reduce-scatter, all-gather, broadcast) until
measured curves replace them. One `AlgorithmCurve` is one (collective, tier, algorithm) line of the classic latency-bandwidth
("alpha-beta", Hockney 1994) model in nccl-tests' bus-bandwidth form:

    time_s = latency_us * 1e-6 + latency_per_step_us * 1e-6 * steps(algorithm, n)
             + bus_factor(collective, n) * size_bytes / (busbw_gbps * 1e9)

as NCCL's own tuner models each (algorithm, protocol) pair (src/graph/tuning.cc: a base latency, a
per-hop latency and a bandwidth, choosing the fastest). Presets give curves valid for any group
size (`group_size=None`); fitted curves remember the group size they were measured at, and the
prediction scales them to other sizes by the step count of their algorithm.

The profile is saved as versioned JSON (`Fabric.to_json` / `Fabric.from_json`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commbench.costmodel.latency_only import LatencyOnlyCurve
from commbench.costmodel.nccl_model import NcclSystem
from commbench.errors import CommbenchError, invalid, read_user_file
from commbench.typed_json import check_fields
from commbench.data.reference import GpuSpec, gpu_spec

PROFILE_FORMAT = "commbench-fabric"
PROFILE_VERSION = 1
TIERS = ("scale_up", "scale_out")


# how the warning of a profile fitted on `commbench emulate` runs starts (profile.fit_result_files)
EMULATED_FIT = "emulated fabric: fitted on `commbench emulate`"

@dataclass(frozen=True, kw_only=True)
class Tier:
    """One level of the network: its name, per-GPU link bandwidth (GB/s, one direction)."""

    name: str
    link_gbps_per_gpu: float
    description: str = ""

    def __post_init__(self) -> None:
        if not self.link_gbps_per_gpu > 0:
            raise invalid("link_gbps_per_gpu", self.link_gbps_per_gpu, "a positive GB/s figure")


@dataclass(frozen=True, kw_only=True)
class _FabricFile:
    """The top-level fields of a fabric profile file and their JSON types (checked before building)."""

    name: str
    gpu: str | None = None
    domain_size: int
    num_gpus: int
    source: str = ""
    tiers: dict
    curves: list
    notes: list = ()
    warnings: list = ()
    fit_report: list = ()
    source_files: list = ()
    latency_only: list = ()


_UNSET_OMITTED = ("latency_per_intra_step_us", "intra_busbw_gbps")


@dataclass(frozen=True, kw_only=True)
class AlgorithmCurve:
    """Latency and effective bus bandwidth of one collective algorithm on one tier."""

    collective: str
    tier: str
    algorithm: str
    latency_us: float
    latency_per_step_us: float
    busbw_gbps: float
    group_size: int | None = None  # None: valid at any size; else the group size it was fitted at
    min_bus_bytes: float = 0.0  # fitted size segments: applies from these bus bytes up
    source: str = ""
    # scale-out curves of a fitted cross-domain group: the per-step latency of the group's steps inside domains
    # (profile.split_latency); None: the scale-up curve's latency_per_step_us (presets, older profiles)
    latency_per_intra_step_us: float | None = None
    # scale-out curves of a fitted cross-domain group: the in-domain bus bandwidth its measurement demonstrates
    # (profile.scale_out_curves); the scale-up curve's rate bounds such a group only below it. None: no such floor
    intra_busbw_gbps: float | None = None

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise invalid("tier", self.tier, f"one of {', '.join(TIERS)}")
        if self.latency_per_intra_step_us is not None and not self.latency_per_intra_step_us >= 0:
            raise invalid("latency_per_intra_step_us", self.latency_per_intra_step_us, "a latency >= 0 us, or null")
        if self.intra_busbw_gbps is not None and not self.intra_busbw_gbps > 0:
            raise invalid("intra_busbw_gbps", self.intra_busbw_gbps, "a positive GB/s figure, or null")
        if self.latency_per_step_us < 0 or (self.latency_us < 0 and self.min_bus_bytes <= 0):
            raise invalid("latency_us", (self.latency_us, self.latency_per_step_us),
                          "latencies must be >= 0 (only a later size segment may have a negative offset)")
        if not self.busbw_gbps > 0:
            raise invalid("busbw_gbps", self.busbw_gbps, "a positive GB/s figure")
        if self.group_size is not None and self.group_size < 2:
            raise invalid("group_size", self.group_size, "fitted curves need a group of >= 2 ranks")

    def to_dict(self) -> dict[str, Any]:
        """The curve's fields, less the fitted cross-domain ones where unset (a preset's curves, and so the digest
        of a preset `verify-plan` checks, are as before they existed)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k not in _UNSET_OMITTED}


@dataclass(frozen=True, kw_only=True)
class Fabric:
    """A system's network as the cost model sees it: tiers, domain size, scale, and curves."""

    name: str
    gpu: GpuSpec | None
    domain_size: int
    num_gpus: int
    tiers: dict[str, Tier]
    curves: tuple[AlgorithmCurve, ...]
    source: str = "preset"
    notes: tuple[str, ...] = ()
    fit_report: tuple[dict[str, Any], ...] = ()  # per-curve fit quality, when fitted
    warnings: tuple[str, ...] = field(default=())
    # where the results files of a fitted profile are, so the check that they hold nothing newer than the fit
    # (profile.profile_age) finds them from any directory: per file {"path": as given to fit, "absolute": that
    # path from fit's directory, "from_profile": from the profile's directory (profile.located, when it is written),
    # "runs": {run id: {"records", "sha256"}} of what the fit read there (profile.run_digests: deleted or edited records)}
    source_files: tuple[dict[str, Any], ...] = ()
    # NCCL's algorithm x protocol structure (nccl_model.py); None: the alpha-beta curves alone
    nccl: NcclSystem | None = None
    # measured curves whose time did not grow with size: their latency, no bandwidth (latency_only.py); predicted
    # only inside the sizes and group size they were measured at (formulas._algorithm_times)
    latency_only: tuple[LatencyOnlyCurve, ...] = ()

    def __post_init__(self) -> None:
        if self.domain_size < 1:
            raise invalid("domain_size", self.domain_size, "GPUs per scale-up domain must be >= 1")
        if self.num_gpus < 1:
            raise invalid("num_gpus", self.num_gpus, "must be >= 1")
        missing = [tier for tier in {c.tier for c in self.curves} if tier not in self.tiers]
        if missing:
            raise invalid("tiers", sorted(self.tiers), f"curves use tiers {missing} not described")

    @property
    def num_domains(self) -> int:
        """Scale-up domains (racks or nodes) in the system; the last may be partly filled."""
        return -(-self.num_gpus // self.domain_size)

    @functools.cached_property
    def collectives(self) -> tuple[str, ...]:
        return tuple(sorted({curve.collective for curve in self.curves}))

    def curves_for(self, collective: str, tier: str) -> tuple[AlgorithmCurve, ...]:
        return self._curve_index.get((collective, tier), ())

    @functools.cached_property
    def _curve_index(self) -> dict[tuple[str, str], tuple[AlgorithmCurve, ...]]:
        index: dict[tuple[str, str], list[AlgorithmCurve]] = {}
        for curve in self.curves:
            index.setdefault((curve.collective, curve.tier), []).append(curve)
        return {key: tuple(value) for key, value in index.items()}

    @property
    def emulated_warning(self) -> str | None:
        """The fit's warning that its curves are `commbench emulate`'s links, not a real network's
        (profile.fit_result_files writes it first), or None: what predict, plan and report say of such a profile."""
        return next((w for w in self.warnings if w.startswith(EMULATED_FIT)), None)

    def backends(self) -> dict[str, set[str]]:
        """Per collective, the backends its curves describe: NCCL for a preset's curves, the measured backends
        for a fitted profile's (its fit report's curves used for prediction)."""
        fitted: dict[str, set[str]] = {}
        for r in self.fit_report:
            if r.get("for_prediction") or r.get("latency_only_us") is not None:
                fitted.setdefault(str(r.get("collective")), set()).add(str(r.get("backend")))
        out: dict[str, set[str]] = {}
        for curve in self.curves:
            measured = curve.source.startswith("fitted")
            out.setdefault(curve.collective, set()).update(fitted.get(curve.collective, set()) if measured else {"nccl"})
        for held in self.latency_only:   # measured too: a gloo latency is no prediction of an NCCL run
            out.setdefault(held.collective, set()).update(fitted.get(held.collective, set()))
        return out

    def scaled(self, *, num_gpus: int) -> "Fabric":
        """The same fabric with a different number of GPUs (racks/nodes are added or removed)."""
        return dataclasses.replace(self, num_gpus=num_gpus)

    def with_curves(self, curves: list[AlgorithmCurve], **changes: Any) -> "Fabric":
        """This fabric with `curves` replacing those of the same (collective, tier)."""
        replaced = {(c.collective, c.tier) for c in curves}
        kept = [c for c in self.curves if (c.collective, c.tier) not in replaced]
        return dataclasses.replace(self, curves=tuple(kept + list(curves)), **changes)

    def checked_domain(self) -> "Fabric":
        """This profile, if its domain_size agrees with the hardware it names; else CommbenchError naming both fields.

        domain_size is the GPUs one NVLink (scale-up) domain joins; a job on fewer GPUs than a domain is num_gpus
        (`--gpus`), not a smaller domain (placement.gpus_per_rack puts them in one domain). Refused:
        - a gpu whose NVLink reaches fewer GPUs (hardware.toml scale_up_domain: 8 on HGX H100/B200, 72 on GB300):
          an H100 profile with a 72-GPU domain would plan TP/EP groups across 72 GPUs at NVLink rates;
        - a name that is a preset's (as `fit --system PRESET` names its profile, PRESET or PRESET+fitted) with
          another domain than the preset's: a gb300-nvl72 profile with domain 8 plans 8-GPU racks under the name
          of a 72-GPU one.
        Kept: a domain smaller than the GPU's largest under another name (an NVLink partition of a rack, 4-GPU
        boards), and a profile with no GPU (fitted without --system, e.g. on CPU ranks: its domain is measured)."""
        from commbench.costmodel.presets import PRESETS

        if self.gpu is not None and self.domain_size > self.gpu.scale_up_domain:
            raise CommbenchError(f"fabric profile: field 'domain_size' = {self.domain_size} contradicts field 'gpu' = "
                                 f"{self.gpu.name!r}: one {self.gpu.name.upper()} NVLink domain joins at most "
                                 f"{self.gpu.scale_up_domain} GPUs (commbench/data/hardware.toml scale_up_domain); "
                                 f"allowed: 1 to {self.gpu.scale_up_domain}")
        preset = self.name.split("+", 1)[0].lower()
        if preset in PRESETS:
            size = gpu_spec(PRESETS[preset].gpu).scale_up_domain
            if self.domain_size != size:
                raise CommbenchError(f"fabric profile: field 'domain_size' = {self.domain_size} contradicts field "
                                     f"'name' = {self.name!r}: preset {preset} has {size} GPUs per NVLink domain; "
                                     f"allowed: {size} (a job on fewer GPUs is --gpus, not a smaller domain; a "
                                     "partitioned rack: name the profile after the partition, not the preset)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "version": PROFILE_VERSION,
            "name": self.name,
            "gpu": self.gpu.name if self.gpu is not None else None,
            "domain_size": self.domain_size,
            "num_gpus": self.num_gpus,
            "source": self.source,
            "tiers": {key: dataclasses.asdict(tier) for key, tier in self.tiers.items()},
            "curves": [curve.to_dict() for curve in self.curves],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "fit_report": list(self.fit_report),
            "nccl": dataclasses.asdict(self.nccl) if self.nccl is not None else None,
        } | ({"source_files": [dict(f) for f in self.source_files]} if self.source_files else {}) \
          | ({"latency_only": [dataclasses.asdict(c) for c in self.latency_only]} if self.latency_only else {})

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Fabric":
        if data.get("format") != PROFILE_FORMAT:
            raise invalid("format", data.get("format"), f"a fabric profile has format {PROFILE_FORMAT!r}")
        version = data.get("version")
        if version != PROFILE_VERSION:
            raise invalid("version", version, f"this commbench reads fabric profile version {PROFILE_VERSION}")
        try:
            check_fields(_FabricFile, data)
            return cls(
                name=str(data["name"]),
                gpu=gpu_spec(data["gpu"]) if data.get("gpu") else None,
                domain_size=int(data["domain_size"]),
                num_gpus=int(data["num_gpus"]),
                source=str(data.get("source", "")),
                tiers={key: Tier(**check_fields(Tier, value, f"tiers.{key}")) for key, value in data["tiers"].items()},
                curves=tuple(AlgorithmCurve(**check_fields(AlgorithmCurve, curve, f"curves[{i}]"))
                             for i, curve in enumerate(data["curves"])),
                notes=tuple(data.get("notes", ())),
                warnings=tuple(data.get("warnings", ())),
                fit_report=tuple(data.get("fit_report", ())),
                source_files=tuple({k: v for k, v in f.items()
                                    if isinstance(v, str) or (k == "runs" and isinstance(v, dict))}
                                   for f in data.get("source_files", ()) if isinstance(f, dict)),
                nccl=NcclSystem(**data["nccl"]) if data.get("nccl") else None,
                latency_only=tuple(LatencyOnlyCurve(**check_fields(LatencyOnlyCurve, c, f"latency_only[{i}]"))
                                   for i, c in enumerate(data.get("latency_only") or ())),
            ).checked_domain()
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CommbenchError):
                raise
            raise CommbenchError(f"fabric profile is malformed: {exc}") from None

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> "Fabric":
        """Load a profile from a path, or from JSON text (anything starting with '{')."""
        text = str(path_or_text)
        if not text.lstrip().startswith("{"):
            text = read_user_file(path_or_text, "fabric profile")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:  # a results file (JSONL) given for the profile fitted from it
            named = "" if text is str(path_or_text) else f" {str(path_or_text)!r}"
            raise CommbenchError(f"fabric profile{named} is not valid JSON ({exc}): a profile is one JSON object, "
                                 "as `commbench fit -O FILE` writes it") from None
        if not isinstance(data, dict):
            raise invalid("fabric profile", type(data).__name__, "a JSON object")
        try:
            return cls.from_dict(data)
        except CommbenchError as exc:
            if text is str(path_or_text):
                raise
            raise CommbenchError(f"{path_or_text}: {exc}") from None
