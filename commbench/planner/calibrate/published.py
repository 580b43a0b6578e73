"""Published training runs (commbench/data/calibration-runs.json) mapped onto planner inputs, the
model's prediction for each, and the fit of the calibration terms.

Mapping assumptions, the same for every row (the tables do not state them):
- precision: FP8 / FP8-CS / FP8-DS -> fp8 (per-tensor scaling; FP8-DS, delayed, noted as priced so); MXFP8 / FP8-MX ->
  mxfp8; NVFP4; BF16 (any case; PRECISION_LABELS); the 25.09 table's one blockwise row -> fp8, noted; any other label
  (FP8-XYZ, another blockwise FP8) is refused naming the allowed ones;
  a row with no precision (the 25.09 tables have no such column) -> fp8, the default recipe of that
  release, whose throughput matches the FP8-CS rows of 25.11; a user's row of any other release must name
  its precision (check_row refuses it without one); a format the model has no kernels for
  (MXFP4, FP4, FP16, ...) is listed as not modelled, never read as another;
- expert TP 1 when not published (the Megatron-Bridge MoE recipes' setting); cp, vp, ep, etp given as the
  tables' "n/a" (or "-") are not published: 1;
- recipe features (RECIPE_FIELDS: recompute and its block count recompute_layers, cpu_offload_layers,
  dispatcher, moe_a2a_overlap, cuda_graph, fp8_attention, fused_moe), in rising precedence: the defaults below; the Megatron-Bridge recipe of
  the row's `release` for its model, GPU and precision (layout/recipes.py, commbench/data/recipes.json:
  the recipe file at that release's tag, cited per entry); the row's "recipe" object or top-level keys
  (a user's run states its own);
  a release the table lacks reads the newest table release not newer than it (26.10 -> 26.08),
  noted in the row's layout_note (also when that release has no recipe for the run: the defaults below);
  the flags are facts of the run only where that recipe's sizes (num_gpus, tp, pp, vp, ep, mbs, gbs) and
  Megatron-FSDP are the row's (or the row states its own); otherwise they are assumed: the nearest recipe of the
  release (the variant whose sizes match most; its offload and recomputed-layer counts only where its tp/pp/vp
  are the row's) or, with none read, the defaults below; flags_assumed says which and why, in the row's
  layout_note (printed beside the row by benchmarks/planner_calibration.py and `commbench calibrate`);
- otherwise (a model the recipe table lacks, or a release older than it, e.g. the 24.07 NeMo rows): sequence
  parallel on, selective recompute, distributed optimizer, TP comm overlap and
  DP overlap on, EP all-to-all overlap off, no CUDA graphs, bf16 attention, unfused MoE kernels,
  force-balanced routing;
- MoE dispatcher by system: on NVL72 racks (GB200, GB300) the flex dispatcher (HybridEP), which
  Megatron-Bridge's performance recipes set for every DeepSeek-V3 and Qwen3 config on GB200/GB300
  (scripts/performance/configs/*/..._workload_base_configs.py: moe_flex_dispatcher_backend=
  "hybridep") and its MoE dispatcher guide names first choice there; flex also on HGX for
  DeepSeek-V3, Qwen3-30B-A3B and the Nemotron-3 family, whose recipes set it on every GPU
  (FLEX_EVERYWHERE); elsewhere the
  alltoall dispatcher (NCCL), the recipes' choice for Qwen3-235B-A22B on HGX and the safe default;
- a parallel size (tp, pp, vp, ep) the row's release contradicts is modelled at its release recipe's value
  (recipe_size_if_release_contradicts: that recipe has every other size of the row, and the row's throughput is a run
  published at the recipe's value by the same or a later release, not one at the row's), noted in its layout_note;
  a row whose mbs contradicts its own GA takes the recipe's mbs (recipe_mbs_if_row_contradicts);
- DeepSeek-V3 rows tagged "w/o MTP" drop the MTP layer;
- rows with Megatron-FSDP (FSDP=N in the notes, any case, "FSDP: N" too: N of the DP ranks shard) are modelled with fsdp
  (step/fsdp.py), as HSDP with dp/N replicas when N < dp; N not dividing dp and models outside the zoo
  are listed but not modelled. A row whose notes state no FSDP at all (the 26.08 table has no FSDP column) takes
  its release recipe's Megatron-FSDP, HSDP replica count and outer optimizer sharding where that recipe's sizes are
  the row's (recipe_fsdp).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from commbench.limits import MAX_GPUS
from commbench.planner.step.terms import CALIBRATED, Calibration
from commbench.planner.layout.spec import Layout, LayoutArrays
from commbench.planner.models.spec import ModelSpec
from commbench.planner.models.zoo import load_model
from commbench.planner.layout.recipe_model import recipe_model

MODEL_NAMES = {"deepseek-v3-671b": "deepseek-v3", "deepseekv3": "deepseek-v3", "qwen3-235b-a22b": "qwen3-235b-a22b",
               "qwen3-30b-a3b": "qwen3-30b-a3b", "gpt-oss-120b": "gpt-oss-120b", "llama3-70b": "llama3.1-70b",
               "llama3.1-405b": "llama3.1-405b", "llama3-8b": "llama3-8b",
               # Llama 3.1 8B has Llama 3 8B's architecture (only the RoPE scaling for long context differs)
               "llama3.1-8b": "llama3-8b", "nemotron-3-nano": "nemotron-3-nano-30b-a3b", "kimi-k2": "kimi-k2",
               "nemotron-3-super": "nemotron-3-super-120b-a12b", "nemotron-3-ultra": "nemotron-3-ultra-550b-a55b",
               "nvidia-nemotron-3-ultra-550b-a55b": "nemotron-3-ultra-550b-a55b",
               # spellings of the new families in published tables and model cards
               "nemotron-3-nano-30b": "nemotron-3-nano-30b-a3b", "nemotron3-nano": "nemotron-3-nano-30b-a3b",
               "nvidia-nemotron-3-nano-30b-a3b": "nemotron-3-nano-30b-a3b",
               "nemotron-3-super-120b": "nemotron-3-super-120b-a12b", "nemotron3-super": "nemotron-3-super-120b-a12b",
               "nvidia-nemotron-3-super-120b-a12b": "nemotron-3-super-120b-a12b",
               "kimi-k2-1t": "kimi-k2", "kimi-k2-1040b": "kimi-k2", "kimi-k2-instruct": "kimi-k2",
               "kimi-k2-base": "kimi-k2", "qwen3-next-80b-a3b": "qwen3-next-80b-a3b",
               "deepseekv4-flash": "deepseek-v4-flash", "deepseek-v4-flash-base": "deepseek-v4-flash",
               "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b", "qwen3-next": "qwen3-next-80b-a3b",
               "nemotron-3-5-lightning": "nemotron-3.5-lightning-30b-a3b",
               "nemotron-3.5-lightning": "nemotron-3.5-lightning-30b-a3b",
               "nvidia-nemotron-3.5-lightning-30b-a3b": "nemotron-3.5-lightning-30b-a3b"}
PRESETS = {"gb200": "gb200-nvl72", "gb300": "gb300-nvl72", "b200": "b200-hgx", "b300": "b300-hgx",
           "h100": "h100-hgx", "h200": "h200-hgx", "h800": "h800-hgx"}
# fsdp_double_buffer: megatron-core's DistributedDataParallelConfig default (False) where the release's recipe does not
# say (recipes.json fsdp_double_buffer); keep_fp8_transpose_cache likewise (DistributedDataParallelConfig: False)
DEFAULT_FLAGS = dict(sequence_parallel=True, recompute="selective", dispatcher="alltoall",
                     distributed_optimizer=True, tp_comm_overlap=True, moe_a2a_overlap=False, dp_overlap=True,
                     fsdp_double_buffer=False, keep_fp8_transpose_cache=False)


RECIPE_FIELDS = ("cpu_offload_layers", "recompute_layers", "recompute", "dispatcher", "moe_a2a_overlap", "cuda_graph", "cuda_graph_scope",
                 "fp8_attention", "fused_moe",
                 "tp_comm_overlap", "dp_overlap", "sequence_parallel", "distributed_optimizer", "fused_mlp_offload_min")


def release_recipe(row: dict[str, Any], preset: str, model_name: str) -> dict[str, Any] | None:
    """The Megatron-Bridge recipe of the row's release for its model, GPU and precision (None when the
    recipe table has no such entry); the variant whose parallel sizes match the row's most, or, where none has
    the row's sizes, a recipe committed after the release's tag that has them (recipes.later_recipe_for: the
    layout the release's table ran; its release_note cites the commit). A release the table lacks reads the
    newest table release not newer than it (recipes.resolve_release), and the recipe's release_note says so."""
    from commbench.planner.layout.recipes import later_recipe_for, recipe_for
    release = str(row.get("release") or "")
    if not release or not model_name or not preset:
        return None
    try:
        precision = precision_of(row.get("precision"))
    except ValueError:
        return None
    sizes = {k: row.get(k) for k in ("num_gpus", "tp", "pp", "mbs", "gbs")}
    sizes.update(vp=row.get("vp") or 1, ep=row.get("ep") or 1)   # a table's "n/a" is 1
    recipe = recipe_for(release, model_name, preset, precision, sizes)
    if recipe is not None and not recipe["sizes_match"]:   # a later commit's recipe the release's table ran
        recipe = later_recipe_for(release, model_name, preset, precision, sizes) or recipe
    return recipe


def recipe_flags(row: dict[str, Any], preset: str, model_name: str = "") -> dict[str, Any]:
    """Layout flags of a run: DEFAULT_FLAGS (dispatcher by system and model), overridden by its release's
    recipe (release_recipe), overridden by the row's own recipe fields."""
    flags: dict[str, Any] = dict(DEFAULT_FLAGS, dispatcher=dispatcher_of(preset, model_name))
    from commbench.planner.layout.recipes import OVERLAP_KEYS, RECIPE_KEYS
    released = release_recipe(row, preset, model_name) or {}
    flags.update({k: released[k] for k in (*RECIPE_KEYS, *OVERLAP_KEYS, "cpu_offload_layers", "recompute_layers",
                                          "cuda_graph_scope", "fused_mlp_offload_min", "fsdp_double_buffer",
                                          "keep_fp8_transpose_cache")
                  if k in released})
    recipe = row.get("recipe") or {}
    for name in RECIPE_FIELDS:
        if name in recipe:
            flags[name] = recipe[name]
        elif name in row:
            flags[name] = row[name]
    if isinstance(flags.get("cuda_graph_scope"), list):   # as Megatron spells it: a list, [] the whole layer
        from commbench.planner.layout.graph_scope import recipe_scope_text
        flags["cuda_graph_scope"] = recipe_scope_text(flags.get("cuda_graph", "none"), flags["cuda_graph_scope"])
    return flags


NVL72_PRESETS = frozenset({"gb200-nvl72", "gb300-nvl72"})


# Models whose Megatron-Bridge performance recipes set a flex backend (HybridEP / DeepEP) on every
# system, not only NVL72: deepseek_workload_base_configs.py (NVIDIA-NeMo/Megatron-Bridge@0426418:
# moe_flex_dispatcher_backend="hybridep" for GB300, GB200, B300, B200 and H100) and
# qwen3_workload_base_configs.py (@01b2977: Qwen3-30B-A3B hybridep on every GPU) and the Nemotron-3
# family's (Nano, Super: configs/nemotronh/nemotron_3*_workload_base_configs.py, v0.3.1 and v0.4.0 on,
# moe_flex_dispatcher_backend="hybridep" in the base config every GPU's inherits; v0.6.0's
# perf_recipes/nemotronh/{h100,b200,b300,gb200,gb300}/nemotronh.py set it per recipe, Ultra's in
# perf_recipes/nemotronh/common.py). The recipe table does not read the Nemotron-3 recipes
# (tools/recipes_from_megatron_bridge.py says why), so their rows take this dispatcher with the default
# recipe's other flags. Nemotron-3.5 Lightning's recipes are Nano's plus its MTP (perf_recipes/nemotronh/
# {gb200,gb300,h100}/nemotronh.py at 067f987: each built from the Nano recipe of its GPU), dispatcher included.
# Qwen3-235B-A22B's recipes use alltoall on B200/B300/H100, flex on GB200/GB300: the system default.
FLEX_EVERYWHERE = frozenset({"deepseek-v3", "qwen3-30b-a3b", "nemotron-3-nano-30b-a3b", "nemotron-3-super-120b-a12b",
                             "nemotron-3-ultra-550b-a55b", "nemotron-3.5-lightning-30b-a3b"})


def dispatcher_of(preset: str, model_name: str = "") -> str:
    """The recipes' MoE dispatcher (see the module docstring): flex/HybridEP on NVL72 and for the
    models in FLEX_EVERYWHERE; alltoall (NCCL) otherwise."""
    return "flex" if preset in NVL72_PRESETS or model_name in FLEX_EVERYWHERE else "alltoall"


def _check_gpu_runs(row: dict, where: str) -> None:
    """A run in a precision its GPU does not have (hardware.toml precisions) is refused by name, as plan's
    --precision is (layout/precision.py check_precision); `gpu` a GPU name or a system preset ("h100-hgx": its GPU,
    the preset name's first part, fit.preset_gpu)."""
    from commbench.data.reference import gpu_names, gpu_spec
    from commbench.errors import CommbenchError
    gpu = str(row.get("gpu", "")).lower()
    if gpu not in gpu_names():
        preset = _preset_name(gpu)
        gpu = preset.split("-")[0] if preset else gpu
    if gpu in gpu_names() and not unmodelled_precision(row.get("precision")):
        spec, precision = gpu_spec(gpu), precision_of(row.get("precision"))
        if precision not in spec.precisions:
            raise CommbenchError(f"{where}: field 'precision' = {row.get('precision')!r}; {gpu.upper()} supports "
                                 f"{', '.join(spec.precisions)} (commbench/data/hardware.toml)")


def _check_release_runs(row: dict, where: str) -> None:
    """A run in a precision its release's megatron-core cannot run (25.09, megatron-core 0.14, has no NVFP4 flag) is
    refused by the rule plan's --software --precision is (recipes.check_precision_in_release), naming the row's
    fields: such a row is no run that happened, and its throughput would fit the kernel terms of that precision.
    A release the table lacks reads its stand-in's, as its recipes do; one older than the table, "user" or none is
    not checked (no megatron-core known)."""
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import check_precision_in_release, resolve_release
    release = row.get("release")
    if release in (None, "", "user") or unmodelled_precision(row.get("precision")) or \
            row.get("precision") in (None, ""):
        return
    stand, _ = resolve_release(str(release))
    if stand is None:
        return
    try:
        check_precision_in_release(precision_of(row.get("precision")), stand, str(release),
                                   fields=("field 'precision'", "field 'release'"))
    except CommbenchError as exc:
        raise CommbenchError(f"{where}: {exc}") from None


# A table's precision label, spelled as the tables and Megatron-LM logs (runlogs/megatron.py) write it (lower case,
# spaces left out), and the step model's precision it is read as. FP8 is per-tensor scaling: current (FP8-CS,
# Megatron-LM --fp8-recipe tensorwise) or delayed (FP8-DS: the same per-tensor-scaled FP8 GEMMs, Transformer Engine
# v2.8 transformer_engine/common/recipe/__init__.py:106-108 float8_per_tensor_scaling; precision_note says so).
PRECISION_LABELS = {"bf16": "bf16", "fp8": "fp8", "fp8-cs": "fp8", "fp8-ds": "fp8", "mxfp8": "mxfp8",
                    "fp8-mx": "mxfp8", "mxfp8(32x32)": "mxfp8", "nvfp4": "nvfp4",
                    # the 25.09 table's one blockwise row (DeepSeek-V3, 1024 H100): read as per-tensor FP8 since it
                    # was shipped, and said so (precision_note); no other blockwise label is read (no blockwise price)
                    "fp8-blockwise(128x128w,1x128act)": "fp8"}
ALLOWED_PRECISIONS = "BF16, FP8 (FP8-CS), FP8-DS, MXFP8 (FP8-MX, MXFP8(32x32)), NVFP4"
# Labels priced as another recipe than they name: the note published_runs puts in the row's layout_note
PRICED_AS_PER_TENSOR = {"fp8-ds": "delayed scaling, priced as per-tensor FP8 (current scaling): both run the same "
                                  "per-tensor-scaled FP8 GEMMs; the amax-history bookkeeping is not priced",
                        "fp8-blockwise(128x128w,1x128act)": "blockwise FP8, priced as per-tensor FP8: the step model "
                                                            "has no blockwise price (128x128 weight / 1x128 activation "
                                                            "blocks run other GEMM kernels)"}


def _label_key(label: str) -> str:
    return re.sub(r"\s+", "", label.lower())


def precision_of(label: str | None) -> str:
    """The step model's precision for a table's label (PRECISION_LABELS; none: a 25.09 row, see the module
    docstring); ValueError for a label it cannot read, text or not (a bare 8 in a JSON row is no precision name,
    "FP8-XYZ" or "FP8 blockwise" no recipe it prices)."""
    if label is not None and not isinstance(label, str):
        raise ValueError(f"unknown precision label {label!r} (not text)")
    if label is None or not label.strip():
        return "fp8"
    try:
        return PRECISION_LABELS[_label_key(label)]
    except KeyError:
        raise ValueError(f"unknown precision label {label!r}") from None


def precision_note(label: Any) -> str:
    """Where a row's precision label is priced as another FP8 recipe than it names (PRICED_AS_PER_TENSOR), one
    phrase saying so; '' otherwise."""
    why = PRICED_AS_PER_TENSOR.get(_label_key(label)) if isinstance(label, str) else None
    return f"precision {label!r}: {why}" if why else ""


# Releases whose published tables have no precision column: a row of one without a precision reads as FP8
# (see the module docstring); any other row must name its number format (check_row).
RELEASES_WITHOUT_PRECISION = ("25.09",)


def precision_unpublished(release: Any) -> bool:
    """Whether a row of `release` may leave its precision out (RELEASES_WITHOUT_PRECISION)."""
    from commbench.planner.layout.recipes import normalised_release
    return isinstance(release, str) and normalised_release(release) in RELEASES_WITHOUT_PRECISION


# Number formats a table may name that the step model has no kernels for (MXFP4: gpt-oss's weights; FP16, FP32):
# a run in one is listed as not modelled, naming the field and value, where an unreadable label is refused.
UNMODELLED_PRECISION = re.compile(r"(mx|nv)?fp(4|6)(e\dm\d)?|fp(16|32)|tf32|int(4|8)")
MODELLED_PRECISIONS = ("bf16", "fp8", "mxfp8", "nvfp4")


def unmodelled_precision(label: Any) -> str:
    """'' when the step model reads the row's precision or cannot read it at all (check_row refuses that);
    else the reason a real number format it lacks is not modelled."""
    if not isinstance(label, str):
        return ""
    try:
        precision_of(label)
        return ""
    except ValueError:
        pass
    text = re.sub(r"\(.*?\)|[\s_\-]", "", label.lower())
    if not UNMODELLED_PRECISION.fullmatch(text):
        return ""
    return f"field 'precision' = {label!r}: a number format the step model has no kernels for (it has " \
           f"{', '.join(MODELLED_PRECISIONS)})"


# A run's framework, by how it was read: runlogs' notes open with the log kind; a JSON row may say "framework";
# the other JSON rows (the published tables' shape: Megatron-Bridge) do not say, and are priced as Megatron-LM.
RUN_FRAMEWORKS = (("TorchTitan log", "torchtitan"), ("Megatron-LM log", "megatron"))


def run_framework(row: dict) -> str:
    """'torchtitan', 'megatron' or 'unstated' for a run row (RUN_FRAMEWORKS)."""
    notes = str(row.get("notes") or "")
    found = next((name for prefix, name in RUN_FRAMEWORKS if notes.startswith(prefix)), None)
    said = str(row.get("framework") or "").lower()
    return found or (said if said in ("megatron", "torchtitan") else "unstated")


def step_framework(row: dict) -> str:
    """The framework whose charges the step model prices a run with (evaluate_layouts' `framework`), as `plan
    --framework` does for the same layout: a TorchTitan run's (its FSDP2 gradients reduce-scattered in fp32 every
    micro-batch without PP, frameworks.TITAN_DP_WITHOUT_PP; its logits and vocabulary rows), else Megatron-LM's."""
    return "torchtitan" if run_framework(row) == "torchtitan" else "megatron"


@dataclass(frozen=True, kw_only=True)
class PublishedRun:
    index: int
    row: dict[str, Any]
    model: ModelSpec | None
    preset: str | None
    layout: Layout | None
    skip_reason: str = ""
    layout_note: str = ""     # where the modelled layout departs from the row as published, and why
    where: str = ""           # the row's place: "FILE row N" for a user's runs file, "row N" otherwise
    cannot_have_run: bool = False   # its features stop its release's Megatron-LM before training (skip_reason says)

    @property
    def label(self) -> str:
        """'MODEL 16x GPU PRECISION RELEASE', the GPU count written as the table writes it."""
        r = self.row
        return f"{r['model']} {r['num_gpus']}x {r['gpu']} {r.get('precision') or '?'} {r.get('release') or ''}".rstrip()

    @property
    def identity(self) -> str:
        """The label as every check compares runs (run_label): the zoo model, system preset, the step model's
        precision and the release as read, whatever their spelling ('Llama3-70B 64x H100 FP8' and 'llama3.1-70b 64x
        h100 fp8' are one run)."""
        r = self.row
        return run_label(r["model"], r["num_gpus"], r["gpu"], r.get("precision"), r.get("release"))

    @property
    def modelled_row(self) -> dict[str, Any]:
        """The row with the sizes it is modelled with: `row` as published but for a parallel size its release
        contradicts (recipe_size_if_release_contradicts) or an mbs it contradicts itself on
        (recipe_mbs_if_row_contradicts); the layout_note says which. `row` itself where none is."""
        if self.layout is None:
            return self.row
        lay, r = self.layout, self.row
        moved = {k: getattr(lay, k) for k in ("tp", "pp", "vp", "ep", "mbs") if getattr(lay, k) != int(r.get(k) or 1)}
        return dict(r, **moved) if moved else r

    @property
    def legacy_label(self) -> str:
        """The label as calibration files written before the table's spelling list their runs ('GPUxN')."""
        r = self.row
        return f"{r['model']} {r['gpu']}x{r['num_gpus']} {r.get('precision') or '?'} {r.get('release') or ''}".rstrip()


def run_label(model: Any, num_gpus: Any, gpu: Any, precision: Any, release: Any) -> str:
    """'MODEL Nx SYSTEM PRECISION RELEASE' with each part as the run is read: the zoo name (_zoo_name: an alias such as
    Llama3-70B is llama3.1-70b), the system preset (_preset_name: H100 is h100-hgx), the step model's precision
    (precision_of: FP8-CS is fp8; none, a 25.09 row, is fp8) and the release as the table names it
    (normalised_release); a part none of them reads stays as given, lower case. One identity for a run however a row
    spells it: the repeat check, in-sample and a calibration file's own runs compare this (cli/calibrate.py)."""
    from commbench.planner.layout.recipes import normalised_release
    text = str(model).strip()
    name = _zoo_name(text) or text.lower()
    system = _preset_name(str(gpu)) or str(gpu).strip().lower()
    try:
        number_format = precision_of(precision)
    except ValueError:
        number_format = str(precision).strip().lower()
    read = normalised_release(release) if isinstance(release, str) else ""
    return f"{name} {num_gpus}x {system} {number_format} {read}".rstrip()


def row_identity(row: dict[str, Any]) -> dict[str, Any]:
    """The fields that say which run a row is, spelled one way (run_label; an optional size a table leaves out, 1; its
    Megatron-FSDP from the "fsdp" field or the notes, 0 for none, as FSDP=0 reads): two rows equal here and in their
    other fields are one run."""
    row = read_row(row)
    return {"run": run_label(row.get("model"), row.get("num_gpus"), row.get("gpu"), row.get("precision"),
                             row.get("release")),
            **{k: row.get(k) or 1 for k in OPTIONAL_SIZES},
            "fsdp": fsdp_of(row)}


IDENTITY_FIELDS = ("model", "num_gpus", "gpu", "precision", "release", "cp", "vp", "ep", "etp", "fsdp")


def _zoo_name(model: str) -> str | None:
    """A published model name (MODEL_NAMES) or a zoo name as is."""
    from commbench.planner.models.zoo import model_names
    if model.strip().lower().startswith("hf:"):  # a Hugging Face config.json (models/hf_config.py)
        return model.strip()
    # spellings seen in published tables: Llama-3.1-405B, Qwen-3-30B-A3B, deepseek_v3
    key = re.sub(r"^(llama|qwen)[-_ ](?=\d)", r"\1", model.strip().lower()).replace("_", "-").replace(" ", "-")
    return MODEL_NAMES.get(key) or (key if key in model_names() else None)


def _preset_name(gpu: str) -> str | None:
    """A published GPU name (PRESETS) or a system preset name as is."""
    from commbench.costmodel import preset_names
    key = gpu.strip().lower()
    # spellings seen in published tables: DGX-B300, H100-SXM, H100 SXM5 80GB
    short = re.sub(r"^(dgx|hgx)[- ]", "", key).split(" ")[0].split("-sxm")[0]
    return PRESETS.get(key) or PRESETS.get(short) or (key if key in preset_names() else None)


# What a run must state to be read at all; its tokens_per_s_per_gpu is what the prediction is compared
# with (a run without it is listed as not modelled, like one whose model is outside the zoo).
REQUIRED_FIELDS = ("model", "gpu", "num_gpus", "seq_len", "gbs", "mbs", "tp", "pp")
MAX_SIZE = 1 << 31   # any integer of a run (gbs, seq_len, recompute_layers, ...): far past real ones, products fit int64


# The keys a run row is read by (the published tables' columns, the recipe fields); any other is kept as
# information (a date, a cluster name) and named by calibrate (unread_fields), but one a letter or two off a read
# key, or a read key in another case, is a typo whose value would otherwise be dropped: check_row refuses it,
# naming the key it resembles.
READ_KEYS = frozenset((*REQUIRED_FIELDS, "cp", "vp", "ep", "etp", "precision", "release", "software",
                       "tokens_per_s_per_gpu",
                       "tflops_per_gpu", "notes", "source", "recipe", "framework", "fsdp", "pipeline_layout",
                       "flex_backend",
                       *RECIPE_FIELDS))


def _near_miss(keys, known, where: str, what: str) -> None:
    import difflib

    from commbench.errors import CommbenchError
    for key in keys:
        if key in known or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        if close:
            raise CommbenchError(f"{where}: {what} {key!r} is not read: did you mean {close[0]!r}?")



def _folded(key: str) -> str:
    return key.lower().replace("-", "_").replace(" ", "_")


def _other_case(keys, known, where: str, what: str) -> None:
    """A read key in another case or with dashes ({"EP": 32}, "Seq-Len") is refused by name: dropped, an optional
    size would read as unset (1) and the run be modelled as another layout."""
    from commbench.errors import CommbenchError
    folded = {_folded(k): k for k in known}
    for key in keys:
        if isinstance(key, str) and key not in known and _folded(key) in folded:
            raise CommbenchError(f"{where}: {what} {key!r} is not read: did you mean {folded[_folded(key)]!r}? "
                                 "(names are lower case, as calibration-runs.json spells them)")


def unread_fields(row: dict[str, Any]) -> list[str]:
    """The row's keys (and recipe keys) no run is read from: kept as information, but named (calibrate prints
    them), since a size under another name ("virtual_pipeline_size") reads as unset."""
    recipe = row.get("recipe") if isinstance(row.get("recipe"), dict) else {}
    return [k for k in row if k not in READ_KEYS] + [f"recipe.{k}" for k in recipe if k not in RECIPE_FIELDS]


# The sizes a table leaves out where they do not apply, and its spellings of "not applicable" (the tables print
# n/a; tools/published_tables.py reads it as unset): such a size reads as unset, i.e. 1.
OPTIONAL_SIZES = ("cp", "vp", "ep", "etp")
NOT_APPLICABLE = frozenset({"n/a", "na", "-", "\u2013", "\u2014", ""})


def read_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row as the model reads it: an optional size spelled as a table's "n/a" is unset (None). The same
    object when nothing changes."""
    if not isinstance(row, dict):
        return row
    absent = [k for k in OPTIONAL_SIZES if isinstance(row.get(k), str) and row[k].strip().lower() in NOT_APPLICABLE]
    return dict(row, **{k: None for k in absent}) if absent else row


def check_row(row: dict[str, Any], where: str) -> None:
    """One line naming the first field a user's run lacks or holds badly (CommbenchError). A well-formed
    run the model does not cover (a model outside the zoo, a GPU without a preset, Megatron-FSDP, no
    tokens/s figure) is not an error here: published_runs marks it not modelled, with the reason."""
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import RELEASE_NAME, normalised_release
    row = read_row(row)
    _near_miss(row, READ_KEYS, where, "field")
    if isinstance(row.get("recipe"), dict):
        _near_miss(row["recipe"], frozenset(RECIPE_FIELDS), where, "recipe field")
        _other_case(row["recipe"], frozenset(RECIPE_FIELDS), where, "recipe field")
    _other_case(row, READ_KEYS, where, "field")
    for name in REQUIRED_FIELDS:
        if row.get(name) in (None, ""):
            raise CommbenchError(f"{where}: field {name!r} is missing (required: {', '.join(REQUIRED_FIELDS)})")
    for name in ("num_gpus", "seq_len", "gbs", "mbs", "tp", "pp", "cp", "vp", "ep", "etp"):
        value = row.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise CommbenchError(f"{where}: field {name!r} = {value!r}; allowed: a positive integer")
    if row["num_gpus"] > MAX_GPUS:
        raise CommbenchError(f"{where}: field 'num_gpus' = {row['num_gpus']!r}; allowed: at most {MAX_GPUS:,} "
                             "(commbench's bound on the GPUs of one run)")
    recipe = row.get("recipe") if isinstance(row.get("recipe"), dict) else {}
    for name, value in (*row.items(), *recipe.items()):   # past int64 in the step model's arrays: an overflow
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_SIZE:
            raise CommbenchError(f"{where}: field {name!r} = {value!r}; allowed: an integer below {MAX_SIZE:,}")
    if row.get("framework") not in (None, "") and str(row["framework"]).lower() not in ("megatron", "torchtitan"):
        # priced with its framework's charges (step_framework): another name would be priced as Megatron-LM silently
        raise CommbenchError(f"{where}: field 'framework' = {row['framework']!r}; allowed: megatron, torchtitan "
                             "(the framework whose charges price the run, as plan --framework)")
    if row.get("notes") is not None and not isinstance(row["notes"], str):   # read for FSDP=N, GA=N, w/o MTP
        raise CommbenchError(f"{where}: field 'notes' = {row['notes']!r}; allowed: text (e.g. \"FSDP=8; GA=4\")")
    parallel = row["tp"] * row["pp"] * (row.get("cp") or 1)
    if parallel > row["num_gpus"]:  # dp would be 0
        raise CommbenchError(f"{where}: field 'num_gpus' = {row['num_gpus']!r}; allowed: at least tp*pp*cp = {parallel}")
    _check_fsdp(row, where)
    _check_pipeline_layout(row, where)
    release = row.get("release")
    if release not in (None, "", "user") and not (isinstance(release, str) and RELEASE_NAME.fullmatch(
            normalised_release(release))):
        # a typo read no recipe at all, silently: the run was modelled with other flags than its release's
        raise CommbenchError(f"{where}: field 'release' = {release!r}; allowed: a NeMo release as a string, "
                             "\"YY.MM\" or \"YY.MM.NN\", MM a month 01 to 12, NN two digits (e.g. \"26.02.01\"), "
                             "or \"user\"")
    software = row.get("software")   # a log's release named by `calibrate --software` (its "release" is "user")
    if software is not None and not (isinstance(software, str)
                                     and RELEASE_NAME.fullmatch(normalised_release(software))):
        raise CommbenchError(f"{where}: field 'software' = {software!r}; allowed: a NeMo release as a string, "
                             "\"YY.MM\" or \"YY.MM.NN\" (the release a log's run ran under)")
    if row.get("tokens_per_s_per_gpu") is not None and (
            not isinstance(row["tokens_per_s_per_gpu"], (int, float)) or row["tokens_per_s_per_gpu"] <= 0):
        raise CommbenchError(f"{where}: field 'tokens_per_s_per_gpu' = {row['tokens_per_s_per_gpu']!r}; "
                             "allowed: a positive number")
    if row.get("precision") in (None, "") and not precision_unpublished(row.get("release")):
        # read as fp8 only where the table had no precision column: elsewhere a silent guess at the format
        raise CommbenchError(f"{where}: field 'precision' is missing; allowed: BF16, FP8, MXFP8, NVFP4 (only rows "
                             f"of release {', '.join(RELEASES_WITHOUT_PRECISION)}, whose tables have no precision "
                             "column, are read without one, as FP8)")
    try:
        if not unmodelled_precision(row.get("precision")):   # one the model lacks: published_runs lists it
            precision_of(row.get("precision"))
    except ValueError:
        raise CommbenchError(f"{where}: field 'precision' = {row.get('precision')!r}; allowed: "
                             f"{ALLOWED_PRECISIONS}") from None
    _check_gpu_runs(row, where)
    _check_release_runs(row, where)
    _check_flex_backend(row, where)
    recipe = row.get("recipe")
    if recipe is not None and not isinstance(recipe, dict):
        raise CommbenchError(f"{where}: field 'recipe' = {recipe!r}; allowed: an object of {', '.join(RECIPE_FIELDS)}")
    try:  # the recipe flags as Layout checks them, with the row named
        Layout(**recipe_flags(row, "", ""))
    except CommbenchError as exc:
        raise CommbenchError(f"{where}: {exc}") from None


def _check_flex_backend(row: dict[str, Any], where: str) -> None:
    """A row's flex dispatcher backend ("flex_backend", a log's --moe-flex-dispatcher-backend): one of the two, and one
    its release (a log's --software, else "release") has (recipes.flex_backend_refusal); refused in one line."""
    from commbench.errors import CommbenchError
    from commbench.planner.layout.recipes import FLEX_BACKENDS, flex_backend_refusal
    backend = row.get("flex_backend")
    if backend is None:
        return
    if backend not in FLEX_BACKENDS:
        raise CommbenchError(f"{where}: field 'flex_backend' = {backend!r}; allowed: {', '.join(FLEX_BACKENDS)} (the "
                             "flex dispatcher's --moe-flex-dispatcher-backend)")
    release = row_release(row)
    why = flex_backend_refusal(backend, release)
    if why:
        said = "--software" if row.get("software") else "field 'release'"
        raise CommbenchError(f"{where}: field 'flex_backend' = {backend!r} at {said} {release}: {why}, so the run "
                             "cannot have run there; give the release it ran under")


# The step model has one price for the flex dispatcher (step/moe_comm.py, kernels.dispatcher_sm_fraction): DeepEP's
# and HybridEP's kernels alike
FLEX_BACKEND_NOTE = ("flex dispatcher on {backend} (as the row states): the step model prices DeepEP and HybridEP "
                     "alike, one flex dispatcher price")


def row_model(row: dict[str, Any], model: ModelSpec) -> ModelSpec:
    """The zoo model as the row ran it: without its MTP layers for "w/o MTP" in the notes, and with the pipeline split
    it ran (its "pipeline_layout", a --pipeline-model-parallel-layout string: ModelSpec.pinned_split, which
    layout/split.py best_split returns at its pp x vp) where it states one; the step model's own best split otherwise."""
    if "w/o mtp" in (row.get("notes") or "").lower():
        model = dataclasses.replace(model, num_mtp_layers=0)
    if row.get("pipeline_layout"):
        model = dataclasses.replace(model, pinned_split=row["pipeline_layout"])
    return model


def _check_pipeline_layout(row: dict[str, Any], where: str) -> None:
    """One line for a "pipeline_layout" (the split the run ran) Megatron-LM would not build for the row's model at its
    pp x vp (layout/split.py split_from_layout), or at pp 1; a model outside the zoo is not modelled, not checked."""
    from commbench.errors import CommbenchError
    from commbench.planner.layout.split import split_from_layout
    text = row.get("pipeline_layout")
    if text is None:
        return
    if not isinstance(text, str) or not text.strip():
        raise CommbenchError(f"{where}: field 'pipeline_layout' = {text!r}; allowed: a Megatron-LM "
                             "--pipeline-model-parallel-layout string (e.g. \"Et*12|(t*12|)*2t*12L\")")
    name = _zoo_name(str(row["model"]))
    if name is None:
        return
    model = row_model(dict(row, pipeline_layout=None), load_model(name))
    pp, vp = int(row["pp"]), int(row.get("vp") or 1)
    try:
        split = split_from_layout(model, pp, text)
    except CommbenchError as exc:
        raise CommbenchError(f"{where}: field 'pipeline_layout': {exc}") from None
    if pp < 2 or split.vp != vp:
        raise CommbenchError(f"{where}: field 'pipeline_layout' = {text!r} has {len(split.stages)} stages; allowed: "
                             f"pp x vp = {pp} x {vp} stages, pp at least 2")


def _check_fsdp(row: dict[str, Any], where: str) -> None:
    """The "fsdp" field: the DP ranks Megatron-FSDP shards over (as the notes' FSDP=N), a whole number of them per
    replica (dp/N HSDP replicas, megatron-core's num_distributed_optimizer_instances, which must divide dp); 0 states
    no Megatron-FSDP (the release recipe's is then not read); one that the notes' FSDP=N contradicts is refused."""
    from commbench.errors import CommbenchError
    value = row.get("fsdp")
    if value is None:
        return
    dp = _dp_of(row) if sizes_fit(row) else None
    allowed = (f"0 (no Megatron-FSDP) or the DP ranks it shards over, a divisor of dp = num_gpus/(tp*pp*cp) = {dp} "
               "(dp/N HSDP replicas)" if dp else "0 (no Megatron-FSDP) or the DP ranks it shards over, N >= 1")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (dp and value and dp % value):
        raise CommbenchError(f"{where}: field 'fsdp' = {value!r}; allowed: {allowed}")
    if _fsdp_published(row.get("notes") or "") and _fsdp(row["notes"]) != value:
        raise CommbenchError(f"{where}: field 'fsdp' = {value!r} but its notes say FSDP={_fsdp(row['notes'])}; "
                             "allowed: one of them, or both the same")


def _fsdp(notes: str) -> int:
    """N of "FSDP=N" in a row's notes (any case, "FSDP: N" too); 0 when none."""
    match = re.search(r"\bFSDP\s*[=:]\s*(\d+)", notes or "", re.IGNORECASE)
    return int(match.group(1)) if match else 0


def fsdp_of(row: dict[str, Any]) -> int:
    """The DP ranks Megatron-FSDP shards over in a run: its "fsdp" field (check_row has checked it), else N of its
    notes' "FSDP=N" (the published tables' form); 0 for none."""
    value = row.get("fsdp")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _fsdp(row.get("notes") or "")


def fsdp_stated(row: dict[str, Any]) -> bool:
    """Whether a run states its Megatron-FSDP at all (an "fsdp" field, or FSDP=N in its notes, 0 included)."""
    return row.get("fsdp") is not None or _fsdp_published(row.get("notes") or "")


def _fsdp_published(notes: str) -> bool:
    """Whether a row's notes state its Megatron-FSDP at all ("FSDP=0" included): the newer tables' rows without an FSDP
    column do not, and their release recipe's Megatron-FSDP is the run's where its sizes are (recipe_fsdp)."""
    return bool(re.search(r"\bFSDP\s*[=:]\s*\d+", notes or "", re.IGNORECASE))


def recipe_fsdp(row: dict[str, Any], preset: str, model_name: str) -> dict[str, Any] | None:
    """The Megatron-FSDP flags (fsdp, distributed_optimizer, fsdp_replicas, fsdp_outer_optim) of a row whose notes
    publish no FSDP field (_fsdp_published) from its release recipe (release_recipe) where that recipe runs
    Megatron-FSDP and its sizes (MATCH_KEYS) are the row's: the run's configuration (Megatron-Bridge v0.6.0's
    Nemotron-3-Ultra recipes: HSDP over 64-GPU NVLink domains, 4 distributed-optimizer instances, outer sharding
    "optim", perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_fsdp_hsdp). None otherwise, a row the recipe
    table has no state for, or a replica count that does not divide the row's DP."""
    if fsdp_stated(row) or isinstance(row.get("recipe"), dict) or not sizes_fit(row):
        return None
    recipe = release_recipe(row, preset, model_name)
    if recipe is None or not recipe["sizes_match"] or not recipe["megatron_fsdp"] or recipe.get("release_note"):
        return None
    replicas = int(recipe.get("fsdp_replicas") or 1)
    if _dp_of(row) % replicas:
        return None
    return {"fsdp": True, "distributed_optimizer": True, "fsdp_replicas": replicas,
            "fsdp_outer_optim": bool(recipe.get("fsdp_outer_optim"))}


def recipe_mbs_if_row_contradicts(row: dict[str, Any], preset: str, model_name: str) -> tuple[int, str] | None:
    """(mbs, note) when a row contradicts itself: its published gradient-accumulation count (notes 'GA=N')
    differs from gbs / (mbs x dp), so one of its columns is wrong. Its release's recipe (the run's own
    configuration at the release commit) gives the mbs when that recipe's other sizes (num_gpus, tp, pp, vp,
    ep, gbs) are the row's; the note says whether that mbs gives the published GA (it need not: then the row's
    mbs and GA are both inconsistent with its gbs and dp). None otherwise (the row is taken as published)."""
    from commbench.planner.layout.recipes import recipe_entry
    ga = re.search(r"GA=(\d+)", row.get("notes") or "")
    mbs, gbs, dp = int(row["mbs"]), int(row["gbs"]), _dp_of(row)
    if not ga or gbs == int(ga.group(1)) * mbs * dp or not model_name:
        return None
    try:
        precision = precision_of(row.get("precision"))
    except ValueError:
        return None
    sizes = {k: row.get(k) for k in ("num_gpus", "tp", "pp", "gbs")}
    sizes.update(vp=row.get("vp") or 1, ep=row.get("ep") or 1)
    entry = recipe_entry(str(row.get("release") or ""), model_name, preset, precision, sizes)
    if entry is None or any(entry.get(k) != v for k, v in sizes.items()) or entry["mbs"] == mbs:
        return None
    chosen, published = int(entry["mbs"]), int(ga.group(1))

    def accumulation(m: int) -> str:   # gbs / (mbs x dp), as the run would accumulate with that mbs
        return f"GA {gbs // (m * dp)}" if gbs % (m * dp) == 0 else f"no whole GA ({gbs}/({m}x{dp}))"
    agrees = gbs == published * chosen * dp
    return chosen, (f"mbs {mbs} as published contradicts the row's GA={published} (gbs {gbs} = GA x mbs x dp {dp} "
                    f"gives {accumulation(mbs)}); mbs {chosen} from its release recipe ({entry['config']}, "
                    f"{entry['file']}@{entry['commit'][:7]}), whose other sizes are the row's, "
                    + (f"gives GA={published} as published" if agrees else
                       f"gives {accumulation(chosen)}, not GA={published} either"
                       + (f" (GA={published} would need mbs {gbs // (published * dp)})"
                          if gbs % (published * dp) == 0 else "")
                       + ": the row's mbs and GA cannot both be right; the recipe's mbs is modelled"))


# A run's published tokens/s/GPU says which layout ran where a table's layout column and its release's recipe disagree
# and the run is published at both values: identical layouts published by two releases differ by a median 1.9%
# (40 pairs of commbench/data/calibration-runs.json, same model, GPU, precision, GPU count, sequence and sizes, global
# batch included), so a run within 5% of one and far from the other is that one.
SAME_RUN_TOLERANCE = 0.05
LAYOUT_SIZES = ("tp", "pp", "vp", "ep")


def _sizes_of(row: dict[str, Any]) -> dict[str, int]:
    """The row's MATCH_KEYS sizes, a table's "n/a" read as 1."""
    return {"num_gpus": int(row["num_gpus"]), "tp": int(row["tp"]), "pp": int(row["pp"]), "vp": int(row.get("vp") or 1),
            "ep": int(row.get("ep") or 1), "mbs": int(row["mbs"]), "gbs": int(row["gbs"])}


def recipe_size_if_release_contradicts(row: dict[str, Any], preset: str, model_name: str,
                                       table: tuple[dict[str, Any], ...]) -> tuple[str, int, str] | None:
    """(size, value, note) when a row's published parallel size (tp, pp, vp or ep) is contradicted by its own release
    and its throughput: (1) its release's recipe (release_recipe: the run's configuration at the release's commit, not
    a stand-in release's nor a later commit's) has every other size of the row (num_gpus, the other parallel sizes,
    mbs, gbs) and its Megatron-FSDP, and another value of this one; (2) a run of the same model, GPU, precision, GPU
    count and sequence length in `table`, published by the row's release or a later one at the recipe's value (its
    other parallel sizes and mbs the row's; its global batch, i.e. its gradient accumulation, may differ), is within
    SAME_RUN_TOLERANCE of the row's tokens/s/GPU; (3) no such run published at the row's own value (the row aside)
    is. Then the table's column, not the run, is taken to be wrong, and the run is modelled at the recipe's value
    (the note names the recipe and both runs); None otherwise (the row is taken as published). A row that
    contradicts itself (GA) is recipe_mbs_if_row_contradicts'."""
    from commbench.planner.layout.recipes import normalised_release
    from commbench.planner.models.release_data import release_version
    release, tokens = row.get("release"), row.get("tokens_per_s_per_gpu")
    if not isinstance(release, str) or release.strip() in ("", "user") or not tokens or not model_name:
        return None
    recipe = release_recipe(row, preset, model_name)
    if recipe is None or recipe["sizes_match"] or recipe["release_note"]:
        return None
    own = _sizes_of(row)
    differ = [k for k in recipe["sizes"] if recipe["sizes"][k] != own[k]]
    fsdp = bool(fsdp_of(row))
    if len(differ) != 1 or differ[0] not in LAYOUT_SIZES or recipe["megatron_fsdp"] != fsdp:
        return None
    size, value = differ[0], int(recipe["sizes"][differ[0]])
    try:
        precision, since = precision_of(row.get("precision")), release_version(normalised_release(release))
    except ValueError:
        return None

    def same_run(other: dict[str, Any]) -> bool:   # the row's run at another value of `size` or global batch
        try:
            sizes, later = _sizes_of(other), release_version(normalised_release(str(other.get("release") or "")))
            same_precision = precision_of(other.get("precision")) == precision
        except (ValueError, KeyError, TypeError):
            return False
        return (other is not row and same_precision and later >= since and bool(other.get("tokens_per_s_per_gpu"))
                and _zoo_name(str(other.get("model", ""))) == model_name
                and _preset_name(str(other.get("gpu", ""))) == preset
                and (other.get("seq_len"), int(other.get("cp") or 1)) == (row.get("seq_len"), int(row.get("cp") or 1))
                and all(sizes[k] == own[k] for k in ("num_gpus", "mbs", *LAYOUT_SIZES) if k != size))

    def near(other: dict[str, Any]) -> bool:
        return abs(float(other["tokens_per_s_per_gpu"]) / float(tokens) - 1) <= SAME_RUN_TOLERANCE
    runs = [o for o in table if isinstance(o, dict) and same_run(o)]
    at_recipe = [o for o in runs if _sizes_of(o)[size] == value and near(o)]
    at_row = [o for o in runs if _sizes_of(o)[size] == own[size]]
    if not at_recipe or any(near(o) for o in at_row):
        return None

    def named(o: dict[str, Any]) -> str:
        tokens_o = float(o["tokens_per_s_per_gpu"])
        return f"{o.get('release')} {size.upper()}{_sizes_of(o)[size]} gbs {o['gbs']}: {tokens_o:,.0f}"
    evidence = "; ".join(named(o) for o in at_recipe)
    against = f", not the {size.upper()}{own[size]} run{'s' if len(at_row) > 1 else ''} published since " \
              f"({'; '.join(named(o) for o in at_row)})" if at_row else ""
    commit, file = recipe["source"].split("/blob/", 1)[1].split(" ")[0].split("/", 1)
    return size, value, (f"{size} {own[size]} as published contradicts its release: the release recipe "
                         f"{recipe['config']} ({file}@{commit[:7]}), whose other sizes are the row's, runs {size} "
                         f"{value}, and the row's {float(tokens):,.0f} tokens/s/GPU is the {size.upper()}{value} run's "
                         f"(within {SAME_RUN_TOLERANCE:.0%}: {evidence}){against}: {size} {value} is modelled")


def sizes_fit(row: dict[str, Any]) -> bool:
    """num_gpus a multiple of tp*pp*cp (whole DP ranks) and of ep*etp*pp (Megatron-Core's expert grid): else the
    layout rules (world, expert_fold) name the sizes, rather than an FSDP shard count over a fractional DP."""
    gpus, pp = int(row["num_gpus"]), int(row["pp"])
    return not (gpus % (int(row["tp"]) * pp * int(row.get("cp") or 1))
                or gpus % (int(row.get("ep") or 1) * int(row.get("etp") or 1) * pp))


def _dp_of(row: dict[str, Any]) -> int:
    return int(row["num_gpus"]) // (int(row["tp"]) * int(row["pp"]) * int(row.get("cp") or 1))


def published_runs(rows: tuple[dict[str, Any], ...] | None = None,
                   where: tuple[str, ...] | None = None) -> list[PublishedRun]:
    """Every row as a PublishedRun: modelled (model, preset, layout) or not (skip_reason). `where`: each row's
    place, as its messages name it (default "row N")."""
    from commbench.data.reference import calibration_runs
    out = []
    rows = tuple(read_row(r) for r in (rows if rows is not None else calibration_runs()))
    places = tuple(where) if where is not None else tuple(f"row {i + 1}" for i in range(len(rows)))
    assert len(places) == len(rows), (len(places), len(rows))
    for i, r in enumerate(rows):
        name = _zoo_name(str(r["model"]))
        preset = _preset_name(str(r["gpu"]))
        reason = ""
        if name is None:
            reason = f"model not in the zoo: field 'model' = {r['model']!r} (`commbench plan --help` lists the zoo)"
        elif preset is None:
            reason = f"GPU has no preset: field 'gpu' = {r['gpu']!r} (known: {', '.join(sorted(PRESETS))})"
        elif sizes_fit(r) and fsdp_of(r) and _dp_of(r) % fsdp_of(r):
            reason = (f"Megatron-FSDP over {fsdp_of(r)} of {_dp_of(r)} DP ranks (not a divisor: "
                      "no whole number of HSDP replicas)")
        elif lacking := unmodelled_precision(r.get("precision")):
            reason = lacking
        elif not r.get("tokens_per_s_per_gpu"):
            reason = "no tokens_per_s_per_gpu to compare with"
        if reason:
            out.append(PublishedRun(index=i, row=r, model=None, preset=preset, layout=None, skip_reason=reason,
                                    where=places[i]))
            continue
        model = load_model(name)
        # whose Megatron-Bridge recipes the run reads: its own, or (hf:PATH) the zoo model whose network it is, as
        # `plan` reads them (layout/recipe_model.py); before "w/o MTP" drops a layer no recipe model lacks
        recipes_of = recipe_model(model)
        model = row_model(r, model)   # w/o MTP, the split it ran
        tp, pp, cp = int(r["tp"]), int(r["pp"]), int(r.get("cp") or 1)
        resized = recipe_size_if_release_contradicts(r, preset, recipes_of, rows)
        published = r
        if resized:   # modelled at its release recipe's size: the row as read from here on, PublishedRun.row stays
            r = dict(r, **{resized[0]: resized[1]})
        flags = recipe_flags(r, preset, recipes_of)
        if fsdp_of(r) and sizes_fit(r):  # Megatron-FSDP over all of DP, or part of it as HSDP
            # (step/fsdp.py); sizes that do not fit the GPUs: the layout rules (world, expert_fold) name them
            flags.update(fsdp=True, distributed_optimizer=True, fsdp_replicas=_dp_of(r) // fsdp_of(r))
        elif fsdp_of_recipe := recipe_fsdp(r, preset, recipes_of):   # no FSDP field: the release recipe's, sizes alike
            flags.update(fsdp_of_recipe)
        unrun, hybrid_note = hybrid_run_features(r, model, flags, int(r.get("ep") or 1))
        if unrun:   # a run its megatron-core cannot have run: refused by load_runs, listed as not modelled here
            out.append(PublishedRun(index=i, row=published, model=None, preset=preset, layout=None, skip_reason=unrun,
                                    where=places[i], cannot_have_run=True))
            continue
        fixed = recipe_mbs_if_row_contradicts(r, preset, recipes_of)
        layout = Layout(tp=tp, pp=pp, vp=int(r.get("vp") or 1), ep=int(r.get("ep") or 1),
                        etp=int(r["etp"]) if r.get("etp") else 1, cp=cp,
                        dp=int(r["num_gpus"]) // (tp * pp * cp), mbs=fixed[0] if fixed else int(r["mbs"]),
                        gbs=int(r["gbs"]),
                        precision=precision_of(r.get("precision")), **flags)
        broken = broken_rule_text(model, layout, published)
        if broken:
            out.append(PublishedRun(index=i, row=published, model=None, preset=preset, layout=None, skip_reason=broken,
                                    where=places[i]))
            continue
        stood_in = _release_note(r, preset, recipes_of, layout.precision)
        assumed = flags_assumed(r, preset, recipes_of, layout.mbs)
        if stood_in and release_recipe(r, preset, recipes_of) is None:   # it says the default recipe's flags stood in
            assumed = ""
        same = (f"{name} has {recipes_of}'s architecture: {recipes_of}'s recipes are read, as plan reads them"
                if recipes_of != model.name else "")
        notes = (same, precision_note(r.get("precision")), resized[2] if resized else "", fixed[1] if fixed else "",
                 stood_in, assumed, hybrid_note,
                 FLEX_BACKEND_NOTE.format(backend=r["flex_backend"]) if r.get("flex_backend") else "")
        out.append(PublishedRun(index=i, row=published, model=model, preset=preset, layout=layout,
                                layout_note="; ".join(n for n in notes if n), where=places[i]))
    return out


def row_release(row: dict[str, Any]) -> str | None:
    """The NeMo release a row's run ran under: a log's --software (its row's "software"), else its "release";
    None for "user" or none."""
    for key in ("software", "release"):
        value = row.get(key)
        if isinstance(value, str) and value.strip() not in ("", "user"):
            return value
    return None


def hybrid_run_features(row: dict[str, Any], model: ModelSpec, flags: dict[str, Any], ep: int) -> tuple[str, str]:
    """(refusal, note) for a Megatron-LM row of a hybrid (MambaModel) model, by the rule plan refuses pins with
    (layout/hybrid_features.py megatron_hybrid_unrun): a feature its megatron-core cannot run (the run stops before its first
    iteration) is the refusal, naming the field, the release and the source; one it ignores is priced as the run ran
    it (`flags` updated in place) and the note says so. ('', '') for any other row."""
    from commbench.planner.layout.hybrid_features import megatron_hybrid_unrun
    if step_framework(row) != "megatron" or not model.is_hybrid:
        return "", ""
    release = row_release(row)
    core = _core_of(release)
    unrun = megatron_hybrid_unrun(model, {**flags, "ep": ep}, core)
    ran = f"megatron-core {core[0]}.{core[1]} (NeMo {release})" if core else \
        "Megatron-LM core_v0.16.1 (the plans' release; the row names none)"
    fails = [u for u in unrun if u.kind == "fails"]
    if fails:
        return (f"{fails[0].what} (--overlap-moe-expert-parallel-comm) on {model.name}, a hybrid "
                f"(MambaModel) model, under {ran}: {fails[0].why}; the run stops before its first iteration, so "
                "this row cannot be a run's: give the run's own arguments (without that flag)"), ""
    for u in unrun:
        flags.update(u.ran)
    return "", "; ".join(f"{u.what} priced as not run ({', '.join(f'{k}={v!r}' for k, v in u.ran.items())}): "
                         f"under {ran}, {u.why}" for u in unrun)


def _core_of(release: str | None) -> tuple[int, int] | None:
    """(MAJOR, MINOR) of the megatron-core `release` runs (recipes.json; its stand-in's for one the table lacks)."""
    from commbench.planner.layout.recipes import core_version, resolve_release
    if release is None:
        return None
    stand, _ = resolve_release(release)
    return core_version(stand) if stand is not None else None


def flags_assumed(row: dict[str, Any], preset: str, model_name: str, mbs: int | None = None) -> str:
    """'' when a run's recipe flags are facts: the row states its own (a "recipe" object or top-level recipe fields),
    or names no NeMo release (none, "user": the run's own software, no recipe implied), or the recipe of its release
    it reads (release_recipe) has its sizes (MATCH_KEYS, with `mbs`, the micro-batch the run is modelled with, for
    the row's) and its Megatron-FSDP. Otherwise why the flags are assumed: no recipe
    is read for the run (the default recipe's flags), or the nearest recipe's sizes are not the row's, so another
    configuration than the one that produced the row's number gave them. One rule for every row: published_runs
    says it in the layout_note, benchmarks/vendor_layouts.py counts such rows apart."""
    if isinstance(row.get("recipe"), dict) or any(k in row for k in RECIPE_FIELDS):
        return ""
    release = row.get("release")
    if not isinstance(release, str) or release.strip() in ("", "user"):   # a user's software: no recipe is implied
        return ""
    recipe = release_recipe(row, preset, model_name)
    if recipe is None:
        return (f"recipe flags assumed: the default recipe's (no recipe is read for {model_name} on {preset} at "
                f"{row.get('release')})")
    given = {"num_gpus": row.get("num_gpus"), "tp": row.get("tp"), "pp": row.get("pp"), "vp": row.get("vp") or 1,
             "ep": row.get("ep") or 1, "mbs": row.get("mbs") if mbs is None else mbs, "gbs": row.get("gbs")}
    differ = [f"{k} {recipe['sizes'][k]} vs the row's {given[k]}" for k in recipe["sizes"]
              if given.get(k) is not None and int(given[k]) != recipe["sizes"][k]]
    fsdp = fsdp_of(row)
    if bool(fsdp) != recipe["megatron_fsdp"] and not recipe_fsdp(row, preset, model_name):
        differ.append(f"Megatron-FSDP {'on' if recipe['megatron_fsdp'] else 'off'} vs the row's "
                      f"{f'FSDP={fsdp}' if fsdp else 'none'}")
    if not differ:
        return ""
    return (f"recipe flags assumed: those of {recipe['release']}'s nearest recipe {recipe['config']}, which is not "
            f"this run's configuration ({'; '.join(differ)})")


def _release_note(row: dict[str, Any], preset: str, model_name: str, precision: str) -> str:
    """Whose recipe stood in for a row's release the recipe table lacks (26.10 -> 26.08), also when that release
    has no recipe for the run and the defaults stood in, or which later commit's recipe models it (release_recipe);
    '' for a release the table has, "user" or none."""
    from commbench.planner.layout.recipes import resolve_release
    recipe = release_recipe(row, preset, model_name)
    if recipe is not None:
        return recipe.get("release_note", "")
    release = row.get("release")
    if not isinstance(release, str) or release.strip() in ("", "user"):
        return ""
    stand, note = resolve_release(release)
    if not note:
        return ""
    if stand is None:
        return f"{note}: the default recipe flags"
    return f"{note}, and {stand} has no recipe for {model_name} on {preset} at {precision}: the default recipe flags"


# Per layout rule (layout.spec.RULES), the optional row fields it reads: where the row leaves one out, its value
# came from the row's release recipe or the defaults above, and the refusal says so.
ROW_RULE_FIELDS = {"expert_fold": ("ep", "etp"), "experts": ("ep",), "pipeline": ("vp",),
                   "hsdp": ("ep", "etp"), "offload": ("cpu_offload_layers", "recompute"),
                   "recompute_layers": ("recompute_layers", "recompute")}


def broken_rule_text(model: ModelSpec, layout: Layout, row: dict[str, Any]) -> str:
    """'' when the run's layout keeps every layout rule; else the first rule it breaks, in words (layout.spec.RULES),
    with the row's fields and values that break it, e.g. "its layout breaks the batch rule: gbs must be a multiple
    of mbs*dp: gbs = 500 is not a multiple of mbs*dp = 32 (4*8); dp = num_gpus/(tp*pp*cp) = 8/1 = 8"."""
    from commbench.planner.layout.spec import RULES, first_broken_rule, layout_violations, rule_detail
    num_gpus, seq_len = int(row["num_gpus"]), int(row["seq_len"])
    name = first_broken_rule(int(layout_violations(model, LayoutArrays.from_layouts([layout]), num_gpus, seq_len)[0]))
    if not name:
        return ""
    tp, pp, cp = layout.tp, layout.pp, layout.cp
    if name == "world":  # dp is not a row field: num_gpus / (tp*pp*cp), which must be whole
        return (f"its layout breaks the world rule: num_gpus must be a multiple of tp*pp*cp (dp = num_gpus/(tp*pp*cp) "
                f"data-parallel replicas, and tp*cp*dp*pp must equal num_gpus): num_gpus = {num_gpus}, tp*pp*cp = "
                f"{tp * pp * cp} ({tp}*{pp}*{cp}) leaves {num_gpus % (tp * pp * cp)} GPU(s) over")
    detail = rule_detail(name, model, layout, num_gpus, seq_len)
    if name in ("expert_fold", "batch", "hsdp"):
        detail += f"; dp = num_gpus/(tp*pp*cp) = {num_gpus}/{tp * pp * cp} = {layout.dp}"
    recipe = row.get("recipe") if isinstance(row.get("recipe"), dict) else {}
    unstated = [f for f in ROW_RULE_FIELDS.get(name, ()) if row.get(f) is None and f not in recipe]
    if unstated:
        detail += ("; not in the row, so from its release's recipe or the defaults: "
                   + ", ".join(f"{f} = {getattr(layout, f)}" for f in unstated))
    return f"its layout breaks the {name} rule: {dict(RULES)[name]}: {detail}"


@dataclass(frozen=True, kw_only=True)
class Predictions:
    runs: list[PublishedRun]           # the modelled ones, in order
    predicted_tokens: np.ndarray
    published_tokens: np.ndarray
    fits: np.ndarray
    valid: np.ndarray
    mem_total_bytes: np.ndarray
    mem_capacity_bytes: np.ndarray
    model_tflops_per_gpu: np.ndarray | None = None   # predicted model TFLOP/s/GPU (at the predicted tokens/s)
    peak_tflops: np.ndarray | None = None            # the GPU's datasheet peak in the run's precision

    @property
    def abs_pct_error(self) -> np.ndarray:
        return np.abs(self.predicted_tokens / self.published_tokens - 1.0) * 100.0


def run_megatron_core(row: dict[str, Any]) -> tuple[int, int] | None:
    """(MAJOR, MINOR) of the megatron-core a published run's release runs (recipes.json releases megatron_core; a
    release the table lacks reads its stand-in's, as its recipes do); None (the plans' 0.16.1) for a row of no
    release, "user", or one older than the table. What the step model reads of it: Megatron-FSDP's unit set
    (step/fsdp.py mamba_units)."""
    from commbench.planner.layout.recipes import core_version, resolve_release
    release = row.get("release")
    if not isinstance(release, str) or release.strip() in ("", "user"):
        return None
    stand, _ = resolve_release(release)
    return core_version(stand) if stand is not None else None


def predict_runs(runs: list[PublishedRun], calibration: Calibration = CALIBRATED) -> Predictions:
    """Predicted tokens/s/GPU for each modelled run (grouped into one vectorised call per system)."""
    from commbench.planner.step.evaluate import evaluate_layouts
    from commbench.planner.step.loss_memory import run_loss
    modelled = [r for r in runs if r.layout is not None]
    n = len(modelled)
    pred, fits, valid = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
    mem, cap, model_tflops, peak = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    groups: dict[tuple, list[int]] = {}
    for j, r in enumerate(modelled):
        key = (r.model, r.preset, int(r.row["num_gpus"]), int(r.row["seq_len"]), step_framework(r.row),
               run_megatron_core(r.row))
        groups.setdefault(key, []).append(j)
    for (model, preset, num_gpus, seq_len, framework, core), idx in groups.items():
        fabric = _preset(preset, num_gpus)
        bd = evaluate_layouts(model, fabric, LayoutArrays.from_layouts([modelled[j].layout for j in idx]),
                              seq_len=seq_len, calibration=calibration, framework=framework, megatron_core=core,
                              loss=run_loss(framework))   # the cross entropy the run ran (TE's for Megatron)
        pred[idx], fits[idx], valid[idx] = bd.tokens_per_s_per_gpu, bd.fits, bd.valid
        mem[idx], cap[idx] = bd.mem_total_bytes, bd.mem_capacity_bytes
        model_tflops[idx], peak[idx] = bd.model_tflops_per_gpu, bd.peak_tflops
    published = np.array([float(r.row["tokens_per_s_per_gpu"]) for r in modelled])
    return Predictions(runs=modelled, predicted_tokens=pred, published_tokens=published, fits=fits, valid=valid,
                       mem_total_bytes=mem, mem_capacity_bytes=cap, model_tflops_per_gpu=model_tflops, peak_tflops=peak)


_PRESET_CACHE: dict[tuple[str, int], Any] = {}


def _preset(name: str, num_gpus: int):
    from commbench.costmodel import load_preset
    key = (name, num_gpus)
    if key not in _PRESET_CACHE:
        _PRESET_CACHE[key] = load_preset(name, num_gpus=num_gpus)
    return _PRESET_CACHE[key]
