"""What Megatron-Bridge's performance scripts (scripts/performance/, 25.09 to 26.06.01) set on a recipe beyond the
workload presets, read with tools/perf_recipe_reader.py (no repository code is run): the config the script builds
for one model, GPU and precision, in the order the code runs it, so the last assignment wins and a GPU's own
function (or branch) overrides what the base recipe set.

0.2.0 to 0.5.1: the per-GPU function of configs/<family>/<family>_llm_pretrain.py (`<model>_pretrain_config_<gpu>`;
0.2.0 `<model>_<gpu>_config`) called with the precision and config variant, its workload preset answered by the
assignment the entry reads (utils/utils.py get_workload_base_config imports it by name). The function calls the
base recipe under src/megatron/bridge/recipes/ and utils/overrides.py set_workload_base_configs (0.4.0 on: it
applies the preset's flex backend or resets the dispatcher to alltoall). run_script.py's later overrides leave the
dispatcher alone unless a command-line flag asks (set_user_overrides: --moe_flex_dispatcher_backend, default -1,
which apply_flex_dispatcher_backend skips as no valid backend).

0.1.0rc3 (the YAML release): run_script.py's main() for the model's branch (`args.model_name`, `args.gpu`), up to
where it merges the YAML (create_omegaconf_dict_config); tools/recipes_from_megatron_bridge.py yaml_recipes
applies the YAML's ConfigContainer keys and the perf_matrix entry after it, as run_script.py does.

The model config comes from AutoBridge's conversion of the Hugging Face config where the base recipe asks for it
(bridge.to_megatron_provider, not read): an object whose fields no code read sets keep Megatron-Core's defaults
(flat_recipes.CORE_DEFAULTS; moe_token_dispatcher_type "allgather", which the planner reads as not flex), as the flat
recipes' are. The device questions apply_flex_dispatcher_backend asks (compute capability, device name: 0.3.1's
DeepEP check is `name in ["NVIDIA B200", "NVIDIA B300"]`) are answered for the GPU the function names
(flat_recipes.DEVICES: torch's device name of a B200 is "NVIDIA B200").
"""

from __future__ import annotations

import ast
from typing import Callable

from flat_recipes import CORE_DEFAULTS, runtime_facts
from perf_recipe_reader import Reader
from perf_recipe_values import Func, Module, Obj, Unknown

SCRIPTS = "scripts/performance/"
# the planner precision -> the scripts' compute dtype (argument_parser.py --compute_dtype)
COMPUTE_DTYPES = {"bf16": "bf16", "fp8": "fp8_cs", "mxfp8": "fp8_mx", "nvfp4": "nvfp4"}


def _provider() -> Obj:
    return Obj("the model provider AutoBridge converts from the Hugging Face config (not read)")


def _dotted(path: str) -> str:
    return path.removeprefix(SCRIPTS).removesuffix(".py").replace("/", ".")


def at_commit(repo: str, commit: str) -> Callable[[str], str | None]:
    """The text of a file of the Megatron-Bridge git directory at `commit` (None where absent)."""
    return Reader.at_commit(repo, commit).show


def gpu_function_config(show: Callable[[str], str | None], paths: list[str], model: str, model_key: str, gpu: str,
                        precision: str, variant: str, preset_path: str, preset_name: str) -> tuple[str, object]:
    """(where the function is, the ConfigContainer it returns) for the workload preset `preset_name` of
    `preset_path`; ("", None) where no per-GPU function of the scripts is named for it. `show`: a file's text."""
    names = (f"{model_key}_pretrain_config_{gpu}", f"{model_key}_{gpu}_config")
    for path in paths:
        if not (path.startswith(SCRIPTS + "configs/") and path.endswith("_llm_pretrain.py")):
            continue
        tree = ast.parse(show(path))
        node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names), None)
        if node is None:
            continue
        reader = Reader(show, runtime_facts(model, gpu))
        preset = reader.module(_dotted(preset_path)).lookup(preset_name)
        reader.runtime.update({"utils.utils.get_workload_base_config": preset, ".to_megatron_provider": _provider()})
        module = reader.module(_dotted(path))
        config = reader.call(Func(module, module.funcs[node.name]), [],
                             {"precision": COMPUTE_DTYPES[precision], "config_variant": variant, "mock": True})
        return f"{path}:{node.lineno} {node.name}", config
    return "", None


