"""Which emitted Megatron-LM flags a table release's own parse_args refuses.

The arguments are Megatron-LM core_v0.16.1's (emit/megatron.megatron_target); a release's container runs its own
Megatron-LM (commbench/data/recipes.json megatron_core), whose arguments.py adds, drops and changes options.
commbench/data/megatron-release-flags.json (tools/megatron_release_flags.py, from each release's tree) records per
release the core_v0.16.1 options it lacks and those whose nargs / choices differ. One rule, from the flags: an emitted
option the release lacks, or whose values its spec does not take, is refused there (argparse: "unrecognized
arguments" / "invalid choice"), and the plan names each one (release_core_note). Where the release takes the same
setting under its own spelling (RELEASE_SPELLINGS: 25.09's --moe-enable-deepep for --moe-flex-dispatcher-backend
deepep, --external-cuda-graph for --cuda-graph-impl transformer_engine), the plan writes that (release_args); a
feature whose flags it takes in no spelling (25.09: per-layer graph scopes of several modules, the full-iteration
graph; 25.09 and 25.11: --cpu-offloading-num-layers) the search does not pick for it (release_spelled_features) when
it plans a launch commbench emits, and a --layout pin of one is refused in one line (release_pin_flags_refusal: plan,
tune), not written into a line the plan calls launchable; a published run's search (SearchRequest.target "published":
vendor_layouts' rows) keeps them, as Megatron-Bridge's Python configs ran them at those releases without these flags.

What a release's Megatron-LM cannot build is refused before the search (check_model_in_release, as a precision its
megatron-core has no flags for is: recipes.check_precision_in_release), for plan, tune and verify-plan: a hybrid
model whose --hybrid-override-pattern holds a layer symbol the release's hybrid allocator does not take (the data's
hybrid_symbols, read from each tree's Symbols class). MoE layers in hybrid models ('E') came with Megatron-LM
9a1c0d05c9 ("Add MoE layer type to hybrid models (#2259)"), first in core_v0.16.0: 25.09 (core_v0.14.0) and 25.11
(0d8e0714, megatron-core 0.16.0rc0) know M, * and - only (mamba_hybrid_layer_allocation.py:18-21, raising "'E' is
not one of ..." at :71-72), and their validate_args asserts "Model Spec must be None when using MoEs" (core_v0.14.0
arguments.py:940-941, 0d8e0714 arguments.py:1052-1053), so no flag edit makes Nemotron-3-Nano launch there.
"""

from __future__ import annotations

from commbench.data.reference import megatron_release_flags_json

TARGET_CORE = "0.16.1"   # the megatron-core the arguments are checked against (megatron_target)


def argv_values(args: list[str]) -> list[tuple[str, list[str]]]:
    """A Megatron argv as [(option, the values after it)] ([] for a store_true option)."""
    out: list[tuple[str, list[str]]] = []
    for token in args:
        if token.startswith("--"):
            out.append((token, []))
        elif out:
            out[-1][1].append(token)
    return out


def _why(spec: list, values: list[str]) -> str | None:
    """Why argparse refuses `values` after an option of spec [nargs, choices, takes_value], or None."""
    nargs, choices, _ = spec
    count = {None: (1, 1), 0: (0, 0), "?": (0, 1), "*": (0, None), "+": (1, None)}.get(
        nargs, (nargs, nargs) if isinstance(nargs, int) else (0, None))
    if len(values) < count[0] or (count[1] is not None and len(values) > count[1]):
        want = ("no value" if count == (0, 0) else "one value" if count == (1, 1) else
                f"at most {count[1]} value(s)" if count[1] is not None else "one or more values")
        return f"takes {want}" + (f" of {', '.join(choices)}" if choices else "")
    bad = [v for v in values if choices is not None and v not in choices]
    return f"{' '.join(bad)} not among its choices {', '.join(choices)}" if bad else None


def refused_flags(args: list[str], release: str) -> list[str]:
    """Each emitted option `release`'s parse_args refuses, as 'OPTION VALUES (why)'; [] where it takes them all or
    the release is not in the data (a release the table lacks is read as its stand-in before this)."""
    data = megatron_release_flags_json()["releases"].get(release)
    if data is None:
        return []
    lacks, differs = set(data["lacks"]), data["differs"]
    out = []
    for option, values in argv_values(args):
        why = "no such option" if option in lacks else _why(differs[option], values) if option in differs else None
        if why:
            out.append(" ".join([option, *values]) + f" ({why})")
    return out


