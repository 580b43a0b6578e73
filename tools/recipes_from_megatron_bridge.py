"""Write commbench/data/recipes.json: Megatron-Bridge's performance recipe per (release, model, GPU,
precision), read from a clone of github.com/NVIDIA-NeMo/Megatron-Bridge at each release's tag.

    python tools/recipes_from_megatron_bridge.py /path/to/Megatron-Bridge.git /path/to/Megatron-LM.git \
        > commbench/data/recipes.json

(git directories with the release tags, and the Megatron-LM commits the releases' submodules pin; PyYAML reads
the 25.09 YAML files.)

Each release names the megatron-core it runs ("megatron_core": version and source), which sets the precisions it
can run (commbench/planner/layout/recipes.py CORE_PRECISION_FLAGS): from v0.2.0 the 3rdparty/Megatron-LM
submodule pyproject.toml's [tool.uv.sources] installs (megatron/core/package_info.py at the submodule's commit);
v0.1.0rc3 has no submodule and pins a range (pyproject.toml `"megatron-core>=0.14.0a0,<0.15.0"`), whose lower
bound's MAJOR.MINOR is the version.

Each release names the Transformer Engine its container runs ("transformer_engine": version and source): uv.lock's
transformer-engine at the tag (the container's environment is that lock: docker/Dockerfile.ci `uv sync --locked`),
beside docs/releases/software-versions.md at v0.6.0 where it lists the container (25.09 to 26.06; it agrees with the
lock for each); validate_args and TransformerConfig check it (search/wgrad_graph.py).

Releases: NeMo Framework container -> Megatron-Bridge version, from docs/releases/software-versions.md
(@v0.6.0: 25.09 -> 0.1.0rc3, 25.11 -> 0.2.0, 26.02 -> 0.3.0, 26.04 -> 0.4.0, 26.06 -> 0.5.0) and, for the
patch containers, docs/versions1.json at v0.6.0 ("0.4.2 · 26.04.01", "0.5.1 · 26.06.01", "0.6.0 (latest) ·
26.08"). 26.02.01 is the patch container of 26.02; that page names no version for it, but it is r0.3.1 (docs/releases/known-issues.md
at v0.4.0: "Fixed in 26.02.01 (r0.3.1)"; docs/versions1.json at v0.6.0: "0.3.1 · 26.02.01"), and it reads
v0.3.1's recipes (the comment above PRECISIONS gives what that measured).

Sources (no code from the repository is run: the files are parsed, values taken as literals):
- 0.6.0 and later (tools/flat_recipes.py): src/megatron/bridge/perf_recipes/<family>/<gpu>/<model>.py, one
  function per recipe, `<model>_pretrain_<N>gpu_<gpu>_<prec>[_<config variant>]_config` (prec bf16, fp8cs,
  fp8mx, nvfp4; fp8sc has no planner precision). tools/perf_recipe_reader.py interprets the function and
  every helper and base recipe it calls in the repository (ast only; an `if` on a literal argument such as
  the precision is decided); what it cannot resolve statically is listed in the entry ("unresolved": the
  config path and why) and never filled in. Fields are read from the resolved ConfigContainer: a field no code
  read sets keeps Megatron-Core's class default (flat_recipes.CORE_DEFAULTS). num_gpus comes from the name;
  "variant" is `<N>gpu[_<config variant>]`, "config_variant" the suffix (null: the default recipe, which
  recipe_entry prefers on a tie). Recompute from the model config: granularity "full" -> full, with
  recompute_layers = recompute_num_layers under method "block" (0, every layer, under "uniform");
  "selective" -> the modules rule below (modules None is Megatron-Core's ["core_attn"]; [] recomputes
  nothing: none); None -> none. Dispatcher: moe_token_dispatcher_type "flex" -> flex, else alltoall; EP
  overlap: comm_overlap.overlap_moe_expert_parallel_comm; fused MoE: env_vars NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
  (what the workload configs' cutedsl_fused_grouped_mlp set, scripts/performance/perf_plugins.py at v0.5.1);
  FP8 attention: mixed_precision.fp8_dot_product_attention; FSDP: ddp.use_megatron_fsdp; offload:
  cpu_offloading_num_layers where model.cpu_offloading. Overlap flags from the recipe's own config, cited in
  "overlap_facts" (OVERLAP_FACTS is not consulted): tp_comm_overlap off where comm_overlap.tp_comm_overlap is
  False or there is no CommOverlapConfig (comm_overlap None); dp_overlap off where the CommOverlapConfig's
  overlap_grad_reduce is False (it replaces the DDP config's: training/comm_overlap.py setup), or, with no
  CommOverlapConfig, ddp.overlap_grad_reduce is False.
- 0.2.0 and later: scripts/performance/configs/<family>/*workload_base_configs.py, assignments
  `NAME = WorkloadBaseConfig(...)`, `NAME = replace(BASE, ...)`, `NAME = OTHER`; fields not set take
  WorkloadBaseConfig's defaults (scripts/performance/utils/utils.py). Names `<MODEL>[_PRETRAIN_CONFIG]_<GPU>_
  <PRECISION>` with `_V<n>` (the variant), `_BASE_CONFIG`, or no suffix (Kimi-K2's: one variant). Recompute
  and a MoE model's dispatcher are what the release's per-GPU function of configs/<family>/*_llm_pretrain.py
  leaves, run in order by tools/perf_script_reader.py (the last assignment wins: 26.02.01's Qwen3-235B-A22B
  B200/B300/H100 functions set "alltoall" after the preset's DeepEP backend; Kimi-K2's apply DeepEP on H100/B200;
  25.11's GPT-OSS modules stay without "selective" granularity: no recompute), mapped by recompute_from; the
  dispatcher's writes are cited in "script_facts" (file:line; [] where no code read sets it: Megatron-Core's
  default, not flex).
- 0.1.0rc3: scripts/performance/configs/<family>/*_llm_pretrain.yaml, `perf_matrix.<gpu>.num_gpus_N`
  (common + per-precision keys; cuda_graphs: true means TE per-layer graphs). Recompute, dispatcher and EP
  overlap in run_script.py's order: the config its main() builds in the model's branch for that GPU
  (tools/perf_script_reader.py run_script_config: DeepSeek-V3's recompute_modules per GPU, lines 89 and 91
  ["mla_up_proj", "mlp"] on H100 and [..., "moe_act"] on GB200, DeepEP and overlap_moe_expert_parallel_comm on
  H100), then the YAML's ConfigContainer.model keys (the OmegaConf merge: recompute_granularity), then the
  perf_matrix entry's recompute_num_layers (full, method block: utils/helpers.py set_recompute_overrides at that
  tag); mapped by recipe_mapping.recompute_from, as the flat recipes' resolved configs are.
- later_recipes: configs a release's published table runs that no recipe at its tag has, read the same way at the
  later commit that has them (LATER_RECIPES: commit, configs, why); each entry cites that commit and "after_tag".
Mapping onto the planner's recipe fields:
- recompute: recompute_num_layers set -> full, and recompute_layers = that count (the overrides set
  recompute_method "block": Megatron-Core recomputes that many layers of each model chunk, stores the rest;
  scripts/performance/utils/overrides.py _set_recompute_overrides at v0.3.0); recompute_modules -> the SET of
  modules it runs (commbench/planner/layout/recompute.py module_set_mode: [] none, one module its name, else the
  names "+"-joined sorted: ["layernorm", "moe_act"] -> "layernorm+moe_act"; a module the step model cannot price,
  moe or shared_experts, is refused); no modules -> the model's performance script: DeepSeek-V3 core_attn (its
  script sets recompute_granularity="selective" with Megatron's default module core_attn alone), every other family
  none (Qwen3 sets None; Llama and GPT-OSS leave Megatron's None). The tool imports commbench (run it with the repo
  on PYTHONPATH);
- cuda_graph: cuda_graph_impl "none" -> none (the 26.02 NVFP4 Llama recipes pair it with a
  full_iteration scope: graphs are off); cuda_graph_scope naming full_iteration (or cuda_graph_impl "full_iteration") -> full;
  an impl of transformer_engine / local -> layer; else none;
- cuda_graph_scope: under per-layer graphs the recipe's cuda_graph_scope list (Megatron-Core capture
  modules: attn, mlp, moe, moe_router, moe_preprocess, mamba; [] = the whole layer, as is the 25.09
  YAML's `cuda_graphs: true`, Megatron-Core 0.14's default scope "full"); [] otherwise;
- dispatcher: moe_token_dispatcher_type "flex" in the config the release's code builds -> flex; else alltoall;
  flex_backend: its moe_flex_dispatcher_backend (null with alltoall; 25.09's DeepSeek-V3 H100 rows: deepep,
  run_script.py's DeepEP); a dense model's: alltoall (a workload preset's backend alone never makes it flex);
- moe_a2a_overlap, fused_moe (cutedsl_fused_grouped_mlp), fp8_attention (fp8_dot_product_attention);
- cpu_offload_layers: cpu_offloading_num_layers (activations of that many layers kept in host memory,
  scripts/performance/utils/overrides.py _set_recompute_overrides; 0 when unset).
- fsdp_double_buffer: Megatron-FSDP's persistent double buffers, on where the config the release's code builds sets
  ddp.fsdp_double_buffer or ddp.nccl_ub (megatron-core turns double buffering on with NCCL user buffers), cited in
  "double_buffer_facts" (file:line); false without Megatron-FSDP (flat_recipes.fsdp_double_buffer). 0.1.0rc3: what
  run_script.py's main() sets after the YAML merge (perf_script_reader.run_script_fsdp_config).
- keep_fp8_transpose_cache: the resolved ddp.keep_fp8_transpose_cache under Megatron-FSDP (false without), cited in
  "transpose_cache_facts" (where the config last set it; [] where no code read sets it: megatron-core's default
  False). Megatron-Bridge's own Megatron-FSDP override sets it False (scripts/performance/utils/helpers.py:73 at
  v0.1.0rc3, overrides.py:82 at v0.3.1), and the Llama 3 8B H100 functions' `if cfg.ddp.use_megatron_fsdp:` branch
  sets it True (llama3_llm_pretrain.py:268 at v0.2.0), which no table recipe reaches (their H100 base configs run
  no Megatron-FSDP; a run that turns it on from the command line gets the override's False). 0.1.0rc3's YAML key
  keep_fp8_transpose_cache_when_using_custom_fsdp is read by no code.
- flat recipes (0.6.0 on) only: fsdp_replicas (ddp.num_distributed_optimizer_instances under Megatron-FSDP, else 1)
  and fsdp_outer (ddp.outer_dp_sharding_strategy under Megatron-FSDP, else "no_shard"): HSDP; offload_modules and
  min_offloaded_tensor_size (model.offload_modules / min_offloaded_tensor_size where
  model.fine_grained_activation_offloading, else [] and 0): module-level activation offload.
- tp_comm_overlap / dp_overlap (TE userbuffers TP overlap where TP > 1 and sequence parallel; DDP
  overlap_grad_reduce): on, as the recipes of the Llama, Qwen3 and GPT-OSS families set them (a
  CommOverlapConfig(tp_comm_overlap=True) or tp > 1), unless a fact of OVERLAP_FACTS holds at the release's
  commit: each names the file (found by its path pattern), the literal statement and the GPU its enclosing
  function (or condition) names; the entry lists where each was found ("overlap_facts": file:line).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # its sibling modules, when loaded from elsewhere
from flat_recipes import EXPERTS, fsdp_double_buffer, keep_fp8_transpose_cache, perf_recipes  # noqa: E402
from perf_recipe_values import Unknown  # noqa: E402
from perf_script_reader import (at_commit, dispatcher_of, field, gpu_function_config, run_script_config,  # noqa: E402
                                run_script_fsdp_config, where)
from recipe_mapping import DEFAULTS, entry, git, recompute_from, recompute_of  # noqa: E402,F401 (recompute_of: the tests read it here)

RELEASES = (("25.09", "v0.1.0rc3"), ("25.11", "v0.2.0"), ("26.02", "v0.3.0"), ("26.02.01", "v0.3.1"),
            ("26.04", "v0.4.0"), ("26.04.01", "v0.4.2"), ("26.06", "v0.5.0"), ("26.06.01", "v0.5.1"),
            ("26.08", "v0.6.0"))
MODELS = {"DEEPSEEK_V3": "deepseek-v3", "QWEN3_30B_A3B": "qwen3-30b-a3b", "QWEN3_235B_A22B": "qwen3-235b-a22b",
          "GPT_OSS_120B": "gpt-oss-120b", "LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3.1-70b",
          "LLAMA31_405B": "llama3.1-405b", "KIMI_K2": "kimi-k2", "DEEPSEEK_V4_FLASH": "deepseek-v4-flash",
          # Nemotron-3-Ultra: v0.6.0's perf_recipes/nemotronh/{gb300,gb200}/nemotronh.py (26.08 the first release with
          # it; no workload config of an older release names it). Unlike Nano and Super (below) its rows run
          # Megatron-FSDP HSDP with the experts' FC1 output offloaded, which the recipe table reads (fsdp_replicas,
          # fsdp_outer, offload_modules, min_offloaded_tensor_size).
          "NEMOTRON_3_ULTRA": "nemotron-3-ultra-550b-a55b"}
# Nemotron-3 Nano / Super (configs/nemotronh/nemotron_3_workload_base_configs.py, v0.4.0 on) are not read
# yet: with their recipes (no recompute, per-layer graphs of attn + mamba + router) the step model predicts
# the published hybrid runs 6-48% too fast (benchmarks/family_coverage.py: Nano 1.7% -> 8.9%, Super 9.2% ->
# 30.5% median |error|) because its hybrid GPU time is short, which the eager default's launch time hides.
# Re-measured with the SSD scan as its own bf16 kernels and fp32 chunk states (step/mamba.py) and terms
# refitted: Nano 2.4% -> 8.4%, Super 9.9% -> 23.0%, benchmarks/newer_releases.py 4.8% -> 8.8% (MoE 5.1 ->
# 12.1): still short (26.04 rows: Nano +6-18%, Super +15-33% with graphs), so still not read.
# Re-measured with the Mamba mixer's HBM traffic kernel by kernel (commit d3d7790, step/mamba.py
# MIXER_KERNEL_BYTES) and terms refitted: family_coverage Nano 1.9% -> 7.6%, Super 10.3% -> 24.0%,
# newer_releases.py 5.7% -> 8.0% (MoE 6.1 -> 9.0); the 26.04.01 rows with recipes are predicted 8-15% (Nano)
# and 9-38% (Super) too fast. The calibration's Nano rows (26.02.01) are modelled with the default recipe
# (selective recompute, eager launches: 2.7 s of a 16 s step on GB200) and the fit hands the hybrid's GPU time
# back through hbm_efficiency. Mapping 26.02.01 to r0.3.1 while this tool also read the Nano recipe made
# held-out worse (GB300 6.6% -> 7.4%, newer_releases 4.7% -> 6.9%), so 26.02.01 stayed on v0.3.0 until
# then. With the Nemotron-3 recipes not read, r0.3.1's recipes for the families read here (Qwen3: HybridEP on
# GB200/GB300 and for Qwen3-30B-A3B, EP overlap off on B300 and H100, Qwen3-30B-A3B mbs 4 on B200 as the 26.02.01
# table publishes; Kimi-K2's first recipes) leave the held-out tables where they were: GB300 6.9%, leave-one-GPU-out
# MoE 6.9% (dense 2.8% -> 3.0%), leave-one-release-out 26.02 5.4% (MoE 6.2% -> 6.1%), with the shipped terms
# (measured while the table read Qwen3-235B-A22B's inert DeepEP preset on B200/B300/H100 as flex: those
# functions set "alltoall" after it, qwen3_llm_pretrain.py@v0.3.1 lines 133, 159, 185).
# Re-measured (session 39, fix-CJ) with the SSD kernels at their measured throughput (step/mamba.py
# SSD_TENSOR_FRACTION, 0.18 of the bf16 rate, not attention_efficiency 0.40): the SSD is 13.6 MFLOP per token per
# Mamba layer (fwd + bwd) against 232 of Nano's in_proj / out_proj GEMMs, 5 -> 12 ms of a 500 ms micro-batch (GB200
# mbs 2), so it moves the hybrid rows 1-2 points: reading both families (flat_recipes.EXPERTS: Nano 128, Super 512;
# recompute_modules "moe" of Nano's H100 BF16 recipe unpriced) gives family_coverage Nano 3.7% -> 8.2%, Super 6.5% ->
# 18.1%, newer_releases.py 4.3% -> 6.8% (MoE 4.5 -> 7.8) with the shipped terms; refitted from FIT_START, newer
# releases 6.8% (held-out GB300 5.8%, attention_efficiency and gemm_efficiency_hopper at bounds). The 26.04.01 rows
# with their recipes: Nano +7..+14%, Super +8..+31% (GB200 mbs 2: 448 ms predicted per micro-batch, 500 published;
# the Mamba layers' graphs (scope "mamba": the whole MambaLayer, Triton kernels included, megatron/core/ssm/
# mamba_layer.py at core_v0.16.1) leave them no launch time to hide the gap).
# Re-measured (session 40, fix-DN) at STEP_MODEL 2026-12-06.13 with the shipped terms, not read -> read (both
# families, as session 39 read them): family_coverage Nano 3.7% -> 8.2%, Super 6.5% -> 18.1%; newer_releases.py 4.3%
# -> 6.4% (MoE 4.6 -> 7.8); vendor_layouts.py median rank as published 11 -> 14 (within band 67% -> 68%; search's flags
# rank 8 both, 70% -> 69%); planner_calibration.py held-out GB300 6.3% both, leave-one-release-out 26.02 5.9% -> 5.1%
# (the 26.02.01 Nano rows get their recipe), 25.11 6.7% both, in-sample 3.7% both: still not read. Candidates for
# the missing GPU time sized from sources (GB200 Nano mbs 2 with its 26.04.01 recipe: 448 ms predicted per
# micro-batch, 500 published; GEMMs 185, memory-bound 190, EP 40, attention 21, launches 10):
# - dropless MoE's forward host sync: TEGroupedMLP.forward's `tokens_per_expert.tolist()` (megatron/core/transformer/
#   moe/experts.py line 344 at Megatron-LM 2edffad, v0.4.2's submodule, core 0.17.1; line 645 at core_v0.16.1) drains
#   the queue in every MoE layer, so the forward's expert launches hide only behind the forward expert GEMMs, not
#   behind the graphed Mamba layers the host ran ahead of. Priced (kernels.host_time_s in two stretches: the forward
#   third of the experts' launches beside the forward expert GEMMs, the rest beside the rest; patch kept out): the
#   26.04.01 rows with recipes Nano GB200 +11.7% -> +10.1%, Super GB200 MXFP8 +20.9% -> +19.2%; family_coverage not
#   read 3.4% / 6.9%, read 7.6% / 15.9%. Held out mixed (shipped terms): leave-one-release-out 26.02 5.9% -> 4.7%,
#   25.11 6.7% both, GB300 6.3% both, newer_releases 4.3% -> 4.6%, vendor_layouts within band 67% -> 65%; refitted
#   from FIT_START newer releases 4.0%, GB300 5.2% with gemm_efficiency_hopper at its bound: not kept. 1-2 points of
#   the gap, not the gap.
# - the SSD backward's fp32 scratch (mamba_ssm ssd_chunk_state.py _chunk_state_bwd_db, ssd_chunk_scan.py
#   _chunk_scan_bwd_dC / _dcb at e9594ce): nsplits = 1 at training sizes (batch x chunks x heads >= SMs), so dB, dC,
#   dCB and the ddA tiles are ~30 KB per token per Mamba layer written and read: under 1% of a micro-batch.
# - the router (sigmoid top-k with expert bias and the sequence aux loss, fp32 scores, forward + backward): ~64 B x
#   experts per token per MoE layer, 8 KB (Nano) against ~885 KB of the MoE block's other memory-bound kernels.
# - why the default recipe lands close: its "selective" recompute is priced attention_s/3 + memory_bound_s/6 over
#   every layer (step/evaluate.py), but core_attn recompute re-runs only the 6 (Nano) / 8 (Super) attention cores:
#   32 of its 39 ms per GB200 micro-batch is that memory_bound_s/6 share, beside 43 ms of eager launches (10 graphed).
#   The hybrid's missing ~50 ms (10%) is hidden by that charge, not found (the H100 FP8 recipe keeps selective
#   recompute, so its +0.1% says nothing). Open lead: the gap sits on the Blackwell MXFP8 / NVFP4 rows, whose
#   grouped GEMMs run at the 8-bit anchor measured at DeepSeek-V3's K 7168 x N 2048; Nano's are K 2688 / N 1856,
#   Super's latent experts K 1024 (fc1) and N 1024 (fc2); no published MXFP8 / NVFP4 grouped-GEMM throughput at
#   those shapes was found to price it.
# Add them here ("NEMOTRON_3_NANO": "nemotron-3-nano-30b-a3b", "NEMOTRON_3_SUPER": ...) once their recipes do not
# make the hybrid runs faster than measured.
PRECISIONS = {"BF16": "bf16", "FP8_CS": "fp8", "FP8_MX": "mxfp8", "NVFP4": "nvfp4"}
NAME = re.compile(r"^(?P<model>[A-Z0-9_]+?)_(?:PRETRAIN_CONFIG_)?(?P<gpu>GB300|GB200|B300|B200|H100)_"
                  r"(?P<prec>BF16|FP8_CS|FP8_MX|NVFP4)(?:_BASE_CONFIG|_V(?P<ver>\d+))?$")
# (models, GPU or None, precision or None, field, path pattern, literal statement): the recipe turns the
# overlap off. Checked at every release's commit: a fact whose statement is not found there does not apply.
PERF = r"scripts/performance/configs/[a-z0-9_]+/"
OVERLAP_FACTS = (
    # DeepSeek-V3's recipe: CommOverlapConfig(tp_comm_overlap=False) (deepseek_v3.py; 25.09 line 316,
    # 25.11 352, 26.02 359, 26.04 168/313, 26.06 212/357); the performance configs do not turn it on.
    (("deepseek-v3",), None, None, "tp_comm_overlap", r"src/megatron/bridge/recipes/deepseek/deepseek_v3\.py$",
     "tp_comm_overlap=False"),
    # DeepSeek-V3 on H100: overlap_grad_reduce = False (25.09 run_script.py line 95; from 25.11 the H100
    # function of deepseek_llm_pretrain.py)
    (("deepseek-v3",), "h100", None, "dp_overlap", r"scripts/performance/run_script\.py$",
     "recipe.comm_overlap.overlap_grad_reduce = False"),
    (("deepseek-v3",), "h100", None, "dp_overlap", PERF + r"deepseek_llm_pretrain\.py$",
     "cfg.comm_overlap.overlap_grad_reduce = False"),
    # Qwen3-235B-A22B on H100: CommOverlapConfig(tp_comm_overlap=False) (qwen3_llm_pretrain.py, from 25.11;
    # 25.09's run_script.py turns it on for every GPU)
    (("qwen3-235b-a22b",), "h100", None, "tp_comm_overlap", PERF + r"qwen3_llm_pretrain\.py$",
     "tp_comm_overlap=False"),
    # Llama NVFP4: tp_comm_overlap = False if precision == "nvfp4" (llama3 / llama31 _llm_pretrain.py, 25.11 on)
    (("llama3-8b", "llama3.1-70b"), None, "nvfp4", "tp_comm_overlap", PERF + r"llama3_llm_pretrain\.py$",
     'tp_comm_overlap = False if precision == "nvfp4"'),
    (("llama3.1-405b",), None, "nvfp4", "tp_comm_overlap", PERF + r"llama31_llm_pretrain\.py$",
     'tp_comm_overlap = False if precision == "nvfp4"'),
    # Kimi-K2: the recipe's CommOverlapConfig(tp_comm_overlap=False) (kimi_k2.py); on H100 also
    # overlap_grad_reduce = False (kimi_llm_pretrain.py's H100 function)
    (("kimi-k2",), None, None, "tp_comm_overlap", r"src/megatron/bridge/recipes/kimi/kimi_k2\.py$",
     "tp_comm_overlap=False"),
    (("kimi-k2",), "h100", None, "dp_overlap", PERF + r"kimi_llm_pretrain\.py$",
     "cfg.comm_overlap.overlap_grad_reduce = False"),
)


def parse_workload_file(text: str) -> dict[str, dict]:
    """NAME -> fields for every literal WorkloadBaseConfig / replace / alias assignment."""
    env: dict[str, dict] = {}
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Name) and value.id in env:
            env[name] = dict(env[value.id])
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            if value.func.id == "WorkloadBaseConfig":
                fields = dict(DEFAULTS)
            elif value.func.id == "replace" and value.args and isinstance(value.args[0], ast.Name) \
                    and value.args[0].id in env:
                fields = dict(env[value.args[0].id])
            else:
                continue
            for kw in value.keywords:
                if kw.arg is not None:
                    fields[kw.arg] = ast.literal_eval(kw.value)
            env[name] = fields
    return env


def fact_line(text: str, literal: str, gpu: str | None, model: str) -> int | None:
    """1-based line of `literal` in `text` where it applies to `gpu`: the enclosing `def` (or, in a script,
    the nearest condition naming a GPU) names that GPU (`gpu` None: anywhere) and, for a function naming
    a model size, this model's; None when it is not there."""
    lines = text.splitlines()
    size = re.search(r"\d+b(?:_a\d+b)?", model.replace(".", "").replace("-", "_"))
    for number, line in enumerate(lines, 1):
        if literal not in line or line.lstrip().startswith("#"):
            continue
        if gpu is None:
            return number
        context = next((c for c in reversed(lines[:number - 1])
                        if c.startswith("def ") or "args.gpu" in c), "")
        names_size = re.search(r"_\d+b", context)
        if re.search(rf"(?<![a-z0-9]){gpu}(?![a-z0-9])", context.lower()) and (not names_size or (size and size.group(0) in context)):
            return number
    return None


