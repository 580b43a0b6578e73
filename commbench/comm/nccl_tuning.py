"""NCCL tuning axes: algorithm, protocol and channel count forced through NCCL's environment.

NCCL reads NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS when a communicator is
created (and caches some of it per process), so every combination is measured on fresh
communicators in fresh processes (commbench.sweep.combos). Names here are those of NCCL's example
tuner plugin (NVIDIA/nccl plugins/tuner/example/plugin.c: parseAlgorithm, parseProtocol), which is
also what `commbench nccl-tuner` writes; the environment spellings are NCCL's
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-algo, #nccl-proto).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

from commbench.errors import CommbenchError

# plugin name -> NCCL_ALGO / NCCL_PROTO value
ALGORITHMS = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollnetDirect", "collnet_chain": "CollnetChain",
              "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT"}
PROTOCOLS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
TUNED_ENV_KEYS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
DEFAULT = "default"  # no override on that axis: NCCL's own choice
PARAM_KEYS = ("nccl_algo", "nccl_proto", "nccl_channels")  # where records carry the settings (params)
NCCL_MAX_CHANNELS = 64  # NVIDIA/nccl src/include/device.h: #define MAXCHANNELS 64

# The algorithms NCCL has for each collective (commbench's names), and with which protocols: NVIDIA/nccl
# src/graph/tuning.cc ncclTopoTuneModel gives no other (collective, algorithm) a bandwidth (v2.23.4-1:170-173 to
# v2.30.7-1:294-298: broadcast and reduce ring only; reduce-scatter and all-gather ring, NVLS, CollNet direct and
# PAT; all-reduce all but PAT), and NVLS, NVLS tree, CollNet and PAT Simple only (`continue` for other protocols, or
# "busBw = 0; // Not used"). Older releases had fewer (v2.18.6-1: ring only for all-gather and reduce-scatter). A
# pair outside the table never runs as named: NCCL 2.18-2.23 run ring in its place (v2.18.6-1 tuning.cc:296 "Never
# disable ring for non-allreduce operations"; v2.19-v2.23 "at least set ring algo available", v2.23.4-1:352), and
# from 2.24 the call fails ("no algorithm/protocol available", src/enqueue.cc).
NCCL_ALGORITHMS_FOR = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain"),
    "reduce_scatter": ("ring", "nvls", "collnet_direct", "pat"),
    "all_gather": ("ring", "nvls", "collnet_direct", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
}
SIMPLE_ONLY_ALGORITHMS = frozenset({"nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat"})


def nccl_has(collective: str, algo: str | None, proto: str | None) -> bool:
    """Whether NCCL has the pair for `collective` at all (NCCL_ALGORITHMS_FOR); an axis left to NCCL (None) is
    NCCL's own choice. Collectives NCCL does not tune (all_to_all, ...) have none."""
    if algo is None:
        return True
    return algo in NCCL_ALGORITHMS_FOR.get(collective, ()) and not (
        proto not in (None, "simple") and algo in SIMPLE_ONLY_ALGORITHMS)


def never_left_out(collective: str, algo: str | None, proto: str | None) -> bool:
    """Whether NCCL keeps the pair in every call's cost table under its defaults (no NCCL_ALGO / NCCL_PROTO
    excluding it): ring with LL or Simple for every collective, and tree with LL or Simple for all-reduce. Every
    other pair it may mark NCCL_ALGO_PROTO_IGNORE: LL128 wherever NCCL's defaults turn it off for the communicator
    (src/graph/tuning.cc ncclTopoTuneModel, `pEnable == 2 && p == NCCL_PROTO_LL128`: GPUs not all linked by NVLink,
    typeIntra > PATH_NVB; a NIC beyond PXB, or PXN from sm90; mixed compute capabilities, from 2.30 below sm90 only;
    below sm70; up to 2.26 on any GPU but sm70/80/90 -- v2.24.3-1:420-431 --, sm100/120 added in 2.25), tree outside
    all-reduce (never given a bandwidth), and per call NVLS, NVLS tree, CollNet and PAT (src/enqueue.cc
    updateCollCostTable)."""
    return proto in ("ll", "simple") and (algo == "ring" or (algo == "tree" and collective == "all_reduce"))