def lacking(release: str) -> set[str]:
    """The core_v0.16.1 options `release`'s parse_args has not (empty where the release is not in the data)."""
    data = megatron_release_flags_json()["releases"].get(release)
    return set(data["lacks"]) if data is not None else set()


# A core_v0.16.1 option with its values that a release's parse_args lacks ("lacks" in the data) but takes under its own
# spelling (read from that release's tree; tests/test_megatron_release_trees.py runs the spelled lines through it):
# (option, values, the release's spelling, source). A release is written its own spelling (release_args); an option it
# lacks with no spelling here is one the search does not pick for it (release_takes).
RELEASE_SPELLINGS = (
    ("--moe-flex-dispatcher-backend", ("deepep",), ("--moe-enable-deepep",),
     "core_v0.14.0 arguments.py:2873-2874 (with --moe-token-dispatcher-type flex: transformer_config.py:754-756)"),
    ("--cuda-graph-impl", ("transformer_engine",), ("--external-cuda-graph",),
     "core_v0.14.0 arguments.py:1293-1295; core_v0.16.1 arguments.py:448-454 reads it as --cuda-graph-impl "
     "transformer_engine"),
    # Gated DeltaNet (Qwen3-Next): 25.11's Megatron-LM 0d8e0714 names the layer type --linear-attention-type
    # (TransformerConfig.linear_attention_type), which pretrain_gpt.py's builder reads to build the decoder block spec
    # with GDN layers; core_v0.16.1 renamed it --experimental-attention-variant (experimental_attention_variant)
    ("--experimental-attention-variant", ("gated_delta_net",), ("--linear-attention-type", "gated_delta_net"),
     "0d8e0714cd29 megatron/training/arguments.py:3282-3283 (choices gated_delta_net, mamba), "
     "transformer_config.py:225 and 810-820, gpt_builders.py:45 and 117"),
    # not --cuda-graph-impl local as core_v0.14.0's --enable-cuda-graph (arguments.py:1288-1290): its graphs refuse any
    # recompute (transformer_config.py:1267-1271), which core_v0.16.1's full-iteration graph takes with full recompute,
    # and no 25.09 recipe runs a full-iteration graph
)


def _spelling(option: str, values: list[str], release: str) -> tuple[tuple[str, ...], str] | None:
    data = megatron_release_flags_json()["releases"].get(release)
    if data is None or option not in data["lacks"]:
        return None
    return next(((new, source) for old, vals, new, source in RELEASE_SPELLINGS
                 if old == option and tuple(values) == vals), None)


def release_args(args: list[str], release: str | None) -> list[str]:
    """`args` (core_v0.16.1's) with each option `release`'s parse_args lacks written in that release's own spelling
    (RELEASE_SPELLINGS); the rest as they are (refused_flags names what is left)."""
    if release is None:
        return list(args)
    out: list[str] = []
    for option, values in argv_values(args):
        spelled = _spelling(option, values, release)
        out += list(spelled[0]) if spelled else [option, *values]
    return out


def spellings_used(args: list[str], release: str | None) -> list[str]:
    """'NEW for OLD VALUES (source)' for each option of `args` (core_v0.16.1's) release_args respells for `release`."""
    if release is None:
        return []
    out = []
    for option, values in argv_values(args):
        spelled = _spelling(option, values, release)
        if spelled:
            out.append(f"{' '.join(spelled[0])} for {' '.join([option, *values])} ({spelled[1]})")
    return out


def release_takes(args: list[str], release: str | None) -> bool:
    """Whether `release`'s parse_args takes `args` (core_v0.16.1's flags for one feature) in its own spelling: the
    search picks a feature for a release only where it does (then the plan names no refused flag)."""
    return release is None or not refused_flags(release_args(args, release), release)