def overlap_of(repo: str, commit: str, paths: list[str], model: str, gpu: str, precision: str) -> dict:
    """tp_comm_overlap, dp_overlap (on unless an OVERLAP_FACTS fact holds) and where the facts were found."""
    out = {"tp_comm_overlap": True, "dp_overlap": True, "overlap_facts": []}
    for models, fact_gpu, fact_prec, field, pattern, literal in OVERLAP_FACTS:
        if model not in models or fact_gpu not in (None, gpu) or fact_prec not in (None, precision):
            continue
        for path in (p for p in paths if re.fullmatch(pattern, p) or re.search(pattern, p)):
            # a performance config's functions are per GPU: the statement counts in this GPU's function
            where = fact_gpu or (gpu if pattern.startswith(PERF) else None)
            number = fact_line(git(repo, "show", f"{commit}:{path}"), literal, where, model)
            if number is not None:
                out[field] = False
                out["overlap_facts"].append(f"{path}:{number}")
                break
    return out


def with_overlap(rows: list[dict], repo: str, commit: str) -> list[dict]:
    paths = git(repo, "ls-tree", "-r", "--name-only", commit).split()
    return [{**r, **overlap_of(repo, commit, paths, r["model"], r["gpu"], r["precision"])} for r in rows]


def script_fields(repo: str, commit: str, paths: list[str], row: dict, model_key: str) -> dict:
    """Recompute and, for a MoE model, the dispatcher as the release's per-GPU function leaves them for the workload
    preset (perf_script_reader; a dense model's dispatcher stays alltoall: apply_flex_dispatcher_backend returns early
    without experts). Recompute through recipe_mapping.recompute_from: recompute_modules count only under
    granularity "selective" (Megatron-Core's experts.py / transformer_layer.py read them only then), which 0.2.0's
    utils/helpers.py set_recompute_overrides did not set with the modules (0.3.0's overrides.py does)."""
    function, config = gpu_function_config(at_commit(repo, commit), paths, row["model"], model_key, row["gpu"],
                                           row["precision"], row["variant"], row["file"], row["config"])
    if not function:
        raise ValueError(f"{row['config']} ({row['file']} at {commit}): no per-GPU function of "
                         f"scripts/performance/configs/ builds it ({model_key}_pretrain_config_{row['gpu']})")
    unresolved: list[str] = []

    def value(name: str):
        held = field(config, "model", name)
        if isinstance(held, Unknown):
            unresolved.append(f"model.{name}: {held.why}")
            return None
        return held
    recompute, layers = recompute_from(value, row["model"])
    out = {"recompute": recompute, "recompute_layers": layers, "script_facts": []}
    if EXPERTS.get(row["model"]) is not None:
        out.update(dispatcher_of(config))
        unresolved += out.pop("unresolved", [])
    out.update(double_buffer_of(config, bool(row.get("fsdp")), unresolved))
    if unresolved:
        out["unresolved"] = sorted(set(unresolved))
    return out