@dataclass(frozen=True, kw_only=True)
class TuningCombo:
    """One combination of overrides; None on an axis leaves NCCL's own choice."""

    algo: str | None = None
    proto: str | None = None
    channels: int | None = None

    def __post_init__(self) -> None:
        if self.algo is not None and self.algo not in ALGORITHMS:
            raise ValueError(f"algo={self.algo!r} is invalid: allowed {', '.join(ALGORITHMS)}")
        if self.proto is not None and self.proto not in PROTOCOLS:
            raise ValueError(f"proto={self.proto!r} is invalid: allowed {', '.join(PROTOCOLS)}")
        if self.channels is not None and (isinstance(self.channels, bool) or self.channels < 1):
            raise ValueError(f"channels={self.channels!r} is invalid: an integer >= 1")

    @property
    def is_default(self) -> bool:
        return self.algo is None and self.proto is None and self.channels is None

    def env(self) -> dict[str, str]:
        """The NCCL_* variables this combination sets (the other tuned keys are removed)."""
        env = {}
        if self.algo is not None:
            env["NCCL_ALGO"] = ALGORITHMS[self.algo]
        if self.proto is not None:
            env["NCCL_PROTO"] = PROTOCOLS[self.proto]
        if self.channels is not None:
            env["NCCL_MIN_NCHANNELS"] = env["NCCL_MAX_NCHANNELS"] = str(self.channels)
        return env

    def params(self) -> dict[str, str | int]:
        """How a record names the settings in force ("default" where NCCL chose)."""
        return {"nccl_algo": self.algo or DEFAULT, "nccl_proto": self.proto or DEFAULT,
                "nccl_channels": DEFAULT if self.channels is None else self.channels}

    @property
    def label(self) -> str:
        if self.is_default:
            return "NCCL default"
        return "/".join(str(v) if v is not None else "*" for v in (self.algo, self.proto, self.channels))


# A tuning launch's plan, set in each combination's processes (commbench.sweep.combos.combo_environ) as JSON
# {"plan": id, "combinations": [labels, NCCL's default first]}: every header a combination writes carries it with its
# own label (RunHeader.nccl_tuning), so a file cut short before some combinations started says which it lacks
# (results.resumed.sweeps_cut_short); a combination never started writes nothing else.
TUNING_ENV = "COMMBENCH_NCCL_TUNING"
COMBO_ENV = "COMMBENCH_NCCL_COMBO"  # the combination's label, set in its processes


def tuning_from_env(env) -> dict | None:
    """A header's `nccl_tuning` in a tuning combination's processes: {"plan", "combinations", "combination"} (this
    one's label), and "inherited" where the launch started with tuning variables exported (inherited_tuning_env);
    None outside a tuning launch."""
    import json

    try:
        plan = json.loads(env.get(TUNING_ENV) or "null")
    except ValueError:
        return None
    if not isinstance(plan, dict) or not env.get(COMBO_ENV):
        return None
    tuning = {"plan": plan.get("plan"), "combinations": list(plan.get("combinations") or []),
              "combination": env[COMBO_ENV]}
    inherited = plan.get("inherited")
    if isinstance(inherited, dict) and inherited:
        tuning["inherited"] = {str(key): str(value) for key, value in inherited.items()}
    return tuning


def inherited_tuning_env(environ) -> dict[str, str]:
    """The tuning axes' variables exported where a tuning launch starts (NCCL_PROTO=^LL128, NVIDIA's workaround for
    LL128 faults, say): every combination's processes run without them (sweep.combos.combo_environ), NCCL's default
    included, so each header records them (nccl_tuning.inherited) and the launch and nccl-tuner say so."""
    return {key: environ[key] for key in TUNED_ENV_KEYS if key in environ}