def release_spelled_features(has: dict, release: str | None, model, domain_size: int | None,
                             scope: str = "") -> dict:
    """`has` (recipes.release_features: field -> the values the search may pick) less each value whose Megatron flags
    `release`'s parse_args takes in no spelling (release_takes): per-layer CUDA graphs over `scope` ('' : the recipes'
    for the model; 25.09 takes one scope module, attn, or the whole layer), the full-iteration graph, the flex
    dispatcher with the backend this fabric takes (recipes.flex_backend), activation offloading (25.09 and 25.11 have no
    --cpu-offloading-num-layers)."""
    if release is None:
        return has
    flags = _feature_flags(model, release, domain_size, scope)
    drop = {key for key, args in flags.items() if key[1] in has.get(key[0], ()) and not release_takes(args, release)}
    return {k: frozenset(v for v in values if (k, v) not in drop) for k, values in has.items()}


def _feature_flags(model, release: str, domain_size: int | None, scope: str = "",
                   offload_layers: int = 1) -> dict[tuple[str, object], list[str]]:
    """(feature field, value) -> the core_v0.16.1 flags the emitter writes for it (emit/megatron.py): per-layer CUDA
    graphs over `scope` ('' : the recipes' for the model, as the emitter resolves it), the full-iteration graph,
    activation offloading of `offload_layers` layers, the flex dispatcher with the backend this fabric takes."""
    from commbench.planner.layout.graph_scope import cuda_graph_args
    from commbench.planner.layout.recipes import flex_backend
    flags = {("cuda_graph", "layer"): cuda_graph_args(model, "layer", scope),
             ("cuda_graph", "full"): cuda_graph_args(model, "full"),
             ("cpu_offload", True): ["--cpu-offloading-num-layers", str(offload_layers)]}
    if domain_size is not None:
        flags["dispatcher", "flex"] = ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend",
                                       flex_backend(int(domain_size), release)]
    return flags


def release_pin_flags_refusal(model, release: str | None, pins: dict, domain_size: int | None = None) -> str | None:
    """One line where a --layout pin makes the launch write flags `release`'s Megatron-LM parse_args takes in no
    spelling (release_takes: what the search leaves out, release_spelled_features, a pin would put back): a per-layer
    graph over the pinned scope or the recipes' (25.09 takes one module, attn, or the whole layer), the
    full-iteration graph, cpu_offload_layers > 0 (25.09 and 25.11 have no --cpu-offloading-num-layers), the flex
    dispatcher's backend. None where the release takes them (or is None: the target's flags)."""
    if release is None:
        return None
    from commbench.planner.layout.graph_scope import default_scope
    from commbench.planner.layout.recipes import releases
    scope = str(pins.get("cuda_graph_scope", "") or "")
    offload = int(pins.get("cpu_offload_layers", 0) or 0)
    pinned = {("cuda_graph", pins.get("cuda_graph")): "cuda_graph",
              ("dispatcher", pins.get("dispatcher")): "dispatcher", ("cpu_offload", offload > 0): "cpu_offload_layers"}
    for key, args in _feature_flags(model, release, domain_size, scope, max(offload, 1)).items():
        if key not in pinned or release_takes(args, release):
            continue
        field = pinned[key]
        value = offload if field == "cpu_offload_layers" else key[1]
        recipes_scope = "+".join(default_scope(model)) + ", the recipes'"
        where = f" (scope {scope or recipes_scope})" if key == ("cuda_graph", "layer") else ""
        refused = "; ".join(refused_flags(release_args(args, release), release))
        ref, version = release_core(release)   # in the data: release_takes read it
        taking = [r for r in releases() if release_takes(args, r)]
        fix = ("pin a cuda_graph_scope its parse_args takes (attn) or cuda_graph=none"
               if key == ("cuda_graph", "layer") else f"leave {field} out (the search picks what the release takes)")
        return (f"--layout {field}={str(value).lower()}{where} is invalid for a Megatron-LM launch at release "
                f"{release} (--software): its Megatron-LM {ref[:12]} (megatron-core {version}) parse_args refuses "
                f"{refused} (commbench/data/megatron-release-flags.json, read from its arguments.py), so the line "
                "would not parse "
                f"there; {fix}, or plan with a release that takes it ({', '.join(taking) or 'none in the table'})")
    return None


def release_core(release: str) -> tuple[str, str] | None:
    """(the Megatron-LM ref, the megatron-core version) `release` runs, or None where the data has no such release
    (models/release_data.release_core, which the model stage reads too)."""
    from commbench.planner.models.release_data import release_core as from_data
    return from_data(release)


