"""TorchTitan 0.3 config functions the plan writes where no shipped one trains the model in the precision.

TorchTitan 0.3 takes the model and its quantization from a Python config function
(`--module M --config F`; ConfigManager imports `M.config_registry` or `M` itself, so a module on
PYTHONPATH works as well as a shipped one). Quantization converters act on the model config when the
model spec is built (model_registry(..., converters=[...]) in every shipped *_float8 / *_mxfp8 config).
When no shipped function matches, the plan writes `commbench_torchtitan.py` next to plan.json: a
function that starts from the shipped config of the same model (its optimizer, data, checkpointing and
activation checkpointing), swaps the model spec's flavor where the zoo model is another shipped flavor
(Qwen3-235B-A22B: flavor "235B-A22B" on qwen3_30b_a3b's recipe, the only shipped Qwen3 MoE recipe) or builds
the model itself where no flavor is it (`model_lines`: an MLA model on deepseek_v3_16b's recipe, torchtitan_mla.py), and
applies the converters the shipped quantized configs use, built for a compiled model (model_compile_enabled=True;
the launch compiles the model and the loss in every precision: torchtitan.TITAN_COMPILE, a command-line override):
- fp8: Float8LinearConverter (lm_head and the router gate kept in BF16, as deepseek_v3_671b_float8)
  + Float8GroupedExpertsConverter for MoE;
- mxfp8: MXFP8LinearConverter (every Linear, as llama3_8b_mxfp8, for a dense model; for MoE the attention,
  shared-expert and dense-FFN Linears only, lm_head and the router gate kept in BF16, as deepseek_v3_debugmodel_mxfp8)
  + MXFP8GroupedExpertsConverter with token groups padded to 128 (sm_100's CuTeDSL kernel) for MoE; a MoE model
  whose expert GEMMs' K is not a multiple of 128 (gpt-oss: 2880) is refused (mxfp8_experts_refusal);
- nvfp4: NVFP4LinearConverter over the decoder layers (lm_head in BF16, as qwen3_debugmodel_nvfp4);
  TorchTitan 0.3 has no NVFP4 grouped-experts converter, so MoE models are refused in NVFP4.
A flavor that builds another RoPE, norm epsilon, router or swiglu limit than the model asked for
(torchtitan.flavor_fix_lines), or balances experts by an expert bias the model does not have (torchtitan.balancing_lines),
gets a function too, from the shipped config where one trains the precision, setting the model's values; a generated
model gets the same lines after its own (its builder hard-codes the flavors' router and load_balance_coeff).
"""

from __future__ import annotations

import json

from commbench.planner.layout.precision import MXFP8_PAD_MULTIPLE, mxfp8_experts_refusal  # noqa: F401 - re-exported

MODULE_NAME = "commbench_torchtitan"
MODULE_FILE = f"{MODULE_NAME}.py"

_CONVERTERS = {
    "fp8": ('Float8LinearConverter.Config(filter_fqns=["lm_head", "router.gate"], model_compile_enabled=True)',
            "Float8GroupedExpertsConverter.Config(model_compile_enabled=True)"),
    "mxfp8": ("MXFP8LinearConverter.Config(model_compile_enabled=True)",
              "MXFP8GroupedExpertsConverter.Config(model_compile_enabled=True)"),
    "nvfp4": ('NVFP4LinearConverter.Config(fqns=["layers"], model_compile_enabled=True)', None),
}
# A MoE model in MXFP8, as TorchTitan 0.3.0's own MoE recipe (models/deepseek_v3/config_registry.py
# deepseek_v3_debugmodel_mxfp8): MXFP8LinearConverter's `fqns` is an include-list (substring match; empty converts
# every Linear, components/quantization/mx.py), so naming the attention, shared-expert and dense-FFN Linears leaves
# the router gate (moe.router.gate) and lm_head in BF16; token groups padded to 128 rows, which the CuTeDSL MXFP8
# quantization kernel on sm_100 (every Blackwell GPU MXFP8 runs on) requires (MXFP8GroupedExpertsConverter's
# pad_multiple, default 32).
MXFP8_MOE_LINEAR_FQNS = ("attention", "shared_experts", "feed_forward")
_MXFP8_MOE = (f"MXFP8LinearConverter.Config(fqns={json.dumps(list(MXFP8_MOE_LINEAR_FQNS))}, model_compile_enabled=True)",
              f"MXFP8GroupedExpertsConverter.Config(pad_multiple={MXFP8_PAD_MULTIPLE}, model_compile_enabled=True)")


def config_name(base: str, flavor_config: str | None, precision: str) -> str:
    return f"{flavor_config or base}_{precision}"


def converter_refusal(precision: str, is_moe: bool) -> str | None:
    if precision == "nvfp4" and is_moe:
        return "has no NVFP4 grouped-experts converter (NVFP4 only for dense Linear layers)"
    return None


def config_module_text(*, module: str, base: str, flavor: str, flavor_config: str | None, precision: str,
                       is_moe: bool, hf_assets: str | None,
                       model_lines: tuple[list[str], list[str]] | None = None,
                       shipped: str | None = None, arch_lines: list[str] | None = None) -> str:
    """The Python source of commbench_torchtitan.py with one config function; `model_lines` (imports, body) set the
    model spec in place of the flavor's; `shipped` (a shipped config function that already trains the model in the
    precision) is called in place of `base` and converted no further; `arch_lines` set the model asked for's values
    on the flavor's model config (torchtitan.flavor_fix_lines)."""
    name = config_name(base, flavor_config, precision)
    recipe = _MXFP8_MOE if precision == "mxfp8" and is_moe else _CONVERTERS.get(precision, (None, None))
    linear, grouped = recipe if shipped is None else (None, None)
    converters = [c for c in (linear, grouped if is_moe else None) if c]
    lines = [f'"""commbench plan: a TorchTitan 0.3 config function (launch with PYTHONPATH=<this folder> and',
             f'--module {MODULE_NAME} --config {name}). Generated; see commbench/planner/emit/torchtitan_config.py."""',
             "", "import dataclasses", ""]
    if converters:
        kinds = sorted({c.split(".")[0] for c in converters})
        lines += [f"from torchtitan.components.quantization import {', '.join(kinds)}",
                  "from torchtitan.models.utils import validate_converter_order"]
    if model_lines:
        lines += model_lines[0]
    elif flavor_config and shipped is None:
        lines.append(f"from torchtitan.models.{module} import model_registry")
    if shipped is not None:  # imported under another name: the generated function may share the shipped one's
        lines += [f"from torchtitan.models.{module}.config_registry import {shipped} as shipped_config", "", "",
                  f"def {name}():", "    config = shipped_config()"]
    else:
        lines += [f"from torchtitan.models.{module}.config_registry import {base}", "", "",
                  f"def {name}():", f"    config = {base}()"]
    if model_lines:
        lines += model_lines[1]
    elif flavor_config and shipped is None:
        lines.append(f"    config.model_spec = model_registry({flavor!r})")
        if hf_assets:
            lines.append(f"    config.hf_assets_path = {hf_assets!r}")
    lines += arch_lines or []
    if converters:
        lines += ["    converters = [", *(f"        {c}," for c in converters), "    ]",
                  "    validate_converter_order(converters)",
                  "    model = config.model_spec.model",
                  "    for converter in converters:",
                  "        model = converter.build().convert(model)",
                  "    config.model_spec = dataclasses.replace(config.model_spec, model=model)"]
    lines += ["    return config", ""]
    return "\n".join(lines)
