"""Sweep files (TOML): what one launch measures.

    [sweep]                      # optional: about the whole launch
    name = "ci-small"
    backend = "auto"             # auto | nccl | gloo (one launch = one backend)
    nproc = 4                    # local ranks when not started by torchrun/srun/mpirun
    world_size = 4               # the world the file is written for (--dry-run plans for it, unless --nproc or nproc)
    nccl_algo = ["ring", "tree"] # optional NCCL tuning axes (also nccl_proto, nccl_channels): every
                                 # combination, NCCL's default first, in fresh processes (NCCL only)

    [defaults]                   # any entry key; entries override. A collective's parameter (hidden, algorithm)
                                 # goes to the entries whose collective takes it; one no entry takes is refused
    iters = 10
    timeout_s = 60               # per point: a collective left waiting this long for another rank (a hang)
                                 # fails that point; a slow collective that keeps moving data does not

    [[run]]
    collective = "all_reduce"
    sizes = { min = "8", max = "16M", factor = 4 }   # or { min, max, step = "1M" }, or ["1K", "64K"]
    dtypes = ["float32", "bfloat16"]

    [[run]]                      # TP all-reduce on every pair and quad of ranks, as `bench --group-sizes`
    collective = "all_reduce"
    sizes = ["64K", "1M"]
    group_sizes = [2, 4]         # or "pow2" (2, 4, 8 .. N) or "2,4"
    group_layout = "contiguous"  # or "strided", or ["contiguous", "strided"]

Entry keys: collective, name, sizes, dtypes (or dtype; moe_all_to_all takes dispatch_dtype/combine_dtype instead), op, in_place, out_of_place, root (broadcast and reduce only), iters, warmup_iters,
check, timeout_s (in_place and out_of_place as bench's --in-place / --out-of-place: all_reduce, broadcast and reduce
are in-place unless out_of_place = true, or in_place = false; reduce_scatter and all_gather out-of-place unless
in_place = true); racks and sub-groups with `commbench bench`'s option names and meanings:
ranks_per_rack, topology (preset nvl72 | hgx8), racks, nodes_per_rack, rack_nodes, group_sizes,
group_layout. One launch has one rack topology: entries that describe racks must agree (put it in
[defaults]); the rest use it too. Any other key is a parameter the collective declares in
`param_names` (MoE routing, grad_reduce_scatter's algorithm, ...); others are refused. Every error
names the entry index, the field, the value and what is allowed (a value an entry takes from [defaults] is named
there: `[defaults], for run[0] (all_reduce): iters=0`); a misspelt key (itres, sizs) is named,
with the closest known key, before anything it leaves missing.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commbench.errors import CommbenchError, read_user_file, toml_problem
from commbench.limits import MAX_ITERS, MAX_WORLD_SIZE
from commbench.units import timeout_problem
from commbench.measure.subgroups import SubgroupSpec, rack_specs
from commbench.comm.topology import TopologySpec
from commbench.comm.nccl_tuning import TuningCombo, parse_axes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENTRY_KEYS = ("collective", "name", "sizes", "dtypes", "dtype", "op", "in_place", "out_of_place", "root", "iters",
              "warmup_iters", "check", "timeout_s")
RACK_KEYS = ("ranks_per_rack", "topology", "racks", "nodes_per_rack", "rack_nodes")  # TopologySpec, as bench
GROUP_KEYS = ("group_sizes", "group_layout")  # SubgroupSpec, as bench
TUNING_KEYS = ("nccl_algo", "nccl_proto", "nccl_channels")  # NCCL tuning axes: one launch per combination
SWEEP_KEYS = ("name", "description", "backend", "nproc", "world_size", *TUNING_KEYS)
TOP_KEYS = ("sweep", "defaults", "run")
SIZE_TABLE_KEYS = ("min", "max", "factor", "step")
STANDARD_KEYS = (*ENTRY_KEYS, *RACK_KEYS, *GROUP_KEYS)  # every other entry key is a parameter of its collective
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True, kw_only=True)
class SweepEntry:
    """One [[run]] entry after defaults are applied and values checked (sizes in bytes, sorted as given)."""

    index: int
    collective: str
    name: str
    sizes_bytes: tuple[int, ...]
    dtypes: tuple[str, ...]
    op: str = "sum"
    in_place: bool = False
    out_of_place: bool = False  # all_reduce, broadcast, reduce: their out-of-place form (bench --out-of-place)
    root: int = 0
    iters: int = 20
    warmup_iters: int = 5
    check: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    params: dict[str, Any] = field(default_factory=dict)
    topology: TopologySpec | None = None  # None: the entry does not describe racks
    subgroups: SubgroupSpec | None = None  # None: the whole world

    def __post_init__(self) -> None:
        assert self.dtypes, "validated by parse_entry"


@dataclass(frozen=True, kw_only=True)
class Sweep:
    path: str
    name: str
    description: str
    backend: str
    nproc: int | None
    world_size: int | None
    entries: tuple[SweepEntry, ...]
    topology: TopologySpec | None = None  # the launch's racks (None: from host names / commbench emulate)
    tuning: tuple[TuningCombo, ...] = ()  # NCCL tuning combinations ([sweep] nccl_algo/...), default first; () = none

    def __post_init__(self) -> None:
        if not self.entries:
            raise CommbenchError(f"sweep {self.path}: no [[run]] entries: add at least one")


class EntryError(CommbenchError):
    pass


def _where(path: str, index: int | None, collective: str | None = None) -> str:
    if index is None:
        return f"sweep {path}"
    return f"sweep {path}: run[{index}]" + (f" ({collective})" if collective else "")


def _origin(path: str, index: int, collective: str, raw: dict[str, Any], defaults: dict[str, Any]):
    """where(key): where the entry's value of `key` was written, for its error: the entry, or [defaults] when the
    entry took it from there (an `iters = 0` in [defaults] was reported as the first entry's). A check of several
    keys names [defaults] when every one of them given came from there."""
    entry = _where(path, index, collective)

    def where(*keys: str) -> str:
        given = [k for k in keys if k in raw or k in defaults]
        if given and not any(k in raw for k in given):
            return f"sweep {path}: [defaults], for run[{index}] ({collective})"
        return entry

    return where


def toml_spelling(value: Any) -> str:
    """`value` as a sweep file writes it (true, [false, true], { a = 1 }), not Python's repr (True, [False, True]):
    bools, lists and tables in TOML; strings and numbers as repr spells them ('8K', 2.5)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_spelling(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_spelling(v)}" for k, v in value.items()) + " }" if value else "{}"
    return repr(value)