# Each hybrid layer symbol: what it builds and the first Megatron-LM tag whose allocator takes it (the trees'
# Symbols classes: tools/megatron_release_flags.py hybrid_symbols).
HYBRID_SYMBOLS = {
    "M": ("Mamba layers", "core_r0.8.0"),
    "*": ("attention layers", "core_r0.8.0"),
    "-": ("MLP layers", "core_r0.8.0"),
    "E": ("MoE layers in a hybrid model", 'core_v0.16.0 (Megatron-LM 9a1c0d05c9, "Add MoE layer type to hybrid models '
          '(#2259)")'),
}


# The table releases whose Megatron-LM builds a hybrid (Mamba) stack evenly whatever --decoder-first/last-pipeline-
# num-layers say: MambaStack._select_layers_for_pipeline_parallel takes num_layers // pp layers per rank from offset
# rank x that (validate_args and TransformerConfig accept the flags, and the attention layers' offsets read them), so an
# uneven split drops layers or builds another split than planned; without the flags validate_args asserts num_layers %
# pp == 0 ("Number of layers should be divisible by the pipeline-model-parallel size"). 26.02.01's 55ac7082
# (mamba_block.py:172-215) and core_v0.16.1 (:181-215) honour the counts, as 26.04 and 26.04.01
# (ssm/mamba_hybrid_layer_allocation.py:314-440 select_pipeline_segment) and 26.06 to 26.08
# (models/hybrid/hybrid_layer_allocation.py:330-460) do. tests/test_megatron_release_trees.py reads each tree.
HYBRID_EVEN_SPLIT_ONLY = {
    "25.09": "core_v0.14.0 megatron/core/ssm/mamba_block.py:214-225, arguments.py:521-534",
    "25.11": "0d8e0714cd29 megatron/core/ssm/mamba_block.py:215-226, arguments.py:613-626",
    "26.02": "b0cc2706ddc6 megatron/core/ssm/mamba_block.py:172-183, arguments.py:558-571",
}


def hybrid_even_split_only(release: str | None) -> str | None:
    """The source where `release`'s Megatron-LM builds hybrid stacks only evenly (HYBRID_EVEN_SPLIT_ONLY), or None."""
    return HYBRID_EVEN_SPLIT_ONLY.get(release) if release is not None else None


# Gated DeltaNet under context parallelism (all-to-alls from sequence to head shards around the delta rule, as Mamba's):
# Megatron-LM 20ba03fec0 "Gated delta net context parallel (CP) (#2642)", first in megatron-core 0.18.0, release 26.06
# (d0b3b775 megatron/core/ssm/gated_delta_net.py:345-380, 480-505); 26.04.01 (2edffadb, megatron-core 0.17.1)
# transformer_config.py:1115-1118 still asserts "Gated delta net does not support context parallel for now".
GDN_CP_CORE = (0, 18, 0)


def gdn_context_parallel(release: str | None) -> bool:
    """Whether `release`'s Megatron-LM splits Gated DeltaNet layers over CP (GDN_CP_CORE; no release: core_v0.16.1,
    which does not)."""
    return release_core_at_least(release, GDN_CP_CORE)


# A hybrid pattern cut by '|' into pipeline segments, segment vp_stage * pp + pp_rank on each model chunk: Megatron-LM
# 26.04's d7288711 first (megatron-core 0.17.0rc0: ssm/mamba_hybrid_layer_allocation.py:314-468 select_pipeline_segment;
# validate_args derives --virtual-pipeline-model-parallel-size from the segment count, arguments.py:687-708, and asserts
# --decoder-first/last-pipeline-num-layers, --num-virtual-stages-per-pipeline-rank and
# --num-layers-per-virtual-pipeline-stage unset beside pipes), as 26.06 to 26.08 (cd4afffa
# models/hybrid/hybrid_layer_allocation.py:331-493, arguments.py:815-836). Without pipes these releases still split the
# pattern themselves but build no virtual stages (vp_stage given raises) and log a DEPRECATION warning (d7288711 :375,
# cd4afffa :396). 26.02.01's 55ac7082 and earlier have no pipe symbol; their MambaStack asserts no virtual pipeline.
HYBRID_PIPE_SEGMENTS_CORE = (0, 17, 0)


