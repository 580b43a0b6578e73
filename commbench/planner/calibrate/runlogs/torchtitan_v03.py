"""What torchtitan 0.3.0 logs differently from 0.1/0.2, read into the shape runlogs/torchtitan.py reads.

- The config: trainer.py Trainer.Config.maybe_log (under --debug.print_config) logs
  `Running with configs: {json.dumps(self.to_dict(), indent=2)}`: a JSON document over many lines, each after the
  launcher's rank label. Its top level names the model `model_spec` ({"name", "flavor", "model"}), not `model`.
- Quantization: converters rewrite the model config when the model spec is built (model_registry(...,
  converters=[...])); the quantized Linear configs differ from Linear's only in fields to_dict leaves out (leading
  underscore), so the printed config does not say the number format. The converters log it instead, before the
  config (components/quantization/float8.py, mx.py, nvfp4.py logger.info lines, TORCHTITAN_CONVERTER_LINES).
- Activation checkpointing: Trainer.Config.activation_checkpoint is SelectiveAC.Config | FullAC.Config |
  MemoryBudgetAC.Config | None (distributed/activation_checkpoint.py ActivationCheckpointingConfig), printed by its
  fields without a `mode`: SelectiveAC has force_recompute_mm_shapes_by_fqns, MemoryBudgetAC memory_budget, FullAC
  only the base fields (preserve_rng_state, determinism_check, debug).
- The device mesh: distributed/parallel_dims.py logs `Building device mesh with parallelism: pp=.., dp_replicate=..,
  dp_shard=.., cp=.., tp=.., ep=..` (0.1/0.2: `Building N-D device mesh with [names], [sizes]`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from commbench.errors import CommbenchError
from commbench.planner.calibrate.runlogs.common import LAUNCHER_LABEL

TITAN_CONFIG_JSON = re.compile(r"Running with configs:\s*(\{.*)$")
# parallel_dims.py: the world is pp*dp_replicate*dp_shard*cp*tp (ep folds into dp_shard*cp*tp, not a factor)
TITAN_MESH_V03 = re.compile(r"Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), "
                            r"dp_shard=(\d+), cp=(\d+), tp=(\d+)")
# The converters' logger.info lines (torchtitan 0.3.0 components/quantization/float8.py, mx.py, nvfp4.py) by the
# converter that logs them, as titan_precision reads it: the Linear converters log their recipe and swap, the
# grouped-experts converters "Converted GroupedExperts to use dynamic {float8 rowwise, mxfp8...}"
TORCHTITAN_CONVERTER_LINES = (
    (re.compile(r"Float8 training active|Swapped to Float8Linear layers"), "Float8LinearConverter"),
    (re.compile(r"Converted GroupedExperts to use dynamic float8"), "Float8GroupedExpertsConverter"),
    (re.compile(r"Converted Linear layers to MXFP8Linear"), "MXFP8LinearConverter"),
    (re.compile(r"Converted GroupedExperts to use dynamic mxfp8"), "MXFP8GroupedExpertsConverter"),
    (re.compile(r"Converted Linear layers to NVFP4Linear"), "NVFP4LinearConverter"),
)

# 0.3.0's printed config does not state the number format: a log without any converter line reads as BF16, said
V03_PRECISION_NOTE = ("BF16: no quantization converter's log line (torchtitan 0.3.0's printed config does not state "
                      "the number format)")


def _depth_change(text: str, in_string: bool) -> tuple[int, bool]:
    """The change in JSON brace/bracket depth over `text`, outside strings, and whether it ends in a string."""
    depth, escaped = 0, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth, in_string


class JsonConfigReader:
    """Collects the multi-line `Running with configs: {...}` documents, one per rank label (ranks may interleave)."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[list[str], int, bool]] = {}   # rank -> (lines, depth, in a string)

    def feed(self, line: str) -> tuple[bool, Any]:
        """(this line belongs to a config, the parsed config when this line closes one, else None; a config
        that is not JSON is the string 'unreadable')."""
        label = LAUNCHER_LABEL.match(line)
        rank = (label.group(1) or label.group(2)) if label else ""
        body = line[label.end():] if label else line
        if rank in self.open:
            lines, depth, in_string = self.open[rank]
        else:
            start = TITAN_CONFIG_JSON.search(body)
            if not start:
                return False, None
            lines, depth, in_string, body = [], 0, False, start.group(1)
        change, in_string = _depth_change(body, in_string)
        lines.append(body)
        depth += change
        if depth > 0:
            self.open[rank] = (lines, depth, in_string)
            return True, None
        self.open.pop(rank, None)
        try:
            return True, json.loads("\n".join(lines))
        except ValueError:
            return True, "unreadable"


def normalise_v03(log: str, config: dict[str, Any], text: str) -> dict[str, Any]:
    """A 0.3.0 config in the shape the 0.1/0.2 reader reads: model {name, flavor, converters} from model_spec and
    the converters' log lines, activation_checkpoint {mode} from its fields. A config with `model` is returned as is."""
    if "model_spec" not in config or "model" in config:
        return config
    spec = config["model_spec"]
    if not isinstance(spec, dict):
        raise CommbenchError(f"{log}: its config's model_spec = {spec!r:.80}; allowed: a dict (name, flavor, model), "
                             "as torchtitan 0.3.0 prints it")
    converters = [name for pattern, name in TORCHTITAN_CONVERTER_LINES if pattern.search(text)]
    out = dict(config, model={"name": spec.get("name"), "flavor": spec.get("flavor"), "converters": converters})
    if "activation_checkpoint" not in config:   # to_dict prints every field; its default is SelectiveAC
        raise CommbenchError(f"{log}: its 'Running with configs:' block has model_spec (torchtitan 0.3.0) but no "
                             "activation_checkpoint entry, which 0.3.0 always prints; give the log as it wrote it")
    ac = config["activation_checkpoint"]
    if ac is None:
        mode = "none"
    elif not isinstance(ac, dict):
        raise CommbenchError(f"{log}: activation_checkpoint = {ac!r}; allowed: a dict (FullAC/SelectiveAC config) "
                             "or null")
    elif "mode" in ac:
        mode = str(ac["mode"])
    elif "memory_budget" in ac:
        raise CommbenchError(f"{log}: activation_checkpoint is MemoryBudgetAC (memory_budget="
                             f"{ac['memory_budget']!r}), which the step model does not price; allowed: full, "
                             "selective, none")
    elif "force_recompute_mm_shapes_by_fqns" in ac:
        mode = "selective"
    else:
        mode = "full"
    # SelectiveAC is per-op only ("Per-op selective activation checkpointing"): 0.1/0.2's selective_ac_option "op"
    out["activation_checkpoint"] = {"mode": mode, **({"selective_ac_option": "op"} if mode == "selective" else {})}
    return out


def mesh_world_size_v03(text: str) -> int | None:
    """The GPU count of 0.3.0's `Building device mesh with parallelism:` line (pp*dp_replicate*dp_shard*cp*tp);
    None without it."""
    match = TITAN_MESH_V03.search(text)
    if not match:
        return None
    world = 1
    for size in match.groups():
        world *= int(size)
    return world
