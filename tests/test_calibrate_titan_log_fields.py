"""What a TorchTitan 0.1/0.2 log's config says and calibrate must read as it ran (probe V): the selective-AC option
(op-level or every Nth block), ... One line naming the field and what is allowed where a run cannot be priced as it
ran, never priced as another."""

from __future__ import annotations

import pytest

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs import parse_torchtitan_log

PREFIX = "[rank0]:[titan] 2026-01-10 10:00:00,001 - root - INFO - "


def _config(ac: object = None, **parallel: object) -> dict:
    """A torchtitan 0.1/0.2 job config of Llama 3 8B (32 layers) on 8 GPUs (FSDP), as to_dict prints it."""
    par = {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 8, "tensor_parallel_degree": 1,
           "pipeline_parallel_degree": 1, "pipeline_parallel_microbatch_size": 1, "context_parallel_degree": 1,
           "expert_parallel_degree": 1}
    par.update(parallel)
    return {"model": {"name": "llama3", "flavor": "8B", "converters": []},
            "training": {"local_batch_size": 1, "global_batch_size": -1, "seq_len": 8192,
                         "mixed_precision_param": "bfloat16"},
            "parallelism": par,
            "activation_checkpoint": ac if ac is not None else {"mode": "selective", "selective_ac_option": "op"}}


def _log(config: object, *, device: str = "NVIDIA H100 80GB HBM3", extra: tuple[str, ...] = ()) -> str:
    """torchtitan 0.1's 'Running with args: {...}' line, its device line and four metrics lines."""
    lines = [PREFIX + f"Running with args: {config!r}", *[PREFIX + line for line in extra],
             PREFIX + f"CUDA capacity: {device} with 79.11GiB memory"]
    lines += [PREFIX + f"step: {s}  loss:  8.12345  grad_norm:  1.2345  memory: 70.12GiB(88.58%)  tps: "
              f"{2000 if s == 1 else 6000:,}  tflops: 250.34  mfu: 25.00%" for s in (1, 10, 20, 30)]
    return "\n".join(lines) + "\n"


def _row(text: str, model: str = "llama3-8b", gpu: str = "h100-hgx") -> dict:
    return parse_torchtitan_log(text, source="t.log", model=model, gpu=gpu, num_gpus=None)


def _ac(option: object) -> dict:
    return {"mode": "selective", "selective_ac_option": option}


@pytest.mark.parametrize("option, recompute, layers", [
    ("op", "selective", 0),     # op-level SAC: the step model's selective
    ("2", "full", 16),          # torchtitan's default: every 2nd of 32 blocks fully checkpointed
    ("3", "full", 10),          # blocks 3, 6, ..., 30
    ("1", "full", 0),           # every block: full recompute
    ("0", "full", 0),           # `not ac_freq`: every block
    ("64", "none", 0),          # no block reaches the 64th
])
def test_the_selective_ac_option_is_read_as_the_blocks_it_checkpoints(option, recompute, layers):
    """torchtitan v0.2.2 activation_checkpoint.py _apply_layer_sac: a block is fully checkpointed when
    `not ac_freq or count % ac_freq == 0`; 'op' is op-level selective."""
    row = _row(_log(_config(_ac(option))))
    assert (row["recipe"]["recompute"], row["recipe"]["recompute_layers"]) == (recompute, layers)
    if layers:
        assert f"{layers} of 32 blocks fully recomputed" in row["notes"]
        assert f"recompute_layers={layers}" in row["priced_as"]


@pytest.mark.parametrize("ac, named", [
    (_ac("2"), "selective_ac_option='2'.*pipeline_parallel_degree=2.*allowed with PP"),
])
def test_layer_sac_with_pipeline_stages_is_refused(ac, named):
    config = _config(ac, pipeline_parallel_degree=2, data_parallel_shard_degree=4)
    config["training"]["local_batch_size"] = 4
    with pytest.raises(CommbenchError, match=named):
        _row(_log(config))