def hybrid_pipe_segments(release: str | None) -> bool:
    """Whether `release`'s Megatron-LM takes a '|'-segmented hybrid pattern (HYBRID_PIPE_SEGMENTS_CORE; no release:
    core_v0.16.1, which does not)."""
    return release_core_at_least(release, HYBRID_PIPE_SEGMENTS_CORE)


def release_model(model, release: str | None):
    """`model` as `release`'s Megatron-LM builds it: a hybrid model at a release of HYBRID_EVEN_SPLIT_ONLY with
    hybrid_uneven_split False (layout/split.py offers it even splits only), from HYBRID_PIPE_SEGMENTS_CORE on with
    hybrid_pipe_segments (split.py offers it virtual stages, emitted as '|' segments); a Gated DeltaNet model with
    gdn_context_parallel where the release splits it over CP (models/gdn.gdn_heads_bad); else `model`."""
    import dataclasses
    uneven = not (getattr(model, "is_hybrid", False) and hybrid_even_split_only(release))
    gdn_cp = bool(getattr(model, "linear_attention_freq", 0)) and gdn_context_parallel(release)
    pipes = bool(getattr(model, "is_hybrid", False)) and hybrid_pipe_segments(release)
    if (model.hybrid_uneven_split, model.gdn_context_parallel, model.hybrid_pipe_segments) == (uneven, gdn_cp, pipes):
        return model
    return dataclasses.replace(model, hybrid_uneven_split=uneven, gdn_context_parallel=gdn_cp,
                               hybrid_pipe_segments=pipes)


def gdn_cp_refusal(model, release: str | None, cp: int, field: str = "--layout cp") -> str | None:
    """One line where a pinned cp > 1 asks for context parallelism of Gated DeltaNet layers that `release`'s
    Megatron-LM does not build (GDN_CP_CORE), or None."""
    if cp <= 1 or not getattr(model, "linear_attention_freq", 0) or gdn_context_parallel(release):
        return None
    from commbench.planner.layout.recipes import releases
    later = [r for r in releases() if gdn_context_parallel(r) and release_cannot_build(model, r) is None]
    return (f"{field}={cp} is invalid for {model.name} at release {release or MEGATRON_LM_RELEASE} (--software): its "
            f"{megatron_release_name(release)[0]} builds Gated DeltaNet layers with cp=1 only (TransformerConfig "
            "asserts 'Gated delta net does not support context parallel'); pin cp=1 or plan with --software "
            f"{later[0] if later else 'a later release'} or newer (megatron-core 0.18.0 on splits Gated DeltaNet "
            "heads over CP)")


def hybrid_pp_refusal(model, release: str | None, pp: int, field: str = "--layout pp") -> str | None:
    """One line where a pinned `pp` needs an uneven split of hybrid `model` that `release`'s Megatron-LM does not build
    (num_layers % pp != 0 at a release of HYBRID_EVEN_SPLIT_ONLY), or None."""
    where = hybrid_even_split_only(release) if getattr(model, "is_hybrid", False) else None
    if where is None or pp <= 1 or model.num_layers % pp == 0:
        return None
    from commbench.planner.layout.recipes import releases
    even = [p for p in range(2, min(model.num_layers, 64) + 1) if model.num_layers % p == 0]
    later = [r for r in releases() if hybrid_even_split_only(r) is None and release_cannot_build(model, r) is None]
    later = [r for r in later if r > release] or later
    return (f"{field}={pp} is invalid for {model.name} at release {release} (--software): its Megatron-LM builds a "
            f"hybrid stack only evenly, num_layers // pp layers per rank ({where}), and {model.num_layers} layers do "
            f"not divide by {pp} (--decoder-first/last-pipeline-num-layers would be ignored and layers dropped); pin a "
            f"pp dividing {model.num_layers} ({', '.join(map(str, even)) or 'none'}) or plan with --software "
            f"{later[0] if later else 'a later release'} or newer, whose Megatron-LM builds uneven hybrid splits")


