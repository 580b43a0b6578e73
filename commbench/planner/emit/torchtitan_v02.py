"""What a TorchTitan 0.2 TOML must say beyond the layout for the launch to be the run the plan priced.

Sources: torchtitan v0.2.2 (github:pytorch/torchtitan, tag v0.2.2 = 73a0e69).
- Linear converters skip a module when any of their `filter_fqns` is a substring of its FQN
  (components/quantization/utils.py module_filter_fn). The defaults (config/job_config.py:741, :784) are
  Float8Linear.filter_fqns = [] (every Linear, lm_head and the MoE router gate included) and MXLinear.filter_fqns =
  ["output"] (the router gate included). The module names at v0.2.2: the head is `output` (models/{llama3,qwen3,
  deepseek_v3}/model/model.py `self.output = nn.Linear`), the router gate `layers.N.moe.router.gate`
  (models/moe/moe.py MoE.router = TokenChoiceTopKRouter, whose `self.gate = nn.Linear`). TorchTitan's own TOMLs filter
  them: llama3_405b.toml:64 ["output"], deepseek_v3_671b.toml:74 and llama4_17bx128e.toml:69/72 ["output",
  "router.gate"]. The plan prices what the 0.3 launch converts (step/module_precision.py): the router gate and the head
  in BF16, but for a dense model's MXFP8 converter, which converts every Linear (0.3.0's llama3_8b_mxfp8).
- Compile defaults off (config/job_config.py:722 Compile.enable = False), so a TOML without [compile] runs the model
  eager, where the step model prices fused kernels: every 0.2 launch compiles the model and the loss, as the 0.3 launch
  does (torchtitan.TITAN_COMPILE) and as llama3_405b.toml:57-59, the shipped float8 TOML, does.
  MXLinearConverter asserts "TP not yet supported with torch.compile for mxfp8" (components/quantization/mx.py:46-52),
  so an MXFP8 layout with TP > 1 has no compiled 0.2 launch: refused.
- fp8: Float8Linear.recipe_name defaults to None (config/job_config.py:738), which Float8LinearConverter trains as
  "Float8 tensorwise scaled training" (components/quantization/float8.py), the Megatron arguments' recipe;
  Float8GroupedMMConverter quantizes the experts "to use dynamic float8 rowwise quantization" whatever it says. Its
  float8 TP (enable_float8_tensorwise_tp) never engages: models/*/infra/parallelize.py tests "float8" in
  job_config.model.converters, which holds "quantize.linear.float8" (step/tp_comm.py prices bf16 gathers).
- Float8GroupedMMConverter.__init__ (the fp8 experts' converter, quantize.grouped_mm.float8) asserts
  pipeline_parallel_degree == 1 and context_parallel_degree == 1: "Float8 MoE training prototype does not yet support
  pipeline parallelism" / "... context parallelism" (components/quantization/float8.py:193-198). MXGroupedMMConverter
  (components/quantization/mx.py:99-136) asserts neither, nor do 0.3.0's Float8GroupedExpertsConverter and
  MXFP8GroupedExpertsConverter (components/quantization/float8.py, mx.py). gpt_oss's model args refuse any CP:
  GptOssModelArgs.update_from_config raises NotImplementedError("CP support for gpt-oss model is still in progress.")
  (models/gpt_oss/model/args.py:89-92).
- With no [model] hf_assets_path and no [training] dataset TorchTitan 0.2.2 reads its test tokenizer
  "./tests/assets/tokenizer" and trains on "c4_test" (config/job_config.py:107, :244).
"""

from __future__ import annotations

from typing import Any

ROUTER_GATE_02 = "router.gate"
OUTPUT_02 = "output"
# [compile] TorchTitan 0.2.2's Compile reads (enable, components, backend): the model and the loss compiled
TITAN_COMPILE_02 = {"enable": True, "components": ["model", "loss"]}
TITAN_COMPILE_NOTE_02 = ("the launch compiles the model and the loss with torch.compile ([compile] enable = true; "
                         "TorchTitan 0.2.2 defaults to eager): the prediction charges fused kernels and no eager term; "
                         "compile time before the first step is not priced")
_KIND = {"fp8": "float8", "mxfp8": "mx"}


def linear_filter_fqns_02(precision: str, is_moe: bool) -> list[str] | None:
    """The quantize.linear.<kind>.filter_fqns that keep in BF16 what the prediction prices in BF16 (module docstring):
    the head and, for a MoE model, the router gate; a dense model's MXFP8 converts every Linear (an empty list, where
    0.2.2's default would skip the head). None for a precision with no 0.2 linear converter."""
    if precision not in _KIND:
        return None
    if is_moe:
        return [OUTPUT_02, ROUTER_GATE_02]
    return [OUTPUT_02] if precision == "fp8" else []


def linear_quantize_02(precision: str, is_moe: bool) -> dict[str, Any]:
    """The [quantize.linear.<kind>] table of a quantized 0.2 launch ({} for bf16)."""
    fqns = linear_filter_fqns_02(precision, is_moe)
    return {} if fqns is None else {f"quantize.linear.{_KIND[precision]}": {"filter_fqns": fqns}}