@pytest.mark.parametrize("ac, named", [
    (_ac("every2"), "selective_ac_option='every2'; allowed: 'op'.* or a whole number"),
    ({"mode": "selective"}, "mode='selective' without selective_ac_option.*allowed"),
    ({"mode": "memory_budget", "memory_budget": 0.5}, "mode='memory_budget'.*allowed: none, full, selective"),
])
def test_an_activation_checkpoint_config_it_cannot_price_as_it_ran_is_one_line(ac, named):
    with pytest.raises(CommbenchError, match=named):
        _row(_log(_config(ac)))


@pytest.mark.parametrize("name, flavor, model, trained", [
    ("qwen3", "8B", "llama3-8b", "qwen3-8b"),            # both flavors say 8B: the module tells them apart
    ("llama3", "70B", "qwen3-next-80b-a3b", "llama3.1-70b"),   # 70B within the flavor count's rounding of 80B
])
def test_a_0_1_0_2_log_of_another_shipped_model_is_refused(name, flavor, model, trained):
    """0.1/0.2 print the job config's model name (the TorchTitan module) and flavor; a pair TorchTitan ships for
    another zoo model was read as --model when the flavor's parameter count was near it."""
    config = _config()
    config["model"] = {"name": name, "flavor": flavor, "converters": []}
    with pytest.raises(CommbenchError, match=f"name={name!r} flavor={flavor!r}, TorchTitan's {trained}, but --model "
                                             f"is {model}"):
        _row(_log(config), model=model)
    assert _row(_log(config), model=trained)["model"] == trained


@pytest.mark.parametrize("device, named", [
    ("NVIDIA H100 PCIe", "'NVIDIA H100 PCIe'.*a PCIe part, not the H100 of --system h100-hgx"),
    ("NVIDIA H100 NVL", "'NVIDIA H100 NVL'.*an NVL part, not the H100 of --system h100-hgx"),
    ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "a MIG part, not the H100"),
    ("NVIDIA H800", "'NVIDIA H800'.*--system h100-hgx has h100 GPUs"),
])
def test_a_log_of_another_form_factor_or_chip_than_the_preset_gpu_is_refused(device, named):
    """The presets' H100 is the SXM part (hardware.toml [gpu.h100]); an H100 PCIe / NVL has another datasheet
    (power, memory bandwidth, clocks) and was priced as the SXM part."""
    with pytest.raises(CommbenchError, match=named):
        _row(_log(_config(), device=device))
    assert _row(_log(_config(), device="NVIDIA H100 80GB HBM3"))["gpu"] == "h100-hgx"
    assert _row(_log(_config(), device="NVIDIA H200"), gpu="h200-hgx")["gpu"] == "h200-hgx"


def test_a_0_1_0_2_config_without_disable_cuda_graphs_runs_no_graphs():
    """TorchTitan before 0.3.0 has no CUDA graphs (no training.disable_cuda_graphs)."""
    assert _row(_log(_config()))["recipe"]["cuda_graph"] == "none"


@pytest.mark.parametrize("key, value, named", [
    ("model", "llama3", "its config's model = 'llama3'; allowed: a dict"),
    ("activation_checkpoint", "full", "activation_checkpoint = 'full'; allowed: a dict with mode"),
    ("parallelism", [8], "its config's parallelism = \\[8\\]; allowed: a dict"),
])
def test_a_config_section_that_is_not_a_dict_is_one_line_not_a_traceback(key, value, named):
    config = _config()
    config[key] = value
    with pytest.raises(CommbenchError, match=named):
        _row(_log(config))


def test_the_flavors_the_log_reader_knows_are_those_the_emitter_launches():
    """runlogs/torchtitan_model.py keeps its own (module, flavor) -> zoo model table (calibrate does not import the
    emit stage): it must be emit/torchtitan.py TITAN_MODELS' pairs."""
    from commbench.planner.calibrate.runlogs.torchtitan_model import TITAN_FLAVOR_MODELS
    from commbench.planner.emit.torchtitan import TITAN_MODELS
    assert TITAN_FLAVOR_MODELS == {(t.module, t.flavor.lower()): zoo for zoo, t in TITAN_MODELS.items()}