def _bad(where: str, key: str, value: Any, allowed: str) -> EntryError:
    return EntryError(f"{where}: {key}={toml_spelling(value)} is invalid: {allowed}")


def _one_value(value: Any, allowed: str) -> str:
    """`allowed` for a key that takes one value, saying so where the file gave a list or a table."""
    if isinstance(value, (list, tuple)):
        return f"{allowed} (one value: a list is not accepted here)"
    if isinstance(value, dict):
        return f"{allowed} (one value: a table is not accepted here)"
    return allowed


def _closest(key: str, known: tuple[str, ...]) -> str:
    """' (did you mean iters?)' for a typo of a known key (itres), or for a key that is one known key cut short at a
    '_' (tokens, bench's --tokens, for tokens_per_rank: too short beside it for difflib's 0.6 ratio), else ''."""
    import difflib

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        cut_short = [k for k in known if key and (k.startswith(f"{key}_") or k.endswith(f"_{key}"))]
        close = cut_short if len(cut_short) == 1 else []
    return f" (did you mean {close[0]}?)" if close else ""


def _unknown(where: str, key: str, value: Any, known: tuple[str, ...], allowed: str, what: str = "key") -> EntryError:
    """An unknown key (a typo such as itres), refused by name with the closest known key when one is close."""
    return _bad(where, key, value, f"unknown {what}{_closest(key, known)}; {allowed}")