def release_cannot_build(model, release: str) -> str | None:
    """Why the Megatron-LM `release` runs cannot build `model` (a ModelSpec), or None (also where the data has no
    such release): Gated DeltaNet layers where its parse_args has no --linear-attention-freq (25.09's core_v0.14.0 has
    no GDN at all), or a hybrid pattern symbol its allocator does not take (see the module docstring)."""
    data = megatron_release_flags_json()["releases"].get(release)
    if data is None:
        return None
    if getattr(model, "linear_attention_freq", 0) and "--linear-attention-freq" in data["lacks"]:
        return ("it has no Gated DeltaNet layers (no --linear-attention-* options in megatron/training/arguments.py, "
                "no gated_delta_net in megatron/, as in core_v0.15.0; 25.11's 0d8e0714cd29 has them, "
                "arguments.py:3280-3300)")
    if not getattr(model, "layer_pattern", ""):
        return None
    have = data["hybrid_symbols"]
    missing = sorted(set(model.layer_pattern) - set(have))
    if not missing:
        return None
    what = "; ".join(f"'{c}' ({HYBRID_SYMBOLS[c][0]}, first in {HYBRID_SYMBOLS[c][1]})" if c in HYBRID_SYMBOLS
                     else f"'{c}'" for c in missing)
    return (f"its hybrid layer allocator (megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols) takes "
            f"{', '.join(have)} only, and {model.name}'s --hybrid-override-pattern holds {what}")


def check_model_in_release(model, release: str, asked: str | None = None, *, field: str = "--software") -> None:
    """Refuse, in one line naming `field` (the release's option), the release's megatron-core and Megatron-LM, what
    it cannot build of `model` (release_cannot_build) and the releases that build it, a plan of `model` for the table
    release `release` (resolved: a release the table lacks reads its stand-in's; `asked`: as given)."""
    from commbench.errors import invalid
    from commbench.planner.layout.recipes import normalised_release, releases
    why = release_cannot_build(model, release)
    if why is None:
        return
    ref, version = release_core(release)
    name = normalised_release(asked) if asked is not None else release
    read = "" if name == release else f" (read as {release}, the newest table release before it)"
    building = [r for r in releases() if release_cannot_build(model, r) is None]
    raise invalid(field, name, f"release {name}{read} runs megatron-core {version} (Megatron-LM {ref[:12]}), which "
                  f"cannot build {model.name}: {why}; the releases that build it: "
                  + (", ".join(building) + " (or newer)" if building else "none in the table"))


__all__ = ["MEGATRON_LM_RELEASE", "TARGET_CORE", "core_key", "megatron_release_name", "release_core_at_least", "HYBRID_EVEN_SPLIT_ONLY", "HYBRID_SYMBOLS", "hybrid_even_split_only", "hybrid_pp_refusal",
           "GDN_CP_CORE", "gdn_context_parallel", "gdn_cp_refusal",
           "release_model", "RELEASE_SPELLINGS", "argv_values", "check_model_in_release", "lacking",
           "refused_flags", "release_args", "release_cannot_build", "release_core", "release_pin_flags_refusal",
           "release_spelled_features",
           "release_takes", "spellings_used"]


# the Megatron-LM a plan's arguments are checked against where no release is named (search/frameworks.py says why)
MEGATRON_LM_RELEASE = "core_v0.16.1"


def core_key(version: str) -> tuple[int, int, int]:
    """A megatron-core version ('0.16.0rc0', '0.14', '0.19.0') as (major, minor, patch); an rc counts as its release."""
    from commbench.planner.models.release_data import core_version_key
    return core_version_key(version)


def megatron_release_name(release: str | None) -> tuple[str, str]:
    """(how a refusal names the Megatron-LM of `release`, its megatron-core version): a recipe-table release's own
    (layout/release_flags.release_core: its ref and recipes.json's megatron_core), or, with no release, the target the
    arguments are checked against (core_v0.16.1)."""
    core = release_core(release) if release is not None else None
    if core is None:
        return f"Megatron-LM {MEGATRON_LM_RELEASE}", MEGATRON_LM_RELEASE.removeprefix("core_v")
    ref, version = core
    ref = ref if ref.startswith("core_v") else ref[:12]
    return f"Megatron-LM {ref} (release {release}'s, megatron-core {version})", version


def release_core_at_least(release: str | None, core: tuple[int, ...]) -> bool:
    """Whether the megatron-core `release`'s Megatron-LM runs (megatron_release_name; no release: the target
    core_v0.16.1) is `core` or newer."""
    return core_key(megatron_release_name(release)[1]) >= core