def inherited_note(inherited: dict[str, str]) -> str:
    """One line on what inherited_tuning_env found, for the launch and for nccl-tuner."""
    settings = ", ".join(f"{key}={value}" for key, value in inherited.items())
    return (f"{settings} was exported where the tuning launch started, and every combination ran without it (each sets "
            "its own NCCL_ALGO/NCCL_PROTO/NCCL_*_NCHANNELS or leaves them to NCCL): NCCL's default was measured "
            "without it, so a job that exports it runs another default, and NCCL leaves out of its calls the pairs "
            "it excludes (headers: nccl_tuning.inherited)")


def combo_from_params(params: dict) -> TuningCombo:
    """The combination a record was measured under (records without the keys: NCCL's default)."""
    def get(key):
        value = params.get(key, DEFAULT)
        return None if value == DEFAULT else value

    return TuningCombo(algo=get("nccl_algo"), proto=get("nccl_proto"), channels=get("nccl_channels"))


def _items(option: str, value: str | list | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        items = value
    else:
        from commbench.repeats import comma_entries
        items = comma_entries(option, str(value), "ring,tree or default,ll")
    out = [str(v).strip() for v in items if str(v).strip()]   # as typed: a refusal echoes it; compared lower-case
    if not out:
        raise CommbenchError(f"{option}={value!r} is invalid: give a comma list")
    return out


def parse_axes(algos: str | list | None, protos: str | list | None, channels: str | list | None, *,
               names: tuple[str, str, str] = ("--nccl-algo", "--nccl-proto", "--nccl-channels")) -> list[TuningCombo]:
    """Every combination of the given axes, NCCL's default first; [] when no axis is given.

    `default` in a list keeps NCCL's choice on that axis (e.g. `--nccl-proto default,ll`)."""
    algo_items, proto_items, channel_items = (_items(n, v) for n, v in zip(names, (algos, protos, channels)))
    if not (algo_items or proto_items or channel_items):
        return []

    def check(option: str, items: list[str], allowed: Iterable[str]) -> list[str | None]:
        allowed = list(allowed)
        for item in items:
            if item.lower() != DEFAULT and item.lower() not in allowed:
                raise CommbenchError(f"{option}={item!r} is invalid: allowed {', '.join(allowed)} or {DEFAULT}")
        return [None if i == DEFAULT else i for i in dict.fromkeys(i.lower() for i in items)] or [None]

    def counts(option: str, items: list[str]) -> list[int | None]:
        out: list[int | None] = []
        for item in items:
            if item.lower() == DEFAULT:
                out.append(None)
            elif not item.isdecimal() or not 1 <= int(item) <= NCCL_MAX_CHANNELS:
                raise CommbenchError(f"{option}={item!r} is invalid: allowed channel counts from 1 to {NCCL_MAX_CHANNELS} "
                                     f"(NCCL's MAXCHANNELS) or {DEFAULT}")
            else:
                out.append(int(item))
        return list(dict.fromkeys(out)) or [None]

    grid = itertools.product(check(names[0], algo_items, ALGORITHMS), check(names[1], proto_items, PROTOCOLS),
                             counts(names[2], channel_items))
    combos = [TuningCombo(algo=a, proto=p, channels=c) for a, p, c in grid]
    baseline = TuningCombo()
    return [baseline, *(c for c in combos if c != baseline)]


def refuse_on_backend(backend: str, combos: list[TuningCombo]) -> None:
    """The axes only mean something to NCCL; say so in one line elsewhere."""
    if combos and backend not in ("nccl", "cupy-nccl"):
        raise CommbenchError(f"the NCCL tuning axes (--nccl-algo/--nccl-proto/--nccl-channels, [sweep] nccl_*) need an "
                             f"NCCL backend, got --backend={backend}: "
                             f"{backend} has no algorithms or protocols to tune")
