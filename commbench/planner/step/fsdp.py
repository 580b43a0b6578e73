"""FSDP as the data-parallel mode (ZeRO-3): Megatron-FSDP with `--data-parallel-sharding-strategy
optim_grads_params` and TorchTitan's FSDP2 (`fully_shard` per transformer block), charged as they run.

Per micro-batch, one FSDP unit per layer (Megatron-FSDP wraps every TransformerLayer / Mamba layer,
TorchTitan every block; Rajbhandari et al., ZeRO, arXiv 1910.02054; Zhao et al., PyTorch FSDP,
arXiv 2304.11277):
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
Memory per GPU: bf16 weight and gradient shards (1/group) plus the unsharded buffers of two units
(the running one and the prefetched one) for weights and one unit's gradients.

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

Megatron-FSDP's units are TransformerLayers only (megatron-core 0.16.1 distributed/fsdp/mcore_fsdp_adapter.py: with
optim_grads_params and no fsdp_unit_modules, which Megatron-LM's training.py passes none of, fsdp_unit_modules =
[TransformerLayer]). A hybrid model's MambaLayer is not one: megatron_fsdp.py gives every other module a pre-forward
unshard hook and registers the post-forward release (`_post_forward`) on units only, and the root pre-backward marks
only units' buckets releasable (`group.fsdp_unit_id is not None`), so a Mamba layer's weights stay gathered for the
rest of the step once its first forward has gathered them (megatron_memory_kept_gathered). Its gradients go through
the same per-parameter post-accumulate hooks and bucketed reduce-scatters as the rest (`_process_post_backward_gradients`),
so they are charged as the units' are.
"""

from __future__ import annotations

import numpy as np

from commbench.planner.step.dp_sync import GRAD_BYTES, PARAM_BYTES, hidden

GATHERED_UNITS = 2  # the running unit and the prefetched one


def fsdp_sync_s(system, cal, coll, *, local, group, domains, n_mb, units, compute_mb, dp_overlap,
                replicas=1, replica_domains=1, param_bytes=PARAM_BYTES, grad_size=GRAD_BYTES):
    """(RS total, RS exposed, AG total, AG exposed) seconds per step for parameters `local` per GPU
    (before sharding) over `group` ranks, in `units` FSDP units: sharded over group/replicas ranks
    spanning `domains` racks, all-reduced across `replicas` spanning `replica_domains` racks (HSDP;
    the all-reduce is counted with the reduce-scatters: both are gradient traffic)."""
    replicas = np.maximum(np.asarray(replicas), 1)
    g = np.maximum(group // replicas, 1).astype(float)
    active = g > 1
    ag_once = np.where(active, coll(system, "all_gather", local * param_bytes, g, domains), 0.0)
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
                    n_mb * 2 * ag_once)
    rs_x = np.where(dp_overlap, (n_mb - 1) * bwd_x * (1 - share_ag) + last_x * (1 - last_share_ag),
                    n_mb * rs_once + ar)
    return n_mb * rs_once + ar, rs_x, n_mb * 2 * ag_once, ag_x


def unit_params(model, dense_local, expert_local, num_layers: int, moe_layers: int):
    """Parameters of the largest FSDP unit on one GPU (a MoE layer holds its experts' share)."""
    dense_unit = dense_local / np.maximum(num_layers, 1)
    return dense_unit + (expert_local / np.maximum(moe_layers, 1) if model.is_moe else 0.0)


def fsdp_memory_bytes(shard, unit, grad_size=GRAD_BYTES):
    """(weights, gradients) bytes per GPU under FSDP: the `shard` of parameters this GPU owns plus the
    gathered buffers of `unit` parameters; gradients of `grad_size` bytes (dp_sync.grad_bytes)."""
    return shard * PARAM_BYTES + GATHERED_UNITS * unit * PARAM_BYTES, shard * grad_size + unit * grad_size


def megatron_kept_gathered_params(model, mamba_blocks, dense_share, group, framework: str = "megatron"):
    """Parameters per GPU beyond its shard that Megatron-FSDP keeps gathered all step: the rank's `mamba_blocks`
    Mamba layers (not FSDP units, module docstring), TP-sharded by `dense_share`, less the 1/`group` shard already
    charged. 0 under TorchTitan (it builds no hybrid model) and for a model without Mamba layers."""
    if framework != "megatron" or not getattr(model, "num_mamba_layers", 0):
        return 0.0
    from commbench.planner.models.mamba import mamba_params_per_layer
    return mamba_blocks * mamba_params_per_layer(model) * dense_share * (1.0 - 1.0 / np.maximum(group, 1))
