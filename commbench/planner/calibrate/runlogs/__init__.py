"""Training runs a user measured, as rows shaped like commbench/data/calibration-runs.json.

Three inputs (`read_runs` picks by content):
- JSON: a list of rows like calibration-runs.json (model, gpu, num_gpus, precision, seq_len, gbs,
  mbs, tp, pp, cp, vp, ep, etp, tokens_per_s_per_gpu; optional pipeline_layout, the split it ran); recipe fields (published.RECIPE_FIELDS)
  optional, at top level or under "recipe"; missing ones take published.DEFAULT_FLAGS.
- Megatron-LM log: the arguments block `_print_args` prints (`---- arguments ----`, lines
  `  name ....... value`, `---- end of arguments ----`) and the per-iteration lines of
  `training_log` (`elapsed time per iteration (ms): X | throughput per GPU (TFLOP/s/GPU): Y`).
  tokens/s/GPU = global_batch_size x seq_length / (iteration s x world_size), median over the
  logged iterations after the warm-up, leaving out lines counting skipped or NaN iterations, lines with a NaN or
  infinite loss or grad norm or lacking a loss the other lines print (a diverged iteration that was not skipped
  counts in neither number, and Megatron-LM prints no NaN loss average), and lines of a
  --rampup-batch-size ramp (a logged global batch size other than global_batch_size); a log of
  warm-up iterations only is refused. Warm-up (megatron_warmup.py): the first iteration after each start, and with
  full-iteration or Transformer Engine CUDA graphs the first cuda_graph_warmup_steps + 1 (eager warm-up and
  capture); a line is left out when any iteration it averages is warm-up. An arguments block that does not say
  whether the run used CUDA graphs (no cuda_graph_impl) has an obvious spike right after a start left out and
  named. The row carries the pipeline split the log ran (pipeline_layout: megatron_split.py), which the step model
  prices; a log ending in a traceback, and a median of fewer than 3 lines, are said in a note.
- TorchTitan log: the config printed at start (0.1/0.2 `Running with args: {...}` on one line, 0.3.0
  `Running with configs: {...}` as indented JSON over many lines, --debug.print_config: torchtitan_v03.py) and the metrics
  line per step (`step: N  loss: ...  tps: T  tflops: F  mfu: M%`); tps is tokens/s per GPU, median
  over the steps after the warm-up, leaving out steps with a NaN or infinite loss or grad_norm, as for Megatron-LM: the first step after each start, and step 2 too where
  CUDA graphs capture there (training.disable_cuda_graphs false, one micro-batch a step: torchtitan.py
  titan_warmup_steps); the device its 'CUDA capacity' line names must be the --system's GPU.
A last line cut off mid-write (no line break after it, and its figure at the end of the line) is left out and
named (read_runs_noted), never read as a figure: "elapsed time per iteration (ms): 10" of 10402.9 would be 1000x.
The model and system of a log come from the command line (logs do not name a zoo model).
A log missing what a prediction needs raises one line naming what is missing.

Modules: common.py (shared checks), megatron.py, megatron_warmup.py (which iterations are warm-up),
torchtitan.py (torchtitan_ac.py: its activation checkpointing as the step model's recompute; torchtitan_model.py:
whether it trained --model), files.py (a RUNS file: which kind, its rows).
"""

from commbench.planner.calibrate.runlogs.common import (ANSI, CUT_NOTE, MAX_LOG_COUNT, _positive, _value, _whole,
                                                         cut_last_line)
from commbench.planner.calibrate.runlogs.files import (_JSON_LIST_START, _log_kind, _one_value_per_key, _read_rows,
                                                        is_json_list, read_runs, read_runs_noted, runs_file_text)
from commbench.planner.calibrate.runlogs.megatron import (MEGATRON_ARG, MEGATRON_ITER, MEGATRON_ITER_NUMBER,
                                                           MEGATRON_LOGGED_GBS, MEGATRON_MODEL_ARGS, MEGATRON_RUN_ARGS,
                                                           MEGATRON_SKIPPED, MEGATRON_TFLOPS, _check_iteration_order,
                                                           _graph_modules, check_logged_model, megatron_fsdp_note,
                                                           megatron_mtp_note, megatron_precision, parse_megatron_log)
from commbench.planner.calibrate.runlogs.torchtitan_model import (FLAVOR_PARAMS_AGREE, FLAVOR_PARAMS_RE,
                                                                   check_titan_model)
from commbench.planner.calibrate.runlogs.torchtitan import (DEVICE_GPU, TITAN_CONFIG, TITAN_CONVERTER_PRECISION,
                                                             TITAN_DEVICE, TITAN_MESH, TITAN_RANK, TITAN_RUN_CONFIG,
                                                             TITAN_STEP, _entry, check_titan_device, mesh_world_size,
                                                             parse_torchtitan_log, titan_precision)

__all__ = ["ANSI", "CUT_NOTE", "DEVICE_GPU", "FLAVOR_PARAMS_AGREE", "FLAVOR_PARAMS_RE", "MAX_LOG_COUNT", "MEGATRON_ARG",
           "MEGATRON_ITER", "MEGATRON_ITER_NUMBER", "MEGATRON_LOGGED_GBS", "MEGATRON_MODEL_ARGS", "MEGATRON_RUN_ARGS",
           "MEGATRON_SKIPPED", "MEGATRON_TFLOPS", "TITAN_CONFIG", "TITAN_CONVERTER_PRECISION", "TITAN_DEVICE",
           "TITAN_MESH", "TITAN_RANK", "TITAN_RUN_CONFIG", "TITAN_STEP", "check_logged_model", "check_titan_device",
           "check_titan_model", "cut_last_line", "is_json_list", "megatron_fsdp_note", "megatron_mtp_note",
           "megatron_precision", "mesh_world_size", "parse_megatron_log", "parse_torchtitan_log", "read_runs",
           "read_runs_noted", "runs_file_text", "titan_precision"]