def run_script_config(show: Callable[[str], str | None], model: str, model_name: str, model_size: str, gpu: str,
                      precision: str) -> object:
    """The ConfigContainer run_script.py's main() (0.1.0rc3) holds for that model on `gpu` before the YAML merge."""
    path = SCRIPTS + "run_script.py"
    reader = Reader(show, runtime_facts(model, gpu))
    dtype, _, fp8_recipe = COMPUTE_DTYPES[precision].partition("_")
    args = Obj("run_script.py's command line")
    args.attrs.update(model_name=model_name, model_size=model_size, gpu=gpu, compute_dtype=dtype,
                      fp8_recipe=fp8_recipe or None, use_tokendrop=None)   # --use_tokendrop: default None
    reader.runtime.update({"argument_parser.parse_cli_args": (args, []), ".to_megatron_provider": _provider()})
    module = Module(reader, "run_script", path, show(path))
    body = []
    for statement in module.funcs["main"].body:
        if "create_omegaconf_dict_config" in ast.unparse(statement):
            break
        body.append(statement)
    scope: dict = {}
    reader.block(body, scope, module)
    return scope.get("recipe", Unknown("run_script.py's main() builds no recipe for this model"))


def run_script_fsdp_config(show: Callable[[str], str | None], model: str, model_name: str, model_size: str, gpu: str,
                           precision: str, fsdp: bool) -> object:
    """The ConfigContainer run_script.py's main() (0.1.0rc3) holds once its Megatron-FSDP branches after the YAML
    merge have run: the config before the merge (run_script_config), use_megatron_fsdp as the perf_matrix entry sets
    it (utils/helpers.py set_megatron_fsdp_overrides: recipe.ddp.use_megatron_fsdp = True where the entry's
    use_megatron_fsdp is), then main()'s top-level `if` statements after the merge that read
    recipe.ddp.use_megatron_fsdp (run_script.py:161-163: fsdp_double_buffer for Llama 3 / 3.1 70B and 405B).
    The entry's other keys (nccl_ub, keep_fp8_transpose_cache_when_using_custom_fsdp) are read by no code there."""
    path = SCRIPTS + "run_script.py"
    reader = Reader(show, runtime_facts(model, gpu))
    dtype, _, fp8_recipe = COMPUTE_DTYPES[precision].partition("_")
    args = Obj("run_script.py's command line")
    args.attrs.update(model_name=model_name, model_size=model_size, gpu=gpu, compute_dtype=dtype,
                      fp8_recipe=fp8_recipe or None, use_tokendrop=None)
    reader.runtime.update({"argument_parser.parse_cli_args": (args, []), ".to_megatron_provider": _provider()})
    module = Module(reader, "run_script", path, show(path))
    before, after, merged = [], [], False
    for statement in module.funcs["main"].body:
        merged = merged or "create_omegaconf_dict_config" in ast.unparse(statement)
        (after if merged else before).append(statement)
    scope: dict = {}
    reader.block(before, scope, module)
    recipe = scope.get("recipe")
    if not isinstance(recipe, Obj):
        return Unknown("run_script.py's main() builds no recipe for this model")
    recipe.section("ddp").attrs["use_megatron_fsdp"] = fsdp
    reader.block([s for s in after if isinstance(s, ast.If) and "recipe.ddp.use_megatron_fsdp" in ast.unparse(s.test)],
                 scope, module)
    return recipe


def field(config: object, section: str, name: str) -> object:
    """A field of the resolved config; one no code read sets keeps its default (CORE_DEFAULTS, else Unknown)."""
    owner = config.attrs.get(section) if isinstance(config, Obj) else None
    if not isinstance(owner, Obj):
        return Unknown(f"{section}: {getattr(owner, 'why', 'not resolved')}")
    value = owner.read(name)
    if isinstance(value, Unknown) and "is not set in code read" in value.why and name in CORE_DEFAULTS:
        return CORE_DEFAULTS[name]
    return value


def where(config: object, section: str, name: str) -> str:
    owner = config.attrs.get(section) if isinstance(config, Obj) else None
    return owner.where.get(name, "") if isinstance(owner, Obj) else ""


def dispatcher_of(config: object) -> dict:
    """The planner's dispatcher fields from a resolved config: flex where moe_token_dispatcher_type is "flex"
    (its backend: moe_flex_dispatcher_backend, or DeepEP where 0.1.0rc3's moe_enable_deepep is set), else alltoall;
    a value the reader could not resolve is listed in "unresolved" (the planner does not use such an entry)."""
    kind = field(config, "model", "moe_token_dispatcher_type")
    backend = field(config, "model", "moe_flex_dispatcher_backend")
    if kind == "flex" and not isinstance(backend, str) and field(config, "model", "moe_enable_deepep") is True:
        backend = "deepep"
    out = {"dispatcher": "flex" if kind == "flex" else "alltoall",
           "flex_backend": backend if kind == "flex" else None,
           "script_facts": [w for w in (where(config, "model", "moe_token_dispatcher_type"),
                                            where(config, "model", "moe_flex_dispatcher_backend") if kind == "flex"
                                            else "") if w]}
    unresolved = [f"model.moe_token_dispatcher_type: {kind.why}"] if isinstance(kind, Unknown) else []
    if kind == "flex" and backend not in ("deepep", "hybridep"):
        unresolved.append(f"model.moe_flex_dispatcher_backend: {getattr(backend, 'why', repr(backend))}")
    if unresolved:
        out["unresolved"] = unresolved
    return out
