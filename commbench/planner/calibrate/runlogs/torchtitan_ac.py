"""A TorchTitan config's activation_checkpoint section as the step model's recompute (layout/spec.py RECOMPUTE and
recompute_layers), or one line where it cannot be priced as it ran.

- mode "none" / "full": no recompute / every transformer block recomputed (recompute full, recompute_layers 0).
- mode "selective" reads selective_ac_option (torchtitan 0.1.0 config_manager.py and 0.2.x config/job_config.py:
  `selective_ac_option: str = "2"`, "'int' (e.g., 2) for every nth layer, or 'op' for op level ac"; both print the
  whole config, so the entry is always there):
  - "op": op-level selective checkpointing (save every op's output but every second matmul): the step model's
    "selective".
  - a whole number N: layer SAC (torchtitan v0.2.2 distributed/activation_checkpoint.py _apply_layer_sac, v0.1.0
    models/llama3/infra/parallelize.py): a process-wide counter over the blocks apply_ac wraps; a block is wrapped in
    a full checkpoint (ptd_checkpoint_wrapper) when `not N or count % N == 0`, else left as it is. N = 0 or 1: every
    block (full recompute). N >= 2: floor(L / N) of the rank's L blocks, fully recomputed, the others storing
    everything: the step model's recompute full with recompute_layers = floor(L / N) (megatron block method: that
    many layers of each model chunk recomputed, the rest stored; step/memory.py full_recompute_share charges the
    count, not which layers). Without PP a rank holds all the model's layers, so the count is exact. With PP
    TorchTitan's split gives the stages unequal layer counts (v0.2.2 distributed/pipeline_parallel.py
    generate_llm_fqn_per_model_part weighs the embedding and output in), so each stage checkpoints its own floor:
    one count per chunk cannot state it, and the run is refused in one line.
  - anything else: torchtitan itself refuses it ("Invalid selective AC option").
- torchtitan 0.3.0's SelectiveAC is per-op only (its docstring: "Per-op selective activation checkpointing");
  torchtitan_v03.normalise_v03 reads it as selective_ac_option "op".
- mode "memory_budget" (0.2.x: torch.compile's activation memory budget) is not priced: one line.
"""

from __future__ import annotations

from typing import Any

from commbench.errors import CommbenchError

TITAN_AC_MODES = ("none", "full", "selective")


def _layer_count(model: str) -> int | None:
    """The --model's transformer layers (a zoo model), else None."""
    from commbench.planner.calibrate.published import _zoo_name
    from commbench.planner.models.zoo import load_model
    name = _zoo_name(model)
    return load_model(name).num_layers if name is not None else None


def titan_recompute(log: str, ac: Any, *, model: str, pp: int) -> tuple[str, int, str]:
    """(recompute, recompute_layers, a note saying how a layer-SAC option was read, else '') for a TorchTitan
    config's activation_checkpoint section (see the module docstring); one line naming the field, its value and what
    is allowed where it cannot be priced as it ran."""
    if ac is None:
        return "none", 0, ""
    if not isinstance(ac, dict):
        raise CommbenchError(f"{log}: activation_checkpoint = {ac!r}; allowed: a dict with mode (none, full, "
                             "selective)")
    mode = str(ac.get("mode", "none"))
    if mode not in TITAN_AC_MODES:
        raise CommbenchError(f"{log}: activation_checkpoint.mode={mode!r}, which the step model does not price; "
                             f"allowed: {', '.join(TITAN_AC_MODES)}")
    if mode != "selective":
        return mode, 0, ""
    if "selective_ac_option" not in ac:
        raise CommbenchError(f"{log}: activation_checkpoint.mode='selective' without selective_ac_option (torchtitan "
                             "0.1/0.2 print it; their default '2' checkpoints every 2nd block); allowed: a config "
                             "that prints it, 'op' or a whole number")
    option = str(ac["selective_ac_option"]).strip()
    if option == "op":
        return "selective", 0, ""
    if not option.isdigit():
        raise CommbenchError(f"{log}: activation_checkpoint.selective_ac_option={ac['selective_ac_option']!r}; "
                             "allowed: 'op' (op-level) or a whole number N (full checkpoint of every Nth block), as "
                             "torchtitan reads it")
    every = int(option)
    if every <= 1:   # `not ac_freq or count % ac_freq == 0`: every block
        return "full", 0, ""
    said = f"selective_ac_option={option!r} (layer SAC: a full checkpoint of one block in {every})"
    if pp > 1:
        raise CommbenchError(f"{log}: activation_checkpoint.{said} with pipeline_parallel_degree={pp}: each stage "
                             "checkpoints every Nth of its own blocks and TorchTitan's split gives the stages unequal "
                             "layer counts, which one recompute count per model chunk cannot state; allowed with PP: "
                             "selective_ac_option 'op', 0 or 1, or mode full / none")
    layers = _layer_count(model)
    if layers is None:   # a model outside the zoo: the row is listed as not modelled, nothing priced
        return "full", 0, f"{said}: not read into a layer count (--model {model} is not in the zoo)"
    count = layers // every
    if count == 0:
        return "none", 0, f"{said}: none of {layers} blocks checkpointed, priced as no recompute"
    return "full", count, (f"{said}: {count} of {layers} blocks fully recomputed, priced as recompute full of "
                           f"{count} layers (recompute_layers={count})")
