"""Emitted TorchTitan plans against TorchTitan's own code (torchtitan 0.3.0 from PyPI, CPU torch).

Called (torchtitan 0.3.0): ParallelismConfig / TrainingConfig construction, tyro parsing of the emitted
`--section.option` overrides with ConfigManager's registry, ParallelDims validation, the pipeline
metadata (`_get_pipeline_metadata`), schedule lookup and rank-to-stage mapping, and the module names
TorchTitan's own split generator uses. The `--module/--config` pair is checked in the installed
package's source (the config function exists; its quantization converters match the precision; the
model spec has a pipelining function when PP > 1).
Reproduced: TorchTitan's EP mesh rule (dp_shard * cp * tp divisible by ep, ParallelismConfig docstring)
and the micro-batch rule of `_build_pipeline_schedule` (local batch divisible by the micro-batch size).
The 0.2 TOML cannot be checked against torchtitan 0.2.2 in the same environment (one version installs);
test_emit_torchtitan.py checks its keys against 0.2.2's JobConfig, reproduced.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.framework_plans import INSTALL_HINT, case_ids, plan_cases

torchtitan = pytest.importorskip("torchtitan", reason=f"torchtitan is not installed: {INSTALL_HINT}")
tyro = pytest.importorskip("tyro", reason=f"tyro is not installed: {INSTALL_HINT}")

from torch.distributed.pipelining.schedules import PipelineScheduleMulti, get_schedule_class  # noqa: E402
from torchtitan.config import ParallelismConfig, TrainingConfig  # noqa: E402
from torchtitan.config.manager import ConfigManager, custom_registry  # noqa: E402
from torchtitan.distributed.parallel_dims import ParallelDims  # noqa: E402
from torchtitan.distributed.pipeline_parallel import (  # noqa: E402
    _generate_llm_fqn_per_model_part, _get_pipeline_metadata, _get_pp_rank_to_stage_indices_mapping)

from commbench.planner.emit.torchtitan import torchtitan_args, torchtitan_plan  # noqa: E402
from commbench.planner.layout.split import best_split  # noqa: E402

ConfigManager()  # registers TorchTitan's tyro rules (comma-separated lists) on custom_registry


@dataclass
class Overrides:
    """The sections the emitter overrides, as TorchTitan's Trainer.Config holds them."""

    parallelism: ParallelismConfig = field(default_factory=ParallelismConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)


def package_source(module: str) -> ast.Module:
    path = Path(importlib.util.find_spec(f"torchtitan.models.{module}").origin).parent
    return ast.parse((path / "config_registry.py").read_text()), ast.parse((path / "__init__.py").read_text())


def config_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def converters_used(fn: ast.FunctionDef, tree: ast.Module) -> set[str]:
    """Converter classes a config function applies, following calls to other config functions."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id.endswith("Converter")}
    if names:  # a config that sets its own converters replaces the model spec of the one it starts from
        return names
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
        inner = config_function(tree, call.func.id)
        if inner is not None and inner is not fn:
            names |= converters_used(inner, tree)
    return names


@pytest.mark.parametrize("index", range(len(case_ids())), ids=case_ids())
def test_torchtitan_accepts_the_emitted_plan(index):
    case = plan_cases()[index]
    lay, model = case.layout, case.model
    doc = torchtitan_plan(lay, model)
    assert doc["version"] == importlib.metadata.version("torchtitan")  # the release installed is the one targeted
    if "refused" in doc:  # one line naming the release and why (e.g. no Mixtral model, no bf16 405B config)
        assert "\n" not in doc["refused"] and doc["refused"].startswith(f"TorchTitan {doc['version']} ")
        return
    sections = doc["sections"]
    parallelism, training = ParallelismConfig(**sections["parallelism"]), TrainingConfig(**sections["training"])
    argv = torchtitan_args(doc)
    assert argv[:4] == ["--module", doc["module"], "--config", doc["config"]]
    parsed = tyro.cli(Overrides, args=argv[4:], default=Overrides(), registry=custom_registry)
    assert parsed.parallelism == parallelism and parsed.training == training

    registry, init = package_source(doc["module"])
    fn = config_function(registry, doc["config"])
    assert fn is not None, f"{doc['config']} is not in torchtitan/models/{doc['module']}/config_registry.py"
    used = converters_used(fn, registry)
    expected = {"bf16": set(), "fp8": {"Float8"}, "mxfp8": {"MXFP8"}}[lay.precision]
    assert {c for c in ("Float8", "MXFP8") if any(u.startswith(c) for u in used)} == expected
    if lay.pp > 1:
        assert "pipelining_fn=pipeline_llm" in ast.unparse(init).replace(" ", "")

    dims = ParallelDims(dp_replicate=parallelism.data_parallel_replicate_degree,
                        dp_shard=parallelism.data_parallel_shard_degree, cp=parallelism.context_parallel_degree,
                        tp=parallelism.tensor_parallel_degree, pp=parallelism.pipeline_parallel_degree,
                        ep=parallelism.expert_parallel_degree, world_size=case.gpus)
    assert (dims.dp_shard * dims.cp * dims.tp) % dims.ep == 0  # reproduced EP mesh rule
    if lay.pp == 1:
        assert training.local_batch_size == lay.mbs
        assert training.global_batch_size // (training.local_batch_size * dims.dp_shard) == lay.num_microbatches
        return
    _get_pipeline_metadata(dims, parallelism, SimpleNamespace(layers=[None] * model.num_layers))
    stages = parallelism.module_fqns_per_model_part
    schedule = get_schedule_class(parallelism.pipeline_parallel_schedule)
    assert issubclass(schedule, PipelineScheduleMulti) == (lay.vp > 1)
    owned = [s for r in range(lay.pp) for s in
             _get_pp_rank_to_stage_indices_mapping(r, lay.pp, parallelism.pipeline_parallel_schedule, len(stages))]
    assert sorted(owned) == list(range(lay.pp * lay.vp))
    # Every module TorchTitan's own generator names, once, in order; split as Megatron's (no MTP).
    assert [m for s in stages for m in s] == _generate_llm_fqn_per_model_part(1, model.num_layers)[0]
    no_mtp = best_split(dataclasses.replace(model, num_mtp_layers=0), lay.pp, lay.vp)
    assert [sum(m.startswith("layers.") for m in s) for s in stages] == no_mtp.decoder_layers()
    assert training.local_batch_size % parallelism.pipeline_parallel_microbatch_size == 0  # reproduced
    assert training.local_batch_size // parallelism.pipeline_parallel_microbatch_size == lay.num_microbatches
