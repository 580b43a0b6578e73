"""The parameters of one MoE all-to-all point, validated, and the sweep a bench job expands to.

Precedence: built-in defaults < `--preset` < explicit options. The keys are those recorded in
Measurement.params (the cost model fits time against them). `capacity_factor` / `pad_to_capacity` are
Megatron-Core's --moe-expert-capacity-factor / --moe-pad-expert-input-to-capacity (commbench.moe.capacity);
None / False = dropless, as no preset changes. `expert_tp` > 1: the exchange of Megatron-Core's flex dispatcher with
expert tensor parallelism (ETP), which runs one all-to-all over the ETP x EP group and sends each token to every ETP
rank of each EP rank it routes to (megatron-core 0.16.1 token_dispatcher.py MoEFlexTokenDispatcher
_initialize_metadata): the ranks are ETP x EP, the ETP ranks of one EP rank consecutive (innermost), as
Megatron-Core places them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from commbench.errors import CommbenchError, invalid
from commbench.moe.accounting import COMBINE_DTYPES, DISPATCH_DTYPES, DISPATCH_MODES
from commbench.moe.capacity import expert_capacity
from commbench.moe.presets import preset_params
from commbench.moe.routing import check_routing, check_trace_ranks, load_trace, parse_routing

DEFAULT_TOKENS_PER_RANK = (128, 512, 2048)
DEFAULTS: dict[str, Any] = {"hidden": 4096, "num_experts": 64, "top_k": 8, "routing": "uniform",
                            "dispatch_mode": "per-expert", "dispatch_dtype": "bf16", "combine_dtype": "bf16",
                            "seed": 0, "preset": None, "capacity_factor": None, "pad_to_capacity": False,
                            "expert_tp": 1}
MAX_TOKENS_PER_RANK = 1 << 24  # the payload encodes token indices in three base-256 digits
MIN_HIDDEN = 16  # the payload's 8 header channels plus filler channels
MAX_EXPERTS = 1 << 24  # expert ids and per-rank slot masks travel as three base-256 digits


@dataclass(frozen=True, kw_only=True)
class MoeParams:
    tokens_per_rank: int
    hidden: int
    top_k: int
    num_experts: int
    routing: str
    dispatch_mode: str
    dispatch_dtype: str
    combine_dtype: str
    seed: int
    preset: str | None = None
    capacity_factor: float | None = None  # None: dropless
    pad_to_capacity: bool = False
    expert_tp: int = 1   # ETP copies of each (token, EP rank): the flex dispatcher with ETP > 1 (module docstring)

    def __post_init__(self) -> None:
        for field in ("tokens_per_rank", "hidden", "top_k", "num_experts", "seed"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise invalid(field, value, "allowed: an integer")
        for field in ("routing", "dispatch_mode", "dispatch_dtype", "combine_dtype"):
            if not isinstance(getattr(self, field), str):
                raise invalid(field, getattr(self, field), "allowed: a string")
        if not 1 <= self.tokens_per_rank <= MAX_TOKENS_PER_RANK:
            raise invalid("--tokens", self.tokens_per_rank, f"allowed: 1..{MAX_TOKENS_PER_RANK} tokens per rank")
        if self.hidden < MIN_HIDDEN:
            raise invalid("--hidden", self.hidden, f"allowed: >= {MIN_HIDDEN} channels")
        if not 1 <= self.num_experts <= MAX_EXPERTS:
            raise invalid("--experts", self.num_experts, f"allowed: 1..{MAX_EXPERTS}")
        if not 1 <= self.top_k <= self.num_experts:
            raise invalid("--top-k", self.top_k, f"allowed: 1..--experts ({self.num_experts})")
        for field, value, allowed in (("--dispatch-mode", self.dispatch_mode, DISPATCH_MODES),
                                      ("--dispatch-dtype", self.dispatch_dtype, DISPATCH_DTYPES),
                                      ("--combine-dtype", self.combine_dtype, COMBINE_DTYPES)):
            if value not in allowed:
                raise invalid(field, value, f"allowed: {', '.join(allowed)}")
        if self.dispatch_mode == "per-rank" and self.top_k > 24:
            raise invalid("--top-k", self.top_k, "allowed: <= 24 with --dispatch-mode per-rank")
        if self.seed < 0:
            raise invalid("--seed", self.seed, "allowed: >= 0")
        check_routing(parse_routing(self.routing), num_experts=self.num_experts, top_k=self.top_k)
        self._check_capacity()
        self._check_expert_tp()

    def _check_expert_tp(self) -> None:
        """ETP copies are the flex dispatcher's (per-rank dispatch, no padding); every copy is a slot of the token's
        per-rank mask, so top-k x ETP <= 24."""
        etp = self.expert_tp
        if isinstance(etp, bool) or not isinstance(etp, int) or etp < 1:
            raise invalid("expert_tp", etp, "allowed: an integer >= 1")
        if etp == 1:
            return
        if self.dispatch_mode != "per-rank":
            raise invalid("expert_tp", etp, "allowed > 1 only with --dispatch-mode per-rank (Megatron-Core's flex "
                                            "dispatcher; the alltoall one gathers over ETP after its EP all-to-all)")
        if self.pad_to_capacity:
            raise invalid("expert_tp", etp, "allowed > 1 only without --pad-to-capacity (the flex dispatcher)")
        if self.top_k * etp > 24:
            raise invalid("expert_tp", etp, f"allowed: top-k x expert_tp <= 24 ({self.top_k} x {etp} copies per "
                                            "token is more than a row's slot mask holds)")

    def _check_capacity(self) -> None:
        """megatron-core 0.16.1 transformer_config.py: padding needs a capacity factor, and the flex dispatcher's
        DeepEP backend (per-rank dispatch here) refuses padding; a capacity factor alone works with both."""
        factor = self.capacity_factor
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                                   or not math.isfinite(factor) or factor <= 0):
            raise invalid("--capacity-factor", factor, "allowed: a number > 0 (expert capacity = ceil(tokens per "
                                                       "rank x top-k / experts x C)); omit it for dropless")
        if not isinstance(self.pad_to_capacity, bool):
            raise invalid("--pad-to-capacity", self.pad_to_capacity, "allowed: true or false")
        if not self.pad_to_capacity:
            return
        if factor is None:
            raise invalid("--pad-to-capacity", True, "allowed only with --capacity-factor (Megatron-Core refuses "
                                                     "moe_pad_expert_input_to_capacity without a capacity factor)")
        if self.dispatch_mode == "per-rank":
            raise invalid("--pad-to-capacity", True, "allowed only with --dispatch-mode per-expert (Megatron-Core's "
                                                     "DeepEP dispatcher does not support padding to capacity)")
        capacity = self.capacity()
        if capacity > self.tokens_per_rank:
            raise invalid("--capacity-factor", factor, f"allowed with --pad-to-capacity: capacity <= tokens per rank "
                          f"(ceil({self.tokens_per_rank} x {self.top_k} / {self.num_experts} x {factor:g}) = {capacity} "
                          f"> --tokens {self.tokens_per_rank}; Megatron-Core pads no expert past its rank's tokens), "
                          f"i.e. C <= experts / top-k = {self.num_experts / self.top_k:g}")

    def capacity(self) -> int | None:
        """Tokens each expert takes from each rank (None: dropless)."""
        if self.capacity_factor is None:
            return None
        return expert_capacity(tokens_per_rank=self.tokens_per_rank, num_experts=self.num_experts, top_k=self.top_k,
                               capacity_factor=self.capacity_factor)

    def check_ep_size(self, ep_size: int) -> None:
        """`ep_size`: the ranks of the exchange (ETP x EP with expert_tp > 1)."""
        if ep_size % self.expert_tp:
            raise CommbenchError(f"expert_tp={self.expert_tp} is invalid on {ep_size} ranks: the ranks must be a "
                                 f"multiple of the expert-tensor-parallel size ({self.expert_tp})")
        ep = ep_size // self.expert_tp
        if self.num_experts % ep:
            raise CommbenchError(f"--experts={self.num_experts} is invalid on {ep_size} ranks: the number of "
                                 f"experts must be divisible by the expert-parallel size ({ep})")

    def as_params(self) -> dict[str, Any]:
        """Measurement.params; a dropless point leaves out capacity_factor / pad_to_capacity, so its records
        match (compare, --resume) those measured before the capacity existed."""
        params = dataclasses.asdict(self)
        if self.routing.startswith("trace:"):
            params["seed"] = None   # a trace's replay draws nothing from the seed (routing.route): no seed measured
        if self.expert_tp == 1:
            del params["expert_tp"]   # records measured before it existed match
        if self.capacity_factor is None:
            del params["capacity_factor"], params["pad_to_capacity"]  # pad_to_capacity needs a capacity factor
        return params


def non_default(params: dict[str, Any]) -> dict[str, Any]:
    """The MoE layer parameters of a record's `params` that are not at their default, in DEFAULTS order: what changes
    the layer measured, so a label must name it (commbench report's curves) beside what it states by value. The
    default is DEFAULTS' value, under a named preset the preset's (its shape goes with its name). Values compare as
    text (a report's series key holds str(value)); a key the params lack is at its default (a dropless point has no
    capacity_factor, an ETP-1 point no expert_tp: MoeParams.as_params); `preset` itself is not listed."""
    defaults = dict(DEFAULTS)
    try:
        defaults.update(preset_params(params["preset"]) if params.get("preset") not in (None, "None", "") else {})
    except CommbenchError:   # a preset this commbench does not know (a newer file, an import): DEFAULTS'
        pass
    return {key: params[key] for key in DEFAULTS
            if key != "preset" and key in params and str(params[key]) != str(defaults[key])
            and not (key == "seed" and params[key] is None)}   # a trace's replay has no seed (as_params)


def sweep_params(options: dict[str, Any], ep_size: int) -> list[MoeParams]:
    """One MoeParams per tokens-per-rank value; `options` holds `tokens_per_rank` (a list) and any
    explicitly given keys of DEFAULTS (None = not given); any other key is refused (a typo in a sweep file)."""
    merged = dict(DEFAULTS)
    if options.get("preset") is not None:   # only a key left out takes the default: a given "" or false is refused
        merged.update(preset_params(options["preset"]))
    unknown = sorted(set(options) - set(DEFAULTS) - {"tokens_per_rank"})
    if unknown:
        raise invalid(unknown[0], options[unknown[0]], f"not a moe_all_to_all parameter; allowed: tokens_per_rank, "
                                                       f"{', '.join(DEFAULTS)}")
    merged.update({k: v for k, v in options.items() if v is not None and k in DEFAULTS})
    tokens = options.get("tokens_per_rank")
    if tokens is None:   # left out: the default sweep; a given 0, [], false or "" is refused, never the default
        tokens = DEFAULT_TOKENS_PER_RANK
    tokens = [tokens] if isinstance(tokens, int) and not isinstance(tokens, bool) else tokens
    if not isinstance(tokens, (list, tuple)) or not tokens:
        raise invalid("tokens_per_rank", tokens, f"an integer from 1 to {MAX_TOKENS_PER_RANK} or a non-empty list "
                                                 "of them")
    _check_top_k_fits_experts(options, merged)
    points = [MoeParams(tokens_per_rank=t, **merged) for t in tokens]   # each value checked (a bool is no count)
    # a value listed twice is one point, measured once (commbench.repeats; the run's notes name the repeat)
    points = list({p.tokens_per_rank: p for p in points}.values())
    points[0].check_ep_size(ep_size)
    spec = parse_routing(points[0].routing)
    if spec.kind == "trace":
        trace = load_trace(spec.trace_path, num_experts=points[0].num_experts, top_k=points[0].top_k, per_rank=True)
        try:
            check_trace_ranks(trace, spec.trace_path, ep_size)
        except ValueError as exc:
            raise CommbenchError(str(exc)) from None
    return points


def _check_top_k_fits_experts(options: dict[str, Any], merged: dict[str, Any]) -> None:
    """Where top-k > experts and one of the two was not given (a default or the preset's), say so, naming both:
    MoeParams alone would blame --top-k=8 on a user who typed only `--experts 3`."""
    top_k, experts = merged["top_k"], merged["num_experts"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (top_k, experts)) or not 1 <= experts < top_k:
        return   # MoeParams refuses what is not a count, or fits
    preset = options.get("preset")
    origin = f"preset {preset}'s" if preset is not None else "default"
    if options.get("top_k") is None:
        raise CommbenchError(f"--experts={experts} is fewer than the {origin} --top-k={top_k} (experts per token): "
                             f"give --top-k from 1 to {experts}, or --experts >= {top_k}")
    if options.get("num_experts") is None:
        raise CommbenchError(f"--top-k={top_k} is more than the {origin} --experts={experts}: give --top-k from 1 to "
                             f"{experts}, or --experts >= {top_k}")


def parse_tokens(text: str) -> list[int]:
    """`--tokens 128,1024,4096` -> [128, 1024, 4096]. An empty entry ('16,,8', '16,') is refused, not dropped: a
    value lost in typing would shrink the sweep unsaid. A value given twice is kept here and measured once
    (sweep_params), named in the run's notes (commbench.repeats), as --algorithm and --group-sizes repeats are."""
    from commbench.repeats import comma_entries
    parts = comma_entries("--tokens", text.replace(" ", ""), "128,1024,4096 (tokens per rank)")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if not values:
        raise invalid("--tokens", text, "allowed: a comma-separated list of tokens per rank, e.g. 128,1024,4096")
    for value in values:
        if value < 1:
            raise invalid("--tokens", value, "allowed: >= 1 token per rank")
    return values


def cli_params(collective: str, *, tokens: str | None, **options: Any) -> dict[str, Any]:
    """BenchConfig.params from `commbench bench` MoE options (None = not given); refuses them for
    other collectives so a typo'd collective does not silently ignore them."""
    given = {k: v for k, v in options.items() if v is not None and v is not False}  # a flag left off: not given
    if collective != "moe_all_to_all":
        if tokens is not None or given:
            names = (["tokens"] if tokens is not None else []) + list(given)
            flags = ", ".join("--experts" if n == "num_experts" else "--" + n.replace("_", "-") for n in names)
            raise CommbenchError(f"{flags}: MoE option(s) apply to moe_all_to_all only, not {collective}")
        return {}
    unknown = set(given) - set(DEFAULTS)
    assert not unknown, unknown
    return {"tokens_per_rank": parse_tokens(tokens) if tokens is not None else None, **given}
