"""TorchTitan 0.3's own configuration path, as torchtitan/train.py runs it before building:
ConfigManager().parse_args(argv) (the --module/--config function, tyro overrides, each config
dataclass's __post_init__, _validate_config), then what Trainer.__init__ runs on the config before it
builds anything: model_spec.model.update_from_config(trainer_config=...), the CUDA-graph validation,
ParallelDims(...) and build_mesh() on torch's fake process-group backend, and the pipeline split
pipeline_llm derives (module FQNs per stage, schedule, rank-to-stage mapping).

Two GPU- or data-only imports are answered by stand-ins so the config registries import on a CPU
machine without them: the Triton kernels of TorchTitan's minimal async EP path
(torchtitan.distributed.minimal_async_ep.kernels: `triton` is GPU-only and ~1 GB) and the Hugging Face
`datasets` library of the text dataloader (not installed by requirements-frameworks.txt; only called
when a dataset is built). Neither is called while a config is parsed or validated.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

STAND_INS = ("torchtitan.distributed.minimal_async_ep.kernels", "datasets", "datasets.distributed")


class _StandIn(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name} is a stand-in on this CPU test machine")
        return unavailable


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def find_spec(self, name, path, target=None):
        if name in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=name == "datasets")
        return None

    def create_module(self, spec):
        module = _StandIn(spec.name)
        if spec.name == "datasets":
            module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _pipeline(config, dims):
    import torch
    from torchtitan.distributed.pipeline_parallel import pipeline_llm
    model_config = config.model_spec.model
    with torch.device("meta"):
        model = model_config.build()
    return pipeline_llm(model, parallel_dims=dims, training=config.training, parallelism=config.parallelism,
                        compile_config=config.compile, ac_config=config.activation_checkpoint,
                        dump_folder=config.dump_folder, device=torch.device("meta"), model_config=model_config,
                        parallelize_fn=lambda module, **kwargs: module, loss_fn=None)


def install_stand_ins() -> None:
    """Stand-ins for the modules above that are not installed (a real `datasets` is used when present)."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    names = tuple(n for n in STAND_INS if n.startswith("torchtitan.") or importlib.util.find_spec("datasets") is None)
    sys.meta_path.insert(0, _Finder(names))


def titan_config(argv: list[str], *, world: int, capability: tuple[int, int], plan_dir, monkeypatch,
                 pipeline: bool = False):
    """torchtitan/train.py's `ConfigManager().parse_args()` on the emitted command line, then what
    Trainer.__init__ runs on the config before it builds: init_distributed (torch's fake backend, rank 0
    of `world`) -> ParallelDims.from_config -> build_mesh, the sequence-length check,
    model_spec.model.update_from_config(config=...), apply_overrides, config._validate_cuda_graphs().
    The GPU is the plan's: TorchTitan's capability checks answer with its compute capability.
    With `pipeline` and PP > 1, also TorchTitan's pipeline_llm on the model built on the meta device
    (stage split, PipelineStage per model part, schedule), with its parallelize_fn (FSDP/TP, which need
    CUDA devices) left out. Returns (config, parallel_dims, pipeline_llm's result or None)."""
    install_stand_ins()
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import torchtitan.components.quantization.float8 as float8
    import torchtitan.components.quantization.mx as mx
    import torchtitan.components.quantization.nvfp4 as nvfp4
    from torchtitan.config import ConfigManager
    from torchtitan.config.override import apply_overrides
    from torchtitan.distributed.parallel_dims import ParallelDims

    for module in (float8, mx, nvfp4):
        monkeypatch.setattr(module, "has_cuda_capability", lambda major, minor: capability >= (major, minor))
    if plan_dir is not None:
        monkeypatch.syspath_prepend(str(plan_dir))
        sys.modules.pop("commbench_torchtitan", None)
    config = ConfigManager().parse_args(list(argv))
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        dims = ParallelDims.from_config(config.parallelism, world)
        dims.build_mesh()
        sp = dims.tp if config.parallelism.enable_sequence_parallel else 1
        divisor = sp * (2 * dims.cp if dims.cp > 1 else 1)
        if config.training.seq_len % divisor:
            raise ValueError(f"Training sequence length ({config.training.seq_len}) must be divisible by {divisor}")
        config.model_spec.model.update_from_config(config=config)
        if config.override.imports:
            apply_overrides(config.override, config)
        config._validate_cuda_graphs()
        return config, dims, (_pipeline(config, dims) if pipeline and dims.pp > 1 else None)
    finally:
        dist.destroy_process_group()
