"""FSDP as the data-parallel mode (ZeRO-3): Megatron-FSDP with `--data-parallel-sharding-strategy
optim_grads_params` and TorchTitan's FSDP2 (`fully_shard` per transformer block), charged as they run.

Per micro-batch, one FSDP unit per layer (Megatron-FSDP wraps every TransformerLayer, TorchTitan every block;
a hybrid's Mamba layers are not units: below; Rajbhandari et al., ZeRO, arXiv 1910.02054; Zhao et al.,
PyTorch FSDP, arXiv 2304.11277):
- forward: each unit's parameters are all-gathered (bf16, or fp8 with fp8_param_gather: the 8-bit
  recipes; dp_sync.param_gather_bytes) before it runs and freed after;
- backward: gathered again, and its gradients reduce-scattered (bf16) once computed;
- overlap: the next unit's gather is prefetched behind the current unit's compute, a unit's
  reduce-scatter runs behind the next unit's backward; the first unit's gather of each pass and the
  last unit's reduce-scatter cannot hide. Forward gathers share the forward third of the compute,
  backward gathers and reduce-scatters the backward two thirds (`overlap_efficiency` of a window
  hides traffic, as for the distributed optimizer). Without dp_overlap nothing hides.
Dense parameters over DP x CP, expert parameters over EDP, as the distributed optimizer shards
them; the optimizer step updates the shard (as the distributed optimizer).
Memory per GPU: bf16 weight and gradient shards (1/group) plus the unit buffers Megatron-FSDP's launch holds
(below, "Unit buffers").

Unit buffers (megatron-core core_v0.16.1, megatron/core/distributed/fsdp/src/megatron_fsdp/; the same code at
every recipe-table release's megatron-core, 0.14 to 0.19): a unit's gathered weights and its unsharded gradients
live in temporary buckets, allocated per unit and freed as below, unless --fsdp-double-buffer (layout
fsdp_double_buffer; NCCL user buffers force it, pgb:1588-1595).
- with --fsdp-double-buffer: pgb:1874-1887 builds FixedPoolAllocators of UB_BUFFER_NUM = 2 buffers each for the
  weights, the MXFP8 transposes and the gradients, named persistent buffers (global memory buffer get_tensor,
  pgb:768-772) that stay allocated; the all-gather prefetch stops before a third unit (pgb:3476-3535,
  need_skip_prefetch, pgb:3518-3527) and the gradient path keeps at most two units' buckets (_enforce_double_buffer_limit,
  pgb:3127-3147, called before a unit's first gradient bucket is taken, mf:563-566). Charged: two units' weights,
  two units' gradients, and at MXFP8 two units' transposes beside the row-wise pair (the transpose pool persists
  once the first backward has filled it). The pool is sized by the most numerous group of equal-shaped units
  (FixedPoolAllocator.__init__, pgb:676-692; other units take dynamic buckets beside it): charged at the largest
  unit.
- without it: the communication unit is C = max(1e9, 2 x the mean unit's parameters) elements (mf:375-399; the
  launch sets no --suggested-communication-unit-size). The forward and backward prefetch add units while the
  prefetched ones hold fewer than C/2 elements (pgb:3535-3558), so 1 + ceil(C/2 / u) units are gathered. A unit's
  gradient bucket is freed only when popped from GradReducePipeline's queue (pgb:3316-3335), which pops, before a
  new unit's reduce-scatter is queued, while the queued buckets exceed C (pgb:3093-3116, mf:654-667): floor(C / u)
  queued units, the one just queued and the one accumulating, floor(C / u) + 2 units (4 for units of >= 0.5B
  parameters, 6 for Llama 3 8B's 218M at TP 1). Counted with the largest unit u (exact for equal units).
TorchTitan's FSDP2 has neither (titan_fsdp_memory_bytes below).

HSDP (FSDP over part of DP, `replicas` > 1): the group splits into `replicas` shard groups of
group/replicas consecutive ranks; the per-unit gathers and reduce-scatters run within a shard group
(on its own racks), and on the last micro-batch each unit's reduce-scattered gradient shard is then
all-reduced across the replicas (the strided outer group): Megatron-FSDP's outer DP with
--num-distributed-optimizer-instances and outer_dp_sharding_strategy no_shard, TorchTitan's
data_parallel_replicate_degree (FSDP2 HSDP: reduce-scatter then all-reduce; Zhao et al. 2023 §3.2).
That all-reduce shares the last backward's window with that micro-batch's gathers and reduce-scatters.
Weights, gradients and optimizer state shard by the shard group only.
A MoE model's experts follow TorchTitan 0.3's sparse mesh (pp, dp_replicate, efsdp, ep; its
ParallelDims.build_mesh): efsdp = dp_shard*cp*tp/ep ranks of a replica shard them, and the same
replicas all-reduce their gradient shards, so their shard group is EDP/replicas (step/evaluate.py).
Megatron-FSDP in megatron-core 0.16.1 builds no expert mesh for HSDP: Megatron plans refuse it.

The unit set depends on the megatron-core a run uses (mamba_units): from 0.19.0 (core_v0.19.0 and cd4afff, the
commit Megatron-Bridge v0.6.0 / NeMo 26.08 pins) mcore_fsdp_adapter.py:160-162 sets fsdp_unit_modules =
[TransformerLayer, MoETransformerLayer, MambaLayer] under optim_grads_params, so a hybrid's Mamba layers are units
too (gathered per micro-batch and freed, charged as the others) and only the embedding, output layer, final norm and
MTP projections stay outside; 0.16.1 to 0.18.2 (core_v0.16.1, d7288711 / 2edffad 0.17.x, d0b3b77 0.18.0, 458c8d0
0.18.2: adapter line 97 / 126 / 154) have [TransformerLayer] only, as below. The plans target 0.16.1; a published
run is charged with its release's (calibrate/published.py run_megatron_core).
Megatron-FSDP's units are TransformerLayers only (megatron-core 0.16.1; paths below under
megatron/core/distributed/fsdp/, `mf` = src/megatron_fsdp/megatron_fsdp.py, `pgb` = src/megatron_fsdp/
param_and_grad_buffer.py). mcore_fsdp_adapter.py:93-99: with optim_grads_params and no fsdp_unit_modules, which
Megatron-LM's training.py passes none of, fsdp_unit_modules = [TransformerLayer]; the hybrid stack's attention,
MLP (ssm/mlp_layer.py MLPLayer) and MoE (MoETransformerLayer) layers are TransformerLayers, its MambaLayer is not,
and neither are the embedding (LanguageModelEmbedding), the final norm, the output layer (ColumnParallelLinear) nor
an MTP layer's own enorm, hnorm, eh_proj and final_layernorm (transformer/multi_token_prediction.py:632-673; its
inner transformer_layer is a unit). Every parameter outside a unit, of one dtype, falls into ONE parameter group
(pgb:1331-1364: groups are keyed by dtype, expert flag, requires_grad and fsdp_unit_id, None outside units), split
into buckets of suggested_bucket_size (pgb:1396-1408; a tied embedding's shared weight gets a bucket of its own,
pgb:1381-1390). What the non-unit parameters then do in one step (n_mb micro-batches, then the optimizer):
- gathered once per step: every module outside a unit gets a pre-forward unshard hook (mf:962-966), a non-unit
  one for its own parameters (mf:692-697, "every forward pass"), but the pipeline gathers only buckets still
  EMPTY (pgb:3561-3566), and nothing empties a non-unit bucket within the step: the post-forward release is
  registered on units only (mf:968-974), the root pre-backward marks only units' buckets releasable
  (mf:851-857), the post-backward release is a unit hook (mf:594-609, 993-1001). So the first micro-batch's
  forward gathers them and the later micro-batches' forwards find them there;
- not hidden: the non-unit group is created at the first parameter named (the embedding's), so its buckets take
  the lowest bucket ids, ahead of every unit's (pgb:1331-1364; Step 3, pgb:1416-1453, keeps the order), and the
  forward prefetch walks bucket ids upward (pgb:3493-3558). The first unit's gather therefore queues behind every
  non-unit bucket; before it only the embedding lookup (and a hybrid's leading Mamba layer) compute, and with
  --overlap-param-gather the first bucket is dispatched at the end of the optimizer step (mf:1116-1121), behind
  no compute. Charged exposed, once per step (up to one layer's forward compute that could hide a part);
- not gathered in the backward: a non-unit module has no pre-backward unshard hook (mf:976-978, units only), and a
  unit's backward prefetch that reaches a non-unit bucket finds it READY: a bucket's forward and backward keys are
  one key (pgb:3406-3411) unless it has an MXFP8 transpose buffer (pgb:1953-1955; not charged here, below);
- released once per step: AllGatherPipeline.reset (pgb:3418-3434) empties every bucket; it runs in
  synchronize_param_gather (mf:1156-1160), from finish_grad_sync after the last micro-batch with
  --overlap-param-gather (mf:1205-1206) or from start_param_sync without it (mf:1124), which the optimizer step
  calls every step under Megatron-FSDP (megatron/core/optimizer/distrib_optimizer.py:2609-2611);
- gradients as the units': every parameter's post-accumulate-grad hook (mf:1003-1012) reduce-scatters through the
  bucketed pipeline on every backward under optim_grads_params (mf:654-667), and on the last micro-batch the HSDP
  outer all-reduce (mf:669-672). So their reduce-scatters are charged per micro-batch like a unit's.
Charged: the non-unit all-gather once per step, exposed (`kept_local`); the units' gathers twice per micro-batch,
each of the units' parameters over the unit count; all reduce-scatters per micro-batch. Memory keeps the non-unit
parameters gathered all step (megatron_kept_gathered_params) and the gathered-unit buffers hold units' parameters
only (unit_params). FSDP rows run at pp = 1 (layout rule fsdp), so the one stage holds the embedding, the output
layer, the final norm and every Mamba and MTP layer; memory takes each pipeline rank's own (stage_memory.RankLoad).
Not charged: with MXFP8 parameter gathers a unit's backward prefetch can also gather a non-unit bucket's transpose
buffer once in the step.
MXFP8 parameters (fp8_param_gather at mxfp8) are kept in two weight buffers: the row-wise model weight buffer and a
transpose buffer of the same parameters, dtype (uint8) and sharding (pgb:1953-2001, "Currently, only mxfp8 needs
it"); a bucket's forward gather fills the first, its backward gather the second (get_bucket_key, pgb:3406-3411). So
an MXFP8 rank holds the transpose shard too and, once the backward has gathered them, the non-unit parameters'
transposes to the step's end (reset, above); without --fsdp-double-buffer the gathered units are one kind at a
time, with it the transposed pair persists beside the row-wise pair ("Unit buffers" above): mxfp8_transpose_bytes. Megatron-FSDP does not implement --reuse-grad-buf-for-mxfp8-param-ag (only
distributed/param_and_grad_buffer.py, the DistributedDataParallel buffer, reads it): the plans leave it off
(emit/megatron.py MEGATRON_FSDP_NO_GRAD_BUF_REUSE) and no buffer here is shared with the gradients.

TorchTitan 0.3.0 wraps differently (torchtitan/distributed/fsdp.py apply_fsdp_to_decoder): the embedding, and the
final norm with the output layer, are fully_shard groups of their own beside one per block (one group of the three
with enable_weight_tying), and the root module holds nothing, so nothing stays gathered for the step; its
communication charge is unchanged here (every parameter in the per-block units, `kept_local` 0). Its memory follows
those units and FSDP2's dtypes (titan_unit_params, titan_fsdp_memory_bytes):
- gathered: the running and the prefetched unit, the largest unit (a block, or the embedding / [norm, lm_head]
  unit, vocab x h / tp: Llama 3 8B's 525M parameters against a 218M block) beside the largest block, in bf16
  (MixedPrecisionPolicy param_dtype, parallelize.py);
- sharded parameters: fp32 (training.dtype float32, config/configs.py), the optimizer's master copy, counted in
  the optimizer's 12 B a parameter (fp32 parameter, Adam exp_avg, exp_avg_sq); no bf16 shard is kept;
- gradients: the fp32 sharded gradients (4 B), and in backward one unit's bf16 unsharded gradients beside the
  fp32 reduce-scatter input they are cast into (reduce_dtype float32: torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py foreach_reduce, `reduce_scatter_input` allocated in reduce_dtype while the unsharded
  gradients are still alive): 6 B per parameter of the largest unit, not 4.

Checked (session 39, fix-CD): Megatron-FSDP on a MoE model at EP1, the search's best for Qwen3-235B-A22B on 256 H100
FP8 (tp1 pp1 ep1 mbs8 full recompute, predicted +36% over the published TP2 PP8 VP4 EP32: vendor_layouts rows 20, 46,
69; +64% row 97). What the charge above gives there, derived by hand: each rank gathers all 128 experts of every
layer, 235B parameters at 1 B (fp8_param_gather) twice per micro-batch and reduce-scatters them at 2 B once: 1.88 TB
each way per step (n_mb 4), priced 4.9 s each (384 GB/s per rank: the node's eight 400 Gb/s NICs at 96%, as an
all-gather's bytes cross into a node over all of them), 6.9 s of the 67.4 s step exposed. One unit's gather (2.49 GB,
6.5 ms) is a sixth of its forward (~40 ms) and its backward traffic a tenth of its backward with the recompute, so the
one-unit prefetch window hides it; full recompute adds no gather (megatron_fsdp.py:684-689 at core_v0.16.1: the
recompute's pre-forward cancels only the forward prefetch; the recomputed unit's pre-backward prefetches the next
unit in backward order). Megatron-FSDP with experts (mcore_fsdp_adapter.py:156-222, the expert DP mesh) and
fp8_param_gather (arguments.py:656) are in every release from 25.09. So the communication charge is not what makes
the claim; nor is FSDP at all: with every FSDP layout out of the search, the best is tp2 pp8 vp3 ep8 mbs1 (no FSDP)
at +34.2% (rows 20, 46; rows 69 / 97: +33.0% / +58.7%). The gain rests on the published EP32's all-to-all across
four H100 nodes: 55.5 s total, 37.4 s exposed of a 91.7 s predicted step (measured 81.4 s: the row is predicted
-11%), against 8.3 s for EP8 inside a node.
Checked again (session 40, fix-DA), the same layout at every release's megatron-core: Megatron-LM takes it (no
validate_args check on Megatron-FSDP with MoE, full recompute or fp8 at core_v0.14.0..core_v0.16.1; at EP 1 the expert
parameters are allreduce=True, extensions/transformer_engine.py:319 / :1063, so they shard as dense ones even in 0.14,
whose Megatron-FSDP has no expert mesh: search/frameworks.py MEGATRON_FSDP_EXPERT_PARALLEL_CORE keeps 25.09's MoE FSDP
layouts at EP 1). On Hopper its per-tensor fp8 weights' transposes are now charged ("Hopper per-tensor fp8 weights"
below): for the layout above 1.5 s of 67.4 s and 2.5 GB (80.2 -> 82.7 GB); it falls to 1902 tokens/s, behind tp2 pp8
vp3 ep8 (no FSDP) at 1917, +34% over the published layout either way.
Checked a third time (session 43, fix-G1), by hand at 25.11 (row 69: gbs 2048, so one micro-batch of mbs 8; predicted
1900 tokens/s, +34% over the predicted published layout): each GPU all-gathers 2 x 233.9 GB a step (94 units of 2.488B
parameters at 1 B) and reduce-scatters 468 GB (2 B), 1.22 s each at the node's 384 GB/s, beside 15.4 s of compute (a
unit's gather 6.5 ms against ~41 ms of its forward; gather + reduce-scatter 19.5 ms against ~123 ms of its backward
with the recompute). The charge is that: 1.27 + 1.27 s (expert + dense), 1.79 s exposed. Memory (82.7 of 84.9 GB): the 10 GB of logits
and the recompute's 5.5 GB working set are charged together, though the fused cross entropy's in-place gradient is
freed by the output layer's backward before the last layer's recompute, while the backward's gradient transients at
262,144 routed rows (~4-5 GB) are not charged; the peak is no higher than charged. Grouped GEMMs at 2,048 tokens per
expert: an fc1 GEMM is priced 46.6 us of FLOPs + 20.3 us fixed, 0.85x the per-FLOP rate of the published EP32's 4,096.
Accepted: validate_args sets no MoE or EP condition on Megatron-FSDP (arguments.py:671-691 at core_v0.16.1; none at
core_v0.14.0 or 25.11's 0d8e0714 either), and Megatron-LM's Megatron-FSDP user guide (core_v0.16.1 docs/discussions/
megatron-fsdp-user-guide) asks for no EP (its DeepSeek-V3 script defaults to EP8: sbatch_mfsdp_deepseek_v3.sh:23). It
lists --no-gradient-accumulation-fusion as required, but Megatron-Bridge's FSDP override turns the fusion on at every
release (scripts/performance/utils/helpers.py:78 at v0.1.0rc3 / 25.09, :125 at v0.2.0, overrides.py:106 at v0.6.0),
as the plans launch. Nor does FSDP carry the claim: with fsdp=false pinned the best is tp2 pp8 vp4 ep8 at 1880
tokens/s (the FSDP layout 1900).
No form was found wrong; the charge stays untested against a measurement (calibrate/coverage.py MOE_FSDP).

Hopper per-tensor fp8 weights (fix-DA, fix-DI, session 40): dgrad reads each fp8 weight transposed, and Hopper's fp8
GEMMs take only the TN layout (memory.fp8_transpose_needed), so a gathered unit's Float8Tensor weights need a
transposed copy of their own (MXFP8 gathers its columnwise copy instead: mxfp8_transpose_bytes; TorchTitan gathers
bf16). What Megatron-FSDP does with it (megatron_fsdp.py, "mf"; Transformer Engine's Float8Tensor._create_transpose
writes the transpose with tex.fp8_transpose into the cached buffer, `out=self._transpose`, every time it is called):
- megatron-core 0.16.0 on (Megatron-LM 8f2f70067c, "FP8 params support for megatron-fsdp", 2026-01-09; not in 25.11's
  0.16.0rc0 at 0d8e0714): every unit gathered in backward has its transposes made at once, whatever the cache flag
  (mf:450-453 at core_v0.16.1: `if bwd and is_float8tensor(param): fp8_create_transpose_cache(param)`, ->
  Transformer Engine post_all_gather_processing -> _create_transpose): a pass per unit per micro-batch.
- before it (0.14, 0.15, 0.16.0rc0): Transformer Engine makes a missing or invalid transpose where the GEMM needs it.
- keep_fp8_transpose_cache False (DDPConfig's default; what Megatron-Bridge's Megatron-FSDP override sets:
  scripts/performance/utils/helpers.py:73 at v0.1.0rc3, overrides.py:82 at v0.3.1; every recipes.json recipe): the
  unit's transposes are dropped with it (mf:538-539; mf:489-490 at core_v0.14.0), so each micro-batch's backward makes
  them again and the running unit's copy is held beside the unit buffers.
- True (--keep-fp8-transpose-cache): they stay, 1 B per parameter of every unit as gathered (src/README.md at
  core_v0.16.1: "(number of parameter x 1 Byte) of memory overhead, but can skip the weight transpose operation in
  the backward propagation"), valid across the step's micro-batches until the optimizer step's cast resets them
  (Transformer Engine cast_master_weights_to_fp8: model_weight._reset_caches()). Before 0.16.0 that is one pass a step;
  from 0.16.0 the eager call above still makes them every micro-batch, into the kept buffers: no pass saved, only
  memory spent. So the plans (core_v0.16.1) launch without it unless pinned.
Charged (fp8_transpose_bytes_per_param, fp8_transpose_passes_per_step): a memory-bound pass reading each unit weight
and writing its transpose (1 + 1 B a unit parameter: FP8_TRANSPOSE_PASS_BYTES), not recomputed; in memory the running
unit's transposes (1 B a parameter of the largest unit), or with the cache kept every unit's. Not charged (not
checked): whether the forward, which reads the row-wise data, also makes a missing transpose for a weight whose
quantizer asks for column-wise usage. The Llama 3 8B H100 FSDP calibration rows (25.09, 25.11) ran without the cache
(their recipes: recipes.json keep_fp8_transpose_cache; the Llama 3 8B H100 functions' keep-True branch,
llama3_llm_pretrain.py:268 at v0.2.0, is under `if cfg.ddp.use_megatron_fsdp:`, which their base configs do not reach),
so they pay the pass per micro-batch: predicted -14.0% -> -15.5% (25.11) and -7.6% -> -9.2% (25.09), 57.9 -> 58.1 and
61.5 -> 61.7 GB; the dense gain-error p80 8.9% -> 9.8% (terms.py). Both were under-predicted before it: what else
over-charges Megatron-FSDP at 8 H100, mbs 1, is open (not this pass: it runs on the compute stream, between the unit's
all-gather wait and its backward GEMMs).

Memory (fix-CK, session 39): the reduce-scatter queue, charged at one unit then, is now charged as the launch holds
it ("Unit buffers" above): the plans launch with --fsdp-double-buffer (two units), a published run as its release
recipe says (recipes.json fsdp_double_buffer: Megatron-Bridge's Llama 3 / 3.1 FSDP recipes set it, e.g.
scripts/performance/configs/llama/llama3_llm_pretrain.py:110 at 9c9dd84). The EP1 layout above, launched
double-buffered, holds two units' gradients (75.2 -> 80.2 GB of 84.9: it still fits; without, 90.1). On Hopper the running unit's
per-tensor fp8 transposes ("Hopper per-tensor fp8 weights") add 2.5 GB there.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.step.dp_sync import GRAD_BYTES, PARAM_BYTES, hidden
from commbench.planner.step.stage_memory import _layer_kinds, _per_kind_params

GATHERED_UNITS = 2  # the running unit and the prefetched one: --fsdp-double-buffer's pool (UB_BUFFER_NUM)
MAMBA_UNITS_FROM = (0, 19)   # the first megatron-core whose Megatron-FSDP wraps MambaLayer as a unit (docstring)
PLANNED_MEGATRON_CORE = (0, 16)   # the megatron-core the plans' Megatron-LM (core_v0.16.1) runs


def mamba_units(framework: str = "megatron", megatron_core: tuple[int, int] | None = None) -> bool:
    """Whether Megatron-FSDP's units include a hybrid's Mamba layers (module docstring): megatron-core `megatron_core`
    (MAJOR, MINOR; None: the plans' PLANNED_MEGATRON_CORE) 0.19 or newer. TorchTitan's blocks are units anyway."""
    return framework == "megatron" and tuple(megatron_core or PLANNED_MEGATRON_CORE) >= MAMBA_UNITS_FROM


def fsdp_sync_s(system, cal, coll, *, local, group, domains, n_mb, units, compute_mb, dp_overlap,
                replicas=1, replica_domains=1, param_bytes=PARAM_BYTES, grad_size=GRAD_BYTES, kept_local=0.0,
                kept_bf16=0.0):
    """(RS total, RS exposed, AG total, AG exposed) seconds per step for parameters `local` per GPU
    (before sharding) over `group` ranks, in `units` FSDP units: sharded over group/replicas ranks
    spanning `domains` racks, all-reduced across `replicas` spanning `replica_domains` racks (HSDP;
    the all-reduce is counted with the reduce-scatters: both are gradient traffic). `kept_local` of `local`
    belongs to no unit (Megatron-FSDP's non-unit parameters, module docstring: megatron_non_unit_params):
    all-gathered once per step, exposed (the first unit's gather queues behind it), and reduce-scattered every
    micro-batch with the rest. AG total = n_mb x 2 x AG(units) + AG(kept). `kept_bf16` of the kept parameters are
    bf16 whatever `param_bytes` says (step/module_precision.py: the embedding and output layer), gathered at 2 B."""
    replicas = np.maximum(np.asarray(replicas), 1)
    g = np.maximum(group // replicas, 1).astype(float)
    active = g > 1
    kept = np.minimum(np.asarray(kept_local, dtype=float), local)
    ag_once = np.where(active, coll(system, "all_gather", (local - kept) * param_bytes, g, domains), 0.0)
    ag_kept = np.zeros(np.shape(ag_once))
    if np.any(kept > 0):
        bf16 = np.minimum(np.asarray(kept_bf16, dtype=float), kept)
        kept_bytes = (kept - bf16) * param_bytes + bf16 * PARAM_BYTES
        ag_kept = np.where(active & (kept > 0), coll(system, "all_gather", kept_bytes, g, domains), 0.0)
    rs_once = np.where(active, coll(system, "reduce_scatter", local * grad_size, g, domains), 0.0)
    ar = np.where(replicas > 1, coll(system, "all_reduce", local / g * grad_size, replicas.astype(float),
                                     replica_domains), 0.0)
    edge = 1.0 / np.maximum(units, 1)
    fwd, bwd = compute_mb / 3.0, compute_mb * 2.0 / 3.0
    eff = cal.overlap_efficiency

    def backward_exposed(comm):
        return hidden(comm * (1 - edge), bwd, eff) + comm * edge

    fwd_x = hidden(ag_once * (1 - edge), fwd, eff) + ag_once * edge
    bwd_comm, last_comm = ag_once + rs_once, ag_once + rs_once + ar
    bwd_x, last_x = backward_exposed(bwd_comm), backward_exposed(last_comm)
    share_ag = np.where(bwd_comm > 0, ag_once / np.maximum(bwd_comm, 1e-300), 0.0)
    last_share_ag = np.where(last_comm > 0, ag_once / np.maximum(last_comm, 1e-300), 0.0)
    ag_x = np.where(dp_overlap, n_mb * fwd_x + (n_mb - 1) * bwd_x * share_ag + last_x * last_share_ag,
                    n_mb * 2 * ag_once) + ag_kept   # the non-unit gather is exposed either way
    rs_x = np.where(dp_overlap, (n_mb - 1) * bwd_x * (1 - share_ag) + last_x * (1 - last_share_ag),
                    n_mb * rs_once + ar)
    return n_mb * rs_once + ar, rs_x, n_mb * 2 * ag_once + ag_kept, ag_x


def unit_params(model, dense_local, expert_local, units, moe_layers, non_unit=0.0):
    """Parameters of the largest FSDP unit on one GPU: the `dense_local` parameters less the `non_unit` ones no unit
    holds (megatron_non_unit_params), over the rank's `units` (TransformerLayers under Megatron-FSDP, blocks under
    TorchTitan), plus, in a MoE model, one MoE layer's share of the rank's `expert_local` over its `moe_layers`."""
    dense_unit = np.maximum(dense_local - non_unit, 0.0) / np.maximum(units, 1)
    return dense_unit + (expert_local / np.maximum(moe_layers, 1) if model.is_moe else 0.0)


# TorchTitan's FSDP2 in backward: a unit's bf16 unsharded gradients (param_dtype) and their fp32 copy for the
# reduce-scatter (reduce_dtype float32), alive together (module docstring)
TITAN_UNSHARDED_GRAD_BYTES = 2.0 + 4.0


def titan_unit_params(model, *, dense_share, expert_share, vocab_params, vocab_matrices, loss):
    """(largest unit, largest block) parameters on one GPU before sharding under TorchTitan 0.3.0's FSDP2 (module
    docstring): every block a unit (its non-expert parameters over TP by `dense_share`, its routed experts by
    `expert_share`), the largest over the model's block kinds (a dense-FFN block against a MoE one); where the rank
    holds the vocabulary (`vocab_matrices` > 0) the embedding unit and the [norm, lm_head] unit (the final norm's h
    with the `loss`), vocab_params x dense_share each (one unit of both with tied embeddings)."""
    kinds = _layer_kinds(model)
    per_kind, per_layer, expert_per_moe, _ = _per_kind_params(model, kinds)
    block = 0.0
    for k in {tuple(sorted(k.items())) for k in kinds}:
        k = dict(k)
        dense = per_layer + sum(per_kind[name] * n for name, n in k.items())
        block = np.maximum(block, dense * dense_share + expert_per_moe * k["moe"] * expert_share)
    vocab_unit = np.where(np.asarray(vocab_matrices) > 0,
                          vocab_params * dense_share + np.where(loss, model.hidden, 0.0), 0.0)
    return np.maximum(block, vocab_unit), block


def titan_fsdp_memory_bytes(largest, block):
    """(weights, gradients) bytes per GPU beyond the sharded parameters and gradients under TorchTitan's FSDP2
    (module docstring): the running and the prefetched unit gathered in bf16, the `largest` beside the largest
    `block`; one largest unit's unsharded gradients (TITAN_UNSHARDED_GRAD_BYTES)."""
    return (largest + block) * PARAM_BYTES, largest * TITAN_UNSHARDED_GRAD_BYTES


# Megatron-FSDP's default communication unit (megatron_fsdp.py:375-399 at core_v0.16.1, and at every recipe-table
# release's megatron-core): suggested_communication_unit_size = max(1e9, 2 x the mean FSDP unit's parameters)
# elements; the reduce-scatter queue's capacity is that, the all-gather prefetch half of it.
COMMUNICATION_UNIT_FLOOR = 1e9


def megatron_unit_buffers(unit, mean_unit, double_buffer):
    """(gathered weight, unsharded gradient) parameters per GPU that Megatron-FSDP's unit buffers hold at their peak
    (module docstring, "Unit buffers"), for units of `unit` parameters (the largest; `mean_unit` the mean, which sets
    the communication unit): with `double_buffer` (--fsdp-double-buffer) two units each; without, the running unit
    and the prefetched ones until they reach half the communication unit, and the gradients of the unit being
    computed, the one just queued and the queued ones the capacity keeps."""
    u = np.maximum(np.asarray(unit, dtype=float), 1.0)
    capacity = np.maximum(COMMUNICATION_UNIT_FLOOR, 2.0 * np.asarray(mean_unit, dtype=float))
    # whole units (the parameter counts here are real numbers: equal units must come out whole, not a rounding off)
    eps = 1e-9
    weights = np.where(double_buffer, GATHERED_UNITS, 1.0 + np.maximum(np.ceil(capacity / 2 / u - eps), 1.0))
    grads = np.where(double_buffer, GATHERED_UNITS, np.floor(capacity / u + eps) + 2.0)
    return weights * np.asarray(unit, dtype=float), grads * np.asarray(unit, dtype=float)


def fsdp_memory_bytes(shard, unit, grad_size=GRAD_BYTES, *, mean_unit=None, double_buffer=True):
    """(weights, gradients) bytes per GPU under Megatron-FSDP: the `shard` of parameters this GPU owns plus the unit
    buffers of units of `unit` parameters (megatron_unit_buffers; `mean_unit` None: `unit`); gradients of
    `grad_size` bytes (dp_sync.grad_bytes)."""
    gathered, unsharded = megatron_unit_buffers(unit, unit if mean_unit is None else mean_unit, double_buffer)
    return shard * PARAM_BYTES + gathered * PARAM_BYTES, shard * grad_size + unsharded * grad_size


def mxfp8_transpose_bytes(mxfp8, weight_bytes, framework: str = "megatron"):
    """Bytes per parameter of Megatron-FSDP's MXFP8 transpose weight buffer (module docstring): 1 (uint8, as the
    row-wise buffer) where the weights are MXFP8 (`mxfp8`) and gathered in 8 bits (`weight_bytes` 1:
    dp_sync.param_gather_bytes), charged on the rank's shard and its kept-gathered non-unit parameters; 0 otherwise
    and under TorchTitan (FSDP2 gathers bf16)."""
    return np.where(np.asarray(mxfp8, dtype=bool) & (np.asarray(weight_bytes) < PARAM_BYTES)
                    & (framework == "megatron"), 1.0, 0.0)


def fp8_transpose_bytes_per_param(precision_fp8, weight_bytes, transpose_needed: bool, framework: str = "megatron"):
    """Bytes per unit parameter of the fp8 transposes Megatron-FSDP makes for a unit gathered in backward (module
    docstring, "Hopper per-tensor fp8 weights"): 1 where the weights are per-tensor fp8 (`precision_fp8`) gathered in 8
    bits (`weight_bytes` 1: dp_sync.param_gather_bytes) on a GPU whose fp8 GEMMs need the transposed operand
    (`transpose_needed`: memory.fp8_transpose_needed); 0 otherwise (MXFP8 gathers its columnwise copy instead:
    mxfp8_transpose_bytes) and under TorchTitan (FSDP2 gathers bf16)."""
    return np.where(np.asarray(precision_fp8, dtype=bool) & (np.asarray(weight_bytes) < PARAM_BYTES)
                    & bool(transpose_needed) & (framework == "megatron"), 1.0, 0.0)


FP8_TRANSPOSE_PASS_BYTES = 2.0   # the transpose pass per unit parameter: read its fp8 weight (1 B), write the copy (1 B)
# The first megatron-core whose Megatron-FSDP makes each unit's fp8 transposes at every backward gather (module
# docstring). (MAJOR, MINOR) cannot tell 25.11's 0.16.0rc0, which has no such call, from 0.16.0: it is counted with
# 0.16, which only a pinned keep_fp8_transpose_cache at 25.11 reads (charged a pass per micro-batch, not one a step).
EAGER_FP8_TRANSPOSE_CORE = (0, 16)


def fp8_transpose_passes_per_step(keep, num_microbatches, megatron_core: tuple[int, int] | None = None):
    """Transpose passes over a rank's units per step (module docstring, "Hopper per-tensor fp8 weights"): one per
    micro-batch, but one a step where the cache is kept (`keep`: layout keep_fp8_transpose_cache) on a megatron-core
    (`megatron_core`, None: the plans' PLANNED_MEGATRON_CORE) older than EAGER_FP8_TRANSPOSE_CORE."""
    core = PLANNED_MEGATRON_CORE if megatron_core is None else megatron_core
    n = np.asarray(num_microbatches, dtype=np.float64)
    return np.where(np.asarray(keep, dtype=bool) & (tuple(core) < EAGER_FP8_TRANSPOSE_CORE), np.minimum(n, 1.0), n)


def mtp_non_unit_params_per_layer(model) -> float:
    """An MTP layer's parameters outside its transformer_layer (multi_token_prediction.py:632-673): eh_proj (2h x h)
    and enorm, hnorm, final_layernorm (h each), as models/counts.param_counts counts them; a model whose MTP layers
    share weights builds them once (its share per layer)."""
    n = model.num_mtp_layers
    if not n:
        return 0.0
    weight_layers = min(n, 1) if model.mtp_shared_weights else n
    h = model.hidden
    return (2 * h * h + 3 * h) * weight_layers / n


def megatron_non_unit_params(model, *, vocab_params, vocab_matrices, loss, mamba_blocks, mtp_layers, dense_share,
                             framework: str = "megatron"):
    """Parameters per GPU (TP-sharded by `dense_share`, before FSDP sharding) that no Megatron-FSDP unit holds on a
    pipeline rank (module docstring): its `vocab_matrices` embedding / output-layer copies of `vocab_params`, the
    final norm (h) where it holds the `loss`, its `mamba_blocks` Mamba layers (models/mamba.mamba_params_per_layer
    plus the layer's pre-norm h) and its `mtp_layers` MTP layers' own projection and norms
    (mtp_non_unit_params_per_layer). 0 under TorchTitan (module docstring)."""
    if framework != "megatron":
        return 0.0
    from commbench.planner.models.mamba import mamba_params_per_layer
    h = model.hidden
    mamba_layer = mamba_params_per_layer(model) + h if getattr(model, "num_mamba_layers", 0) else 0.0
    params = (vocab_matrices * vocab_params + np.where(loss, h, 0.0) + mamba_blocks * mamba_layer
              + mtp_layers * mtp_non_unit_params_per_layer(model))
    return params * dense_share


def megatron_kept_gathered_params(non_unit, group):
    """Parameters per GPU beyond its shard that Megatron-FSDP keeps gathered all step: the rank's `non_unit`
    parameters (megatron_non_unit_params) less the 1/`group` shard already charged."""
    return non_unit * (1.0 - 1.0 / np.maximum(group, 1))