def _int(where: str, key: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(where, key, value, _one_value(value, f"an integer >= {minimum}"))
    if maximum is not None and value > maximum:
        raise _bad(where, key, value, f"an integer from {minimum} to {maximum:,}")
    return value


def _bool(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(where, key, value, _one_value(value, "true or false"))
    return value


def _size(where: str, key: str, value: Any) -> int:
    from commbench.units import SIZE_FORMS, parse_size_bytes

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _bad(where, key, value, SIZE_FORMS)
    try:
        return parse_size_bytes(value, key)
    except CommbenchError as exc:  # why this value is refused (bits, an ambiguous MB, a fraction of a byte)
        raise _bad(where, key, value, getattr(exc, "allowed", SIZE_FORMS)) from None


def parse_sizes(where: str, value: Any) -> tuple[int, ...]:
    """A list of sizes, or a {min, max, factor | step} range (nccl-tests' -b/-e/-f/-i)."""
    from commbench.units import size_range

    if isinstance(value, list):
        if not value:
            raise _bad(where, "sizes", value, "at least one size")
        sizes = tuple(_size(where, f"sizes[{i}]", v) for i, v in enumerate(value))
        for i, size in enumerate(sizes):
            if size in sizes[:i]:
                raise _bad(where, f"sizes[{i}]", value[i], f"the same size as sizes[{sizes.index(size)}] "
                                                           f"({value[sizes.index(size)]!r}): list each size once")
        return sizes
    if not isinstance(value, dict):
        raise _bad(where, "sizes", value, "a list such as [\"1K\", \"1M\"] or a table {min = \"8\", max = \"16M\", factor = 2}")
    unknown = sorted(set(value) - set(SIZE_TABLE_KEYS))
    if unknown:
        raise _unknown(where, f"sizes.{unknown[0]}", value[unknown[0]], tuple(f"sizes.{k}" for k in SIZE_TABLE_KEYS),
                       f"allowed keys: {', '.join(SIZE_TABLE_KEYS)}")
    for key in ("min", "max"):
        if key not in value:
            raise _bad(where, f"sizes.{key}", None, "a range needs both min and max")
    low, high = _size(where, "sizes.min", value["min"]), _size(where, "sizes.max", value["max"])
    if low > high:
        raise _bad(where, "sizes.min", value["min"], f"must be <= sizes.max ({value['max']!r})")
    if "factor" in value and "step" in value:
        raise _bad(where, "sizes.step", value["step"], "give factor or step, not both")
    factor = value.get("factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor < float("inf")):
        raise _bad(where, "sizes.factor", factor, "a number > 1")
    step = _size(where, "sizes.step", value["step"]) if "step" in value else None
    return tuple(size_range(low, high, factor, step, names=(f"{where}: sizes.step", f"{where}: sizes.factor")))


def _dtypes(where: str, raw: dict[str, Any]) -> tuple[str, ...]:
    """The entry's dtypes; one given twice, or an alias of one given before it ('fp32' after 'float32'), is refused
    as a size given twice is: it would be measured once."""
    from commbench.dtypes import get_dtype

    if "dtype" in raw and "dtypes" in raw:
        raise _bad(where, "dtype", raw["dtype"], "give dtype or dtypes, not both")
    value = raw.get("dtypes", raw.get("dtype", "float32"))
    names = [value] if isinstance(value, str) else value
    key = "dtypes" if "dtypes" in raw else "dtype"
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise _bad(where, key, value, "a dtype name or a non-empty list of them")
    out = []
    for i, name in enumerate(names):
        try:
            resolved = get_dtype(name).name
        except CommbenchError as exc:
            raise _bad(where, key, name, str(exc).split("is invalid: ", 1)[-1]) from None
        if resolved in out:
            first = out.index(resolved)
            raise _bad(where, f"{key}[{i}]", name, f"the same dtype as {key}[{first}] ({names[first]!r}, {resolved}): "
                       "each dtype is measured once")
        out.append(resolved)
    return tuple(out)


def check_params(where: str, collective, params: dict[str, Any]) -> dict[str, Any]:
    """Extra entry keys must be parameters the collective declares (`param_names`); their values
    are checked when the sweep is planned (`plan_specs`) or measured."""
    unknown = sorted(set(params) - set(collective.param_names))
    if unknown:
        allowed = (*ENTRY_KEYS, *RACK_KEYS, *GROUP_KEYS, *collective.param_names)
        raise _unknown(where, unknown[0], params[unknown[0]], allowed, f"allowed keys: {', '.join(allowed)}")
    return dict(params)


OPTION_KEYS = {"timeout": "timeout_s", "rack-ranks": "racks", "tokens": "tokens_per_rank",
               "experts": "num_experts"}  # `commbench bench` options spelt otherwise in a sweep


def sweep_words(message: str, keys: tuple[str, ...] = (*ENTRY_KEYS, *RACK_KEYS, *GROUP_KEYS)) -> str:
    """A bench option's error (`--group-sizes=8`, `--root=7`) in the words of a sweep file (`group_sizes=8`,
    `root=7`): every option that is an entry key in `keys`; the others (`--nproc`) stay options."""
    def key(match: re.Match) -> str:
        name = OPTION_KEYS.get(match.group(1), match.group(1).replace("-", "_"))
        return name if name in keys else match.group(0)

    return re.sub(r"--([a-z][a-z-]*)", key, message)


def _option_error(where: str, exc: CommbenchError) -> EntryError:
    """A bench option's error (`--group-sizes=...`) under the sweep key that set it (`group_sizes=...`)."""
    return EntryError(f"{where}: " + sweep_words(str(exc)))


def rack_options(where: str, merged: dict[str, Any]) -> tuple[TopologySpec | None, SubgroupSpec | None]:
    """The entry's racks and sub-groups, built as `commbench bench` builds them from its options."""
    options = {k: merged[k] for k in (*RACK_KEYS, *GROUP_KEYS) if k in merged}
    for key in ("ranks_per_rack", "nodes_per_rack"):
        if key in options:
            _int(where, key, options[key], 1)
    for key in ("topology", "racks", "rack_nodes"):
        if key in options and not isinstance(options[key], str):
            raise _bad(where, key, options[key], "a string")
    try:
        topology, subgroups = rack_specs(preset=options.pop("topology", None), **options)
    except CommbenchError as exc:
        raise _option_error(where, exc) from None
    return (topology if any(k in merged for k in RACK_KEYS) else None), subgroups


def _racks(spec: TopologySpec) -> str:
    keys = {"preset": "topology"}
    return ", ".join(f"{keys.get(k, k)}={getattr(spec, k)!r}" for k in spec.__dataclass_fields__
                     if getattr(spec, k) is not None) or "none"


def launch_topology(path: str, entries: tuple[SweepEntry, ...]) -> TopologySpec | None:
    """The one rack topology of the launch: what the entries that describe racks agree on."""
    given = [e for e in entries if e.topology is not None]
    for entry in given[1:]:
        if entry.topology != given[0].topology:
            raise EntryError(f"{_where(path, entry.index, entry.collective)}: racks ({_racks(entry.topology)}) differ "
                             f"from run[{given[0].index}]'s ({_racks(given[0].topology)}): one launch has one rack topology "
                             f"(set ranks_per_rack / topology / racks once, in [defaults])")
    return given[0].topology if given else None


def parse_entry(path: str, index: int, raw: Any, defaults: dict[str, Any]) -> SweepEntry:
    from collectives import REGISTRY

    where = _where(path, index)
    if not isinstance(raw, dict):
        raise EntryError(f"{where}: must be a table ([[run]]), got {type(raw).__name__}")
    merged = {**defaults, **raw}
    if "dtype" in raw and "dtypes" in defaults:
        merged.pop("dtypes")
    if "dtypes" in raw and "dtype" in defaults:
        merged.pop("dtype")
    name = merged.get("collective")
    if name is None:
        typo = next((k for k in raw if k not in STANDARD_KEYS and _closest(k, ("collective",))), None)
        if typo is not None:  # colective = "all_reduce": name the typo, not a missing key
            raise _unknown(where, typo, raw[typo], STANDARD_KEYS, f"allowed keys: {', '.join(STANDARD_KEYS)}")
        raise _bad(where, "collective", None, f"required; allowed: {', '.join(REGISTRY)}")
    if name not in REGISTRY:
        hint = _closest(name, tuple(REGISTRY)) if isinstance(name, str) else ""
        raise _bad(where, "collective", name, f"unknown collective{hint}; allowed: {', '.join(REGISTRY)}")
    collective = REGISTRY[name]
    where = _where(path, index, name)
    origin = _origin(path, index, name, raw, defaults)
    # an unknown key (sizs, itres) is named before what it leaves missing (sizes required) is reported
    check_params(where, collective, {k: v for k, v in raw.items() if k not in STANDARD_KEYS})
    if not collective.takes_size:  # swept by its own parameters (e.g. MoE tokens_per_rank)
        if "sizes" in raw:
            raise _bad(where, "sizes", raw["sizes"], f"{name} is swept by its own parameters, not by sizes: remove it")
        for key in ("dtype", "dtypes"):  # as bench -d; a [defaults] dtype goes to the entries that take one
            if key in raw:
                from commbench.moe.accounting import COMBINE_DTYPES, DISPATCH_DTYPES

                raise _bad(where, key, raw[key], f"{name} takes no {key}: its rows travel in dispatch_dtype ("
                                                 f"{' or '.join(DISPATCH_DTYPES)}) and combine_dtype ("
                                                 f"{' or '.join(COMBINE_DTYPES)}): remove {key}")
        sizes: tuple[int, ...] = ()
    elif "sizes" not in merged:
        raise _bad(where, "sizes", None, "required: a list or a {min, max, factor} table")
    else:
        sizes = parse_sizes(origin("sizes"), merged["sizes"])
    try:   # as bench's -o / -r (Collective.refuse_unused); a [defaults] op or root skips the entries without one
        collective.refuse_unused(op=raw.get("op"), root=raw.get("root"))
    except CommbenchError as exc:
        raise _option_error(where, exc) from None
    op = merged.get("op", "sum")
    if collective.reduces:
        from commbench.comm.backend import REDUCE_OPS

        if not isinstance(op, str) or op.lower() not in REDUCE_OPS:  # either case, as bench's -o and dtype
            raise _bad(origin("op"), "op", op, f"allowed: {', '.join(REDUCE_OPS)} (either case)")
        op = op.lower()
    timeout = merged.get("timeout_s", DEFAULT_TIMEOUT_S)
    if timeout_problem(timeout):
        raise _bad(origin("timeout_s"), "timeout_s", timeout, timeout_problem(timeout))
    label = merged.get("name", f"{index}:{name}")
    if not isinstance(label, str) or not label:
        raise _bad(where, "name", label, "a non-empty string")
    # a [defaults] parameter goes to the entries whose collective declares it (as [defaults] op skips the
    # collectives that do not reduce); one no entry takes is refused in parse_sweep, naming [defaults]
    params = {k: v for k, v in defaults.items() if k not in STANDARD_KEYS and k in collective.param_names}
    params.update({k: v for k, v in raw.items() if k not in STANDARD_KEYS})
    topology, subgroups = rack_options(origin(*RACK_KEYS, *GROUP_KEYS), merged)
    in_place, out_of_place = placement_forms(origin, collective, merged)
    return SweepEntry(
        index=index, collective=name, name=label, sizes_bytes=sizes,
        dtypes=_dtypes(origin("dtypes" if "dtypes" in merged else "dtype"), merged), op=op,
        in_place=in_place, out_of_place=out_of_place,
        root=_int(origin("root"), "root", merged.get("root", 0), 0) if collective.takes_root else 0,
        iters=_int(origin("iters"), "iters", merged.get("iters", 20), 1, MAX_ITERS),
        warmup_iters=_int(origin("warmup_iters"), "warmup_iters", merged.get("warmup_iters", 5), 0, MAX_ITERS),
        check=_bool(origin("check"), "check", merged.get("check", True)), timeout_s=float(timeout),
        params=check_params(where, collective, params), topology=topology, subgroups=subgroups,
    )


def placement_forms(origin, collective, merged: dict[str, Any]) -> tuple[bool, bool]:
    """(in_place, out_of_place) as bench's --in-place / --out-of-place take them: a form the collective does not
    have is refused, as is asking for both (one entry measures one form; --format nccl-tests' both forms are
    bench's). `in_place = false` on a collective in-place by default (all_reduce, broadcast, reduce) asks for its
    other form, out-of-place (it was taken as bench's absent --in-place and measured in place); beside
    `out_of_place = false` it asks for neither form and is refused. `origin(*keys)`: where those keys were written."""
    in_place = _bool(origin("in_place"), "in_place", merged.get("in_place", False))
    out_of_place = _bool(origin("out_of_place"), "out_of_place", merged.get("out_of_place", False))
    mode = collective.in_place_mode
    if in_place and mode == "never":
        raise _bad(origin("in_place"), "in_place", True, f"{collective.name} has no in-place form: remove in_place")
    if out_of_place and mode != "both":
        raise _bad(origin("out_of_place"), "out_of_place", True, f"{collective.name} is out-of-place unless in_place = "
                   "true (out_of_place is for all_reduce, broadcast and reduce, in-place by default): remove out_of_place")
    if in_place and out_of_place:
        raise _bad(origin("in_place", "out_of_place"), "out_of_place", True,
                   "in_place = true and out_of_place = true exclude each other: give one")
    if mode == "both" and "in_place" in merged and not in_place:
        if "out_of_place" in merged and not out_of_place:
            raise _bad(origin("in_place", "out_of_place"), "in_place", False,
                       f"in_place = false and out_of_place = false ask for neither of {collective.name}'s forms: give "
                       "out_of_place = true for its out-of-place form, or neither key for in-place")
        out_of_place = True
    return in_place, out_of_place


def measured_placement(collective_name: str, in_place: bool, out_of_place: bool) -> tuple[bool, bool]:
    """(in_place, out_of_place) as the entry measures them (placement_forms' flags as typed -> the form measured,
    Collective.is_in_place): all_reduce, broadcast and reduce with neither flag, or in_place = true, are in-place
    (True, False); out_of_place = true (False, True); the others' in_place as given, out_of_place False. A sweep's
    identity records this (resume.identity_entries), so `in_place = true` on all_reduce, its default, is the same
    sweep as the key left out (probe P3: refused on --resume as 'all_reduce in_place false -> true')."""
    from collectives import get_collective

    mode = get_collective(collective_name).in_place_mode
    if mode == "both":
        measured_in_place = bool(in_place) or not out_of_place
        return measured_in_place, not measured_in_place
    return bool(in_place) and mode != "never", False


def stray_defaults(where: str, defaults: dict[str, Any], runs: list[Any]) -> None:
    """Refuse a [defaults] key that is neither an entry key nor a parameter of any entry's collective (a typo
    such as itres, or hidden in a file with no MoE entry), naming [defaults] rather than an entry. Checked
    before the entries, so a typo (sizs) is named rather than what it leaves missing (sizes)."""
    from collectives import REGISTRY

    names = [r.get("collective") for r in runs if isinstance(r, dict)]
    taken = list(dict.fromkeys(k for n in names if isinstance(n, str) and n in REGISTRY
                               for k in REGISTRY[n].param_names))
    stray = [k for k in defaults if k not in STANDARD_KEYS and k not in taken]
    if stray:
        takers = f"; parameters of this file's collectives: {', '.join(taken)}" if taken else ""
        raise _bad(f"{where}: [defaults]", stray[0], defaults[stray[0]],
                   f"no [[run]] entry takes it{_closest(stray[0], (*STANDARD_KEYS, *taken))}; "
                   f"allowed keys: {', '.join(STANDARD_KEYS)}{takers}")
    unsized = [n for n in names if isinstance(n, str) and n in REGISTRY and not REGISTRY[n].takes_size]
    dtype_key = next((k for k in ("dtypes", "dtype") if k in defaults), None)
    if dtype_key and names and len(unsized) == len(names):  # every entry swept by its own parameters (MoE)
        raise _bad(f"{where}: [defaults]", dtype_key, defaults[dtype_key],
                   f"no [[run]] entry takes it: {', '.join(dict.fromkeys(map(str, names)))} entries take no dtype "
                   f"(MoE rows travel in dispatch_dtype and combine_dtype): remove {dtype_key}")


def parse_sweep(data: dict[str, Any], path: str = "<sweep>") -> Sweep:
    """Check a parsed TOML document and build the Sweep (nothing launches here)."""
    where = _where(path, None)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise _unknown(where, unknown[0], data[unknown[0]], TOP_KEYS, "allowed: [sweep], [defaults], [[run]]",
                       what="top-level key")
    head = data.get("sweep", {})
    defaults = data.get("defaults", {})
    runs = data.get("run", [])
    if not isinstance(head, dict):
        raise _bad(where, "sweep", head, "a table [sweep]")
    if not isinstance(defaults, dict):
        raise _bad(where, "defaults", defaults, "a table [defaults]")
    if not isinstance(runs, list):
        raise _bad(where, "run", runs, "a list of tables [[run]]")
    bad = sorted(set(head) - set(SWEEP_KEYS))
    if bad:
        raise _unknown(f"{where}: [sweep]", bad[0], head[bad[0]], SWEEP_KEYS, f"allowed: {', '.join(SWEEP_KEYS)}")
    bad = sorted(set(defaults) & {"collective", "name"})
    if bad:
        raise _bad(f"{where}: [defaults]", bad[0], defaults[bad[0]], "set per [[run]] entry, not in [defaults]")
    backend = head.get("backend", "auto")
    if backend not in ("auto", "nccl", "gloo"):
        raise _bad(f"{where}: [sweep]", "backend", backend, "allowed: auto, nccl, gloo")
    nproc = _int(f"{where}: [sweep]", "nproc", head["nproc"], 1, MAX_WORLD_SIZE) if "nproc" in head else None
    world = _int(f"{where}: [sweep]", "world_size", head["world_size"], 1, MAX_WORLD_SIZE) if "world_size" in head else None
    stray_defaults(where, defaults, runs)
    entries = tuple(parse_entry(path, i, raw, defaults) for i, raw in enumerate(runs))
    tuning = parse_axes(*(head.get(k) for k in TUNING_KEYS), names=tuple(f"{where}: [sweep] {k}" for k in TUNING_KEYS))
    return Sweep(path=path, name=str(head.get("name", Path(path).stem)), description=str(head.get("description", "")),
                 backend=backend, nproc=nproc, world_size=world, entries=entries,
                 topology=launch_topology(path, entries), tuning=tuple(tuning))


def load_sweep(path: str) -> Sweep:
    """Read and check a sweep file (or a shipped one by name); a TOML syntax error names the line."""
    from commbench.sweep.shipped import sweep_path

    path = sweep_path(path)
    text = read_user_file(path, "sweep file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CommbenchError(f"sweep {path}: not valid TOML: {toml_problem(text, exc)}") from None
    return parse_sweep(data, path)