def linear_filter_note_02(precision: str, is_moe: bool) -> str | None:
    """Where the 0.2 launch converts a module TorchTitan 0.2.2's default would not (a dense model's MXFP8 head)."""
    if precision != "mxfp8" or is_moe:
        return None
    return ("quantize.linear.mx.filter_fqns = [] converts the output layer too (TorchTitan 0.2.2's default "
            "skips it), as the 0.3 launch does (llama3_8b_mxfp8's converter) and as --framework torchtitan prices")


def fp8_recipe_note_02(is_moe: bool) -> str:
    """The fp8 recipes a 0.2 launch trains (module docstring), beside what the prediction charges."""
    experts = (", its MoE experts' grouped GEMMs rowwise (Float8GroupedMMConverter: torchao's only MoE recipe)"
               if is_moe else "")
    return ("fp8 recipe: TorchTitan 0.2.2 trains its Linear layers with torchao's tensorwise scaling (the TOML leaves "
            "quantize.linear.float8.recipe_name unset: per-tensor dynamic scales, as the Megatron arguments' "
            f"--fp8-recipe tensorwise){experts}; its TP all-gathers bf16 (its float8 TP never engages), as priced; "
            "the prediction charges one fp8 GEMM rate for every recipe")


def compile_refusal_02(precision: str, tp: int) -> str | None:
    """Why a 0.2 launch of this layout cannot be compiled (module docstring), or None."""
    if precision == "mxfp8" and tp > 1:
        return (f"TorchTitan 0.2.2's MXLinearConverter refuses torch.compile with tensor_parallel_degree > 1 "
                f"(components/quantization/mx.py: 'TP not yet supported with torch.compile for mxfp8'), and the "
                f"prediction charges compiled kernels: plan with tp=1 or --torchtitan-version 0.3 (tp={tp})")
    return None


def parallel_limits_02(module: str, is_moe: bool, precision: str) -> dict[str, tuple[str, bool]]:
    """Layout fields (pp, cp) a 0.2 launch of this model and precision runs only at 1 -> (why, one clause; whether a
    0.3 launch runs it above 1) (module docstring: gpt_oss's CP, which 0.3.0 refuses too, search/frameworks.py
    titan_cp_refusal; the fp8 experts' converter's PP and CP, which 0.3.0's converter takes)."""
    out = {}
    if module == "gpt_oss":
        out["cp"] = ("TorchTitan 0.2.2's gpt_oss refuses context parallelism (models/gpt_oss/model/args.py "
                     "update_from_config: 'CP support for gpt-oss model is still in progress.')", False)
    if is_moe and precision == "fp8":
        for key, what in (("pp", "pipeline parallelism"), ("cp", "context parallelism")):
            out.setdefault(key, ("TorchTitan 0.2.2's fp8 MoE experts converter refuses it (components/quantization/"
                                 f"float8.py Float8GroupedMMConverter: 'Float8 MoE training prototype does not yet "
                                 f"support {what}')", True))
    return out


def data_note_02(model_name: str, hf_assets_set: bool) -> str:
    """What the user must still set in the TOML: the tokenizer folder (unless the plan set it) and the dataset."""
    tokenizer = ("" if hf_assets_set else
                 f"[model] hf_assets_path to {model_name}'s tokenizer folder (TorchTitan 0.2.2 defaults to its test "
                 "tokenizer ./tests/assets/tokenizer) and ")
    return (f"set {tokenizer}[training] dataset / dataset_path to your data (TorchTitan 0.2.2 defaults to c4_test, "
            "its 2K-sample test set): the plan sets no path it does not know")


# What TorchTitan 0.3.0 can be told and 0.2.2's TOML cannot (v0.2.2 config/job_config.py has neither option):
# field -> (what a 0.2.2 launch runs, why). A 0.2 search fixes the field there (emit/torchtitan.py titan_02_pins); a
# layout planned otherwise (a Megatron plan's 0.2 section) says in a note what its launch runs instead.
FEATURES_03_ONLY: dict[str, tuple[object, str]] = {
    "cuda_graph": ("none", "TorchTitan 0.2.2 has no CUDA-graph option (the whole-step graph, "
                           "training.disable_cuda_graphs, is TorchTitan 0.3.0's: config/configs.py:66, "
                           "trainer.py:613)"),
    "sequence_parallel": (True, "TorchTitan 0.2.2 applies sequence parallel whenever TP is on (every model's "
                                "infra/parallelize.py shards its norms with SequenceParallel; turning it off is "
                                "TorchTitan 0.3.0's parallelism.enable_sequence_parallel, config/configs.py:160)"),
}


def runs_otherwise_02(layout) -> list[str]:
    """A note for each FEATURES_03_ONLY field where `layout` asks what a 0.2.2 launch does not run (sequence parallel
    matters only at tp > 1)."""
    notes = []
    for key, (runs, why) in FEATURES_03_ONLY.items():
        value = getattr(layout, key)
        if value != runs and not (key == "sequence_parallel" and layout.tp == 1):
            notes.append(f"{why}: the launch runs {key}={str(runs).lower()}; the prediction assumed "
                         f"{key}={str(value).lower()} (plan with --torchtitan-version 0.3, or with --framework "
                         "torchtitan --torchtitan-version 0.2 to charge what it runs)")
    return notes