def double_buffer_of(config: object, fsdp: bool, unresolved: list[str]) -> dict:
    """flat_recipes.fsdp_double_buffer and keep_fp8_transpose_cache of a config the scripts build
    (perf_script_reader)."""
    names = ("fsdp_double_buffer", "nccl_ub", "keep_fp8_transpose_cache")
    values, at = {n: field(config, "ddp", n) for n in names}, {n: where(config, "ddp", n) for n in names}
    return dict(fsdp_double_buffer(fsdp, values, at, unresolved),
                **keep_fp8_transpose_cache(fsdp, values, at, unresolved))


def workload_recipes(repo: str, release: str, tag: str) -> list[dict]:
    commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
    paths = git(repo, "ls-tree", "-r", "--name-only", commit).split()
    out = []
    for path in git(repo, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs").split():
        if not path.endswith("workload_base_configs.py"):
            continue
        configs = parse_workload_file(git(repo, "show", f"{commit}:{path}"))
        matches = {name: NAME.match(name) for name in configs}
        # a file that names configs without a _V<n>/_BASE_CONFIG suffix (Kimi-K2's) has one variant per
        # (model, GPU, precision); where a suffixed sibling exists the bare name is not a recipe of its own
        suffixed = {(m["model"], m["gpu"], m["prec"]) for name, m in matches.items()
                    if m and (m["ver"] or name.endswith("_BASE_CONFIG"))}
        for name, fields in configs.items():
            match = matches[name]
            if not match or match["model"] not in MODELS:
                continue
            bare = not match["ver"] and not name.endswith("_BASE_CONFIG")
            if bare and (match["model"], match["gpu"], match["prec"]) in suffixed:
                continue
            model = MODELS[match["model"]]
            row = {"release": release, "model": model, "gpu": match["gpu"].lower(),
                   "precision": PRECISIONS[match["prec"]], "variant": f"v{match['ver'] or 1}",
                   "config": name, "file": path, "commit": commit, **entry(fields, model)}
            out.append({**row, **script_fields(repo, commit, paths, row, match["model"].lower())})
    return out


YAML_MODELS = {"deepseek_v3": "deepseek-v3", "qwen3_30b_a3b": "qwen3-30b-a3b", "qwen3_235b_a22b": "qwen3-235b-a22b",
               "llama3_8b": "llama3-8b", "llama3_70b": "llama3.1-70b", "llama31_405b": "llama3.1-405b"}


def yaml_recipes(repo: str, release: str, tag: str) -> list[dict]:
    import yaml
    commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
    out = []
    for path in git(repo, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs").split():
        stem = path.rsplit("/", 1)[-1].removesuffix("_llm_pretrain.yaml")
        if stem not in YAML_MODELS:
            continue
        model = YAML_MODELS[stem]
        model_name, model_size = stem.split("_", 1)   # run_script.py's --model_name / --model_size
        doc = yaml.safe_load(git(repo, "show", f"{commit}:{path}"))
        yaml_model = ((doc.get("ConfigContainer") or {}).get("model") or {})
        for gpu, by_count in (doc.get("perf_matrix") or {}).items():
            for count_key, table in by_count.items():
                for prec_key, prec in (("bf16", "bf16"), ("fp8_cs", "fp8"), ("fp8_mx", "mxfp8")):
                    if prec_key not in table:
                        continue
                    f = dict(table.get("common") or {}, **(table.get(prec_key) or {}))
                    script = run_script_fields(repo, commit, model, model_name, model_size, gpu, prec, yaml_model, f)
                    fsdp = bool(f.get("use_megatron_fsdp"))
                    unresolved = script.pop("unresolved", [])
                    script.update(double_buffer_of(run_script_fsdp_config(
                        at_commit(repo, commit), model, model_name, model_size, gpu, prec, fsdp), fsdp, unresolved))
                    if unresolved:
                        script["unresolved"] = sorted(set(unresolved))
                    out.append({"release": release, "model": model, "gpu": gpu, "precision": prec, "variant": "v1",
                                "config": f"perf_matrix.{gpu}.{count_key}.{prec_key}", "file": path, "commit": commit,
                                "num_gpus": int(count_key.removeprefix("num_gpus_")), "tp": f.get("tp", 1),
                                "pp": f.get("pp", 1), "vp": f.get("vp") or 1, "cp": f.get("cp", 1), "ep": f.get("ep", 1),
                                "etp": f.get("etp") or 1, "mbs": f.get("mbs", 1), "gbs": f.get("gbs", 1),
                                "recompute": script.pop("recompute"),
                                "cuda_graph": "layer" if f.get("cuda_graphs") else "none", "cuda_graph_scope": [],
                                "dispatcher": script.pop("dispatcher"), "flex_backend": script.pop("flex_backend"),
                                "moe_a2a_overlap": script.pop("moe_a2a_overlap"), "fused_moe": False,
                                "fp8_attention": False, "fsdp": bool(f.get("use_megatron_fsdp")),
                                "cpu_offload_layers": int(f.get("cpu_offloading_num_layers") or 0),
                                "recompute_layers": script.pop("recompute_layers"), **script})
    return out


def run_script_fields(repo: str, commit: str, model: str, model_name: str, model_size: str, gpu: str, prec: str,
                      yaml_model: dict, preset: dict) -> dict:
    """Recompute, dispatcher and EP overlap of a 0.1.0rc3 entry, in run_script.py's order: its branch for the model
    and GPU (perf_script_reader.run_script_config), then the YAML's ConfigContainer.model keys (OmegaConf merge),
    then the perf_matrix entry's recompute_num_layers (utils/helpers.py set_recompute_overrides: full, "block")."""
    config = run_script_config(at_commit(repo, commit), model, model_name, model_size, gpu, prec)
    unresolved: list[str] = []

    def value(name: str):
        if preset.get("recompute_num_layers"):
            return {"recompute_granularity": "full", "recompute_method": "block",
                    "recompute_num_layers": preset["recompute_num_layers"]}.get(name, field(config, "model", name))
        held = yaml_model[name] if name in yaml_model else field(config, "model", name)
        if isinstance(held, Unknown):
            unresolved.append(f"model.{name}: {held.why}")
            return None
        return held
    recompute, layers = recompute_from(value, model)
    out = {"recompute": recompute, "recompute_layers": layers, "dispatcher": "alltoall", "flex_backend": None,
           "moe_a2a_overlap": False, "script_facts": []}
    if EXPERTS.get(model) is not None:   # a dense model has no dispatcher (alltoall, as the mapping writes it)
        out.update(dispatcher_of(config))
        unresolved += out.pop("unresolved", [])
        a2a = field(config, "comm_overlap", "overlap_moe_expert_parallel_comm")
        if isinstance(a2a, Unknown):
            unresolved.append(f"comm_overlap.overlap_moe_expert_parallel_comm: {a2a.why}")
        out["moe_a2a_overlap"] = a2a is True
        facts = [where(config, "model", "recompute_modules")] if recompute not in ("none", "full", "core_attn") \
            else []
        out["script_facts"] += [w for w in facts if w]
    if unresolved:
        out["unresolved"] = sorted(set(unresolved))
    return out


# Recipes committed after a release's tag that its published table runs (the release's own recipe has other sizes),
# read at that commit as the release's are and kept apart in "later_recipes": never a release's feature, plan or
# default (layout/recipes.py reads only "recipes" for those); calibrate/published.py models a row with one only where
# its sizes are the row's and no recipe of the release's has them. Each: (release, commit, the configs the table's
# rows run, why).
LATER_RECIPES = (
    ("26.02.01", "7260d6214afff7f00c35c3cc4d47d9c458d9310b",
     ("GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2", "GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2"),
     "the 26.02.01 table's GPT-OSS-120B B300/B200 runs (EP 8, gbs 1280, mbs 4; performance-summary archive @067f987) "
     "are this commit's GPT_OSS_120B_PRETRAIN_CONFIG_B300/B200_BF16_V2 (perf optimizations- GPT-OSS 120B #2906, "
     "2026-03-23: expert_model_parallel_size=8, moe_flex_dispatcher_backend=\"hybridep\", applied by its "
     "gpt_oss_llm_pretrain.py); v0.3.1 (2026-03-20), not its ancestor, runs EP 64 with alltoall"),
)


def later_recipes(repo: str, releases: dict[str, dict], recipes: list[dict]) -> list[dict]:
    """The LATER_RECIPES configs read at their commit, each citing it ("after_tag": the release's tag; "why"); a
    config whose sizes there are the release's own is refused (the release's recipe already has them)."""
    out = []
    for release, commit, configs, why in LATER_RECIPES:
        tag = releases[release]["megatron_bridge"]
        own = {e["config"]: e for e in recipes if e["release"] == release}
        rows = {r["config"]: r for r in with_overlap(workload_recipes(repo, release, commit), repo, commit)}
        for config in configs:
            row, mine = rows[config], own.get(config)
            sizes = ("num_gpus", "tp", "pp", "vp", "cp", "ep", "etp", "mbs", "gbs")
            if mine is not None and all(row[k] == mine[k] for k in sizes):
                raise ValueError(f"{config} at {commit} has {release}'s own sizes: not a later recipe")
            out.append({**row, "after_tag": tag, "why": why})
    return out


CORE_PIN = re.compile(r'"megatron-core(?:\[[^\]]*\])?>=(\d+)\.(\d+)[^",]*,<[^"]*"')


def megatron_core(repo: str, tag: str, mlm: str) -> dict[str, str]:
    """The megatron-core a Megatron-Bridge release runs: its 3rdparty/Megatron-LM submodule's version
    (megatron/core/package_info.py at that commit of `mlm`), else its pyproject.toml pin's lower bound (MAJOR.MINOR)."""
    sub = git(repo, "ls-tree", tag, "3rdparty/Megatron-LM").split()
    if sub:
        commit = sub[2]
        info = git(mlm, "show", f"{commit}:megatron/core/package_info.py")
        parts = dict(re.findall(r"^(MAJOR|MINOR|PATCH|PRE_RELEASE)\s*=\s*['\"]?([^'\"\s]*)", info, re.M))
        version = f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE', '')}"
        return {"version": version, "source": f"3rdparty/Megatron-LM submodule at {commit} (pyproject.toml "
                                              f"[tool.uv.sources] megatron-core path), megatron/core/package_info.py {version}"}
    pyproject = git(repo, "show", f"{tag}:pyproject.toml").splitlines()
    line, pin = next((i + 1, m) for i, text in enumerate(pyproject) for m in [CORE_PIN.search(text)] if m)
    return {"version": f"{pin.group(1)}.{pin.group(2)}",
            "source": f"pyproject.toml:{line} {pin.group(0).strip(chr(34))} (no 3rdparty/Megatron-LM submodule)"}


TE_PACKAGE = re.compile(r'^\[\[package\]\]\nname = "transformer-engine"\nversion = "([^"]+)"', re.M)
DOC_RELEASE = re.compile(r"^## NeMo Framework (\S+)$(.*?)(?=^## |\Z)", re.M | re.S)
DOC_TE = re.compile(r"^\| Transformer Engine \| ([^|]+?) \|$", re.M)
VERSIONS_DOC, VERSIONS_DOC_TAG = "docs/releases/software-versions.md", "v0.6.0"


def transformer_engine(repo: str, release: str, tag: str) -> dict[str, str]:
    """The Transformer Engine a release's container runs: uv.lock's transformer-engine package at the tag (the
    container's environment is Megatron-Bridge's locked one: docker/Dockerfile.ci `uv sync --locked --all-extras`;
    from v0.4.0 docker/common/fw_pyproject.toml leaves transformer-engine to it, "Installed by MBridge"), with the
    version docs/releases/software-versions.md at v0.6.0 gives that container where it lists it (25.09 to 26.06)."""
    lock = git(repo, "show", f"{tag}:uv.lock")
    found = TE_PACKAGE.search(lock)
    line = lock.count("\n", 0, found.start()) + 3   # the version line, two below [[package]]
    source = f"uv.lock:{line} transformer-engine {found.group(1)} at {tag}"
    notes = git(repo, "show", f"{VERSIONS_DOC_TAG}:{VERSIONS_DOC}")
    doc = {m.group(1): DOC_TE.search(m.group(2)) for m in DOC_RELEASE.finditer(notes)}
    if doc.get(release):
        source += (f"; {VERSIONS_DOC} at {VERSIONS_DOC_TAG}, NeMo Framework {release}: "
                   f"Transformer Engine {doc[release].group(1)}")
    else:
        source += f" ({VERSIONS_DOC} at {VERSIONS_DOC_TAG} lists no {release})"
    return {"version": found.group(1), "source": source}


def main(repo: str, mlm: str) -> None:
    releases: dict[str, dict] = {}
    recipes: list[dict] = []
    seen: dict[str, str] = {}
    for release, tag in RELEASES:
        commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
        releases[release] = {"megatron_bridge": tag, "commit": commit, "megatron_core": megatron_core(repo, tag, mlm),
                             "transformer_engine": transformer_engine(repo, release, tag)}
        if tag in seen:
            releases[release]["same_as"] = seen[tag]
            continue
        seen[tag] = release
        if tag.startswith("v0.1"):
            rows = with_overlap(yaml_recipes(repo, release, tag), repo, releases[release]["commit"])
        elif git(repo, "ls-tree", "--name-only", tag, "src/megatron/bridge/perf_recipes/").strip():
            rows = perf_recipes(repo, release, tag, MODELS)   # the overlap flags come from the recipe's own config
        else:
            rows = with_overlap(workload_recipes(repo, release, tag), repo, releases[release]["commit"])
        recipes += sorted(rows, key=lambda r: (r["model"], r["gpu"], r["precision"], r["variant"]))
    about = ("Megatron-Bridge performance recipes per release, generated by tools/recipes_from_megatron_bridge.py "
             "(its docstring gives the sources and the mapping). Each recipe cites "
             "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/<commit>/<file>, assignment <config>. "
             "A release with same_as reads that release's recipes (same Megatron-Bridge version). megatron_core: the "
             "megatron-core a release runs (version, source), which sets the precisions it can run "
             "(commbench/planner/layout/recipes.py CORE_PRECISION_FLAGS). transformer_engine: the Transformer Engine "
             "its container runs (version, source: the tag's uv.lock, and the release notes where they list it). "
             "later_recipes: "
             "recipes committed after a release's tag (after_tag) that its published table runs (why); published "
             "rows only, never a release's features.")
    print("{")
    print(f'"about": {json.dumps(about)},')
    print(f'"releases": {json.dumps(releases, indent=1)},')
    print('"recipes": [')
    print(",\n".join(json.dumps(r) for r in recipes))
    print("],")
    print('"later_recipes": [')
    print(",\n".join(json.dumps(r) for r in later_recipes(repo, releases, recipes)))
    print("]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
