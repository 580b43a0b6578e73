"""grad_reduce_scatter: the data-parallel gradient reduce-scatter, flat or rack-aware.

A bucket of S bytes per rank (N*c elements) is summed over the group's N ranks; each rank ends with
one shard of c elements. Racks come from the topology (params `ranks_per_rack` or `racks`): K racks
of R ranks each inside the measured group.

Algorithms (params `algorithm`):
- `flat`: one reduce-scatter over all N ranks. Group rank g owns shard g.
- `hierarchical`: reduce-scatter inside each rack (R ranks, S bytes; local index l keeps block l of
  S/R), then reduce-scatter across racks among the ranks with the same local index (K ranks, on the
  S/R block; rack position k keeps piece k). The rank at rack position k, local index l owns shard
  l*K + k: a different mapping from flat's (with contiguous racks, rank k*R + l owns shard l*K + k).
  Two-level reduce-scatter as in ZeRO++ hpZ/qgZ (Wang et al. 2023) and NCCL's tree/NVLS split.
- `hierarchical-allreduce` (for comparison): rack reduce-scatter -> cross-rack all-reduce of the
  S/R block -> rack all-gather: every rank ends with the whole sum (the 2D all-reduce).

Reduce-scatter implementation (params `rs_impl`): `native` calls the backend's reduce_scatter (ring
on NCCL; gloo in torch 2.13 runs a full all-reduce, twice a reduce-scatter's bytes); `pairwise`
sends every peer its chunk with one all_to_all and sums the received chunks locally: exactly the
(n-1)/n*X bytes a reduce-scatter must send; `duplex` sends the same chunks point-to-point, each
direction of a rank pair on its own communicator (gloo moves one direction at a time on a pair's
connection, so a 2-rank exchange over one link would take twice the link-rate time; NCCL channels
are full duplex). `auto` = duplex on gloo, native elsewhere.

Bytes per tier are this algorithm's accounting (what each rank sends per iteration), not counters:
for a stage on X input bytes over n ranks, m of them in the sender's rack, pairwise sends
(m-1)/n*X over scale-up and (n-m)/n*X over scale-out; native is modelled as a ring in group-rank
order (each rank sends (n-1)/n*X to the next; 2x for gloo's all-reduce). busbw per stage follows
nccl-tests (RS, AG: (n-1)/n; AR: 2(n-1)/n).
"""

from __future__ import annotations

import weakref

import numpy as np

from collectives.base import POISON, ChunkedCollective, PointSpec, PreparedPoint, count_wrong, per_seed, reduction_data, salted
from commbench.errors import CommbenchError, invalid
from commbench.comm.topology import Topology

ALGORITHMS = ("flat", "hierarchical", "hierarchical-allreduce")
RS_IMPLS = ("auto", "native", "pairwise", "duplex")
_INT64_NAME = "int64"


# Backends whose buffers the workload can sum on the device (Backend.accumulate); elsewhere pairwise
# and duplex would sum on the host inside the timed stage, so they are refused.
_DEVICE_ACCUMULATE = ("gloo", "nccl")


def resolve_impl(rs_impl: str, backend_name: str) -> str:
    if rs_impl not in RS_IMPLS:
        raise invalid("--rs-impl", rs_impl, f"allowed: {', '.join(RS_IMPLS)}")
    if rs_impl == "auto":
        return "duplex" if backend_name == "gloo" else "native"
    if rs_impl == "duplex" and backend_name not in ("gloo", "nccl"):
        raise invalid("--rs-impl", rs_impl, "duplex needs torch.distributed point-to-point (gloo or nccl)")
    if rs_impl in ("pairwise", "duplex") and backend_name not in _DEVICE_ACCUMULATE:
        raise invalid("--rs-impl", rs_impl, f"{backend_name} has no device-side sum of received chunks (it would "
                      "run on the host inside the timed stage): use native or auto")
    return rs_impl


def group_racks(members: tuple[int, ...], topology: Topology) -> list[list[int]]:
    """The group's members split by rack (racks in topology order, members in group order)."""
    by_rack: dict[int, list[int]] = {}
    for rank in members:
        by_rack.setdefault(topology.rack_of(rank), []).append(rank)
    racks = [by_rack[k] for k in sorted(by_rack)]
    if len({len(r) for r in racks}) != 1:
        raise CommbenchError(f"group {list(members)} spans racks unevenly ({[len(r) for r in racks]} ranks per rack): "
                             "hierarchical reduce-scatter needs the same number of ranks in every rack")
    return racks


def stage_groups(partition: list[tuple[int, ...]], topology: Topology) -> tuple[list[list[int]], list[list[int]]]:
    """(rack groups, cross-rack groups) for every group of the partition: world ranks, all at once."""
    rack_groups, cross_groups = [], []
    for members in partition:
        racks = group_racks(members, topology)
        rack_groups.extend(racks)
        cross_groups.extend([rack[l] for rack in racks] for l in range(len(racks[0])))
    return rack_groups, cross_groups


def _point_count(algorithm: str, chunk: int, num_ranks: int) -> int:
    """The record's count: one shard, or every shard for hierarchical-allreduce (it holds them all)."""
    return num_ranks * chunk if algorithm == "hierarchical-allreduce" else chunk


def owned_shard(algorithm: str, rack_pos: int, local_index: int, num_racks: int, group_rank: int) -> int | None:
    """Which shard (of N) a rank ends with; None for hierarchical-allreduce (it holds them all)."""
    if algorithm == "flat":
        return group_rank
    if algorithm == "hierarchical":
        return local_index * num_racks + rack_pos
    return None


def stage_tier_bytes(kind: str, impl: str, backend_name: str, input_bytes: int, n: int, same_rack: int,
                     crossing_edges: int) -> tuple[float, float]:
    """(scale-up, scale-out) bytes one rank sends in a stage (mean over the group's ranks).

    kind: rs (input X), ar (buffer X), ag (output X). same_rack: group ranks sharing a rack with the
    sender (incl. itself); crossing_edges: ring edges (in group-rank order) that leave a rack.
    """
    if n == 1:
        return 0.0, 0.0
    if kind == "rs" and impl in ("pairwise", "duplex"):
        return (same_rack - 1) / n * input_bytes, (n - same_rack) / n * input_bytes
    per_rank = {"rs": (n - 1) / n, "ag": (n - 1) / n, "ar": 2 * (n - 1) / n}[kind] * input_bytes
    if kind == "rs" and backend_name == "gloo":
        per_rank *= 2  # gloo's reduce_scatter is a full all-reduce
    out_fraction = crossing_edges / n
    return per_rank * (1 - out_fraction), per_rank * out_fraction


class GradReduceScatter(ChunkedCollective):
    name = "grad_reduce_scatter"
    multi_stage = True
    reduces = True
    in_place_mode = "never"
    uses_topology = True  # bench and sweep pass the topology in PointSpec.params (ranks_per_rack / racks)
    algorithms = ALGORITHMS
    default_params = {"algorithm": "flat,hierarchical", "rs_impl": "auto"}
    default_sizes_bytes = tuple(1 << p for p in range(24, 32))  # 16 MiB .. 2 GiB, typical DP buckets
    param_names = ("algorithm", "rs_impl")

    def check_params(self, params: dict, backend_name: str) -> None:
        resolve_impl(params.get("rs_impl", "auto"), backend_name)

    def check_groups(self, spec: PointSpec, groups, world_size: int) -> None:
        """Every group must hold the same number of ranks in each rack it spans (group_racks, as `build` asks)."""
        topology = Topology.from_params(spec.params, world_size)
        for members in groups or (tuple(range(world_size)),):
            group_racks(tuple(members), topology)

    def point_size(self, spec: PointSpec, num_ranks: int) -> tuple[int, int]:
        chunk = self.count_for(spec.size_bytes, spec.dtype.itemsize, num_ranks)[0]
        count = _point_count(spec.params.get("algorithm", "hierarchical"), chunk, num_ranks)
        return count, num_ranks * chunk * spec.dtype.itemsize

    def __init__(self) -> None:
        self._comms: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # --- groups -------------------------------------------------------------------------------
    def _partition(self, comm, backend) -> list[tuple[int, ...]]:
        """Every rank's group (a world all-gather unless the group is the world)."""
        if comm.size == backend.world_size:
            return [tuple(comm.global_ranks)]
        from commbench.dtypes import get_dtype

        int64, n = get_dtype(_INT64_NAME), backend.world_size
        mine = np.full(n, -1, dtype=np.int64)
        mine[:comm.size] = comm.global_ranks
        every = backend.empty(n * n, int64)
        backend.world.all_gather(every, backend.upload(mine, int64))
        rows = backend.download(every).astype(np.int64).reshape(n, n)
        return list(dict.fromkeys(tuple(int(x) for x in row if x >= 0) for row in rows))

    def _stage_comms(self, comm, backend, topology: Topology):
        partition = self._partition(comm, backend)
        key = (tuple(partition), topology.racks)
        cache = self._comms.setdefault(backend, {})
        if key not in cache:
            rack_groups, cross_groups = stage_groups(partition, topology)
            cache[key] = (backend.split(rack_groups), backend.split(cross_groups))
        return cache[key]

    def _reverse_comm(self, group, backend):
        """A second communicator over the same groups as `group` (own connections): duplex's
        high-to-low direction. Made once per group layout (collective: every rank of the world)."""
        cache = self._comms.setdefault(backend, {})
        if ("reverse", id(group)) not in cache:
            partition = self._partition(group, backend)
            cache["reverse", id(group)] = (group, backend.split(partition, fresh=True))
        return cache["reverse", id(group)][1]

    # --- one point ----------------------------------------------------------------------------
    def prepare(self, comm, backend, spec: PointSpec) -> PreparedPoint:
        return self.build(comm, backend, spec)[0]

    def build(self, comm, backend, spec: PointSpec):
        """(prepared point, output buffer, owned shard or None for all): tests read shards back."""
        algorithm = spec.params.get("algorithm", "hierarchical")
        if algorithm not in ALGORITHMS:
            raise invalid("--algorithm", algorithm, f"allowed: {', '.join(ALGORITHMS)}")
        if spec.op != "sum":
            raise invalid("--op", spec.op, "grad_reduce_scatter sums gradients: allowed sum")
        impl = resolve_impl(spec.params.get("rs_impl", "auto"), backend.name)
        topology = Topology.from_params(spec.params, backend.world_size)
        racks = group_racks(tuple(comm.global_ranks), topology)
        num_racks, per_rack = len(racks), len(racks[0])
        me = comm.global_ranks[comm.rank]
        rack_pos = next(k for k, rack in enumerate(racks) if me in rack)
        local_index = racks[rack_pos].index(me)
        n, dtype = comm.size, spec.dtype
        c = self.count_for(spec.size_bytes, dtype.itemsize, n)[0]
        size_bytes, itemsize = n * c * dtype.itemsize, dtype.itemsize

        inp = backend.empty(n * c, dtype)
        inputs = per_seed(lambda seed: reduction_data("sum", dtype, comm.rank, n, 0, n * c, seed)[0])
        outputs = []  # every buffer a stage writes (never `inp`): poisoned before the checked run

        def new_buffer(count):
            outputs.append((backend.empty(count, dtype), count))
            return outputs[-1][0]

        def reduce_scatter(group, src, num_out):
            """(stage callable, output buffer) for a reduce-scatter of src over group."""
            if group.size == 1:
                return None, src
            if impl == "native":
                out = new_buffer(num_out)
                return (lambda: group.reduce_scatter(out, src, "sum")), out
            recv = new_buffer(num_out * group.size)
            parts = [recv[j * num_out:(j + 1) * num_out] for j in range(group.size)]
            accumulate = backend.accumulate  # resolve_impl refused backends without a device-side sum
            if impl == "duplex":
                return _duplex_reduce_scatter(group, self._reverse_comm(group, backend), src, parts, accumulate)
            acc = parts[0]

            def run():
                group.all_to_all(recv, src)
                for part in parts[1:]:
                    accumulate(acc, part)
            return run, acc

        # stage: (name, callable, kind, input bytes, group size, same-rack ranks in group, crossing ring edges)
        stages: list[tuple] = []
        if algorithm == "flat":
            fn, out = reduce_scatter(comm, inp, c)
            members = comm.global_ranks
            edges = sum(topology.rack_of(members[g]) != topology.rack_of(members[(g + 1) % n]) for g in range(n))
            stages.append(("reduce_scatter", fn, "rs", size_bytes, n, per_rack, edges))
        else:
            rack_comm, cross_comm = self._stage_comms(comm, backend, topology)
            fn, mid = reduce_scatter(rack_comm, inp, num_racks * c)
            stages.append(("rack_rs", fn, "rs", size_bytes, per_rack, per_rack, 0))
            block_bytes = num_racks * c * itemsize
            if algorithm == "hierarchical":
                fn, out = reduce_scatter(cross_comm, mid, c)
                stages.append(("cross_rack_rs", fn, "rs", block_bytes, num_racks, 1, num_racks))
            else:
                stages.append(("cross_rack_allreduce", (lambda: cross_comm.all_reduce(mid, "sum"))
                               if num_racks > 1 else None, "ar", block_bytes, num_racks, 1, num_racks))
                out = new_buffer(n * c) if per_rack > 1 else mid
                stages.append(("rack_allgather", (lambda: rack_comm.all_gather(out, mid)) if per_rack > 1 else None,
                               "ag", size_bytes, per_rack, per_rack, 0))

        shard = owned_shard(algorithm, rack_pos, local_index, num_racks, comm.rank)
        start, num = (0, n * c) if shard is None else (shard * c, c)
        expected = per_seed(lambda seed: reduction_data("sum", dtype, comm.rank, n, start, num, seed)[1])
        run_stages = [(name, fn) for name, fn, *_ in stages if fn is not None]
        if not run_stages:  # a group of one rank: nothing to send
            run_stages = [("local", backend.synchronize)]
        tier = {name: stage_tier_bytes(kind, impl, backend.name, x, m, same, edges)
                for name, _, kind, x, m, same, edges in stages}
        up = sum(b[0] for b in tier.values())
        out_bytes = sum(b[1] for b in tier.values())
        busbw_factors = {name: {"rs": (m - 1) / m, "ag": (m - 1) / m, "ar": 2 * (m - 1) / m}[kind]
                         for name, _, kind, _, m, *_ in stages}
        stage_sizes = {name: x for name, _, _, x, *_ in stages}

        def stage_metrics(stage_us: dict[str, float]) -> dict:
            algbw = {s: stage_sizes[s] / (t * 1e-6) / 1e9 for s, t in stage_us.items() if s in stage_sizes and t > 0}
            return {"stage_algbw_gbps": algbw, "stage_busbw_gbps": {s: bw * busbw_factors[s] for s, bw in algbw.items()}}

        def fill(salt: int = 0) -> None:
            for buf, count in outputs:
                backend.write(buf, np.full(count, POISON))
            backend.write(inp, inputs(salted(spec.seed, salt)))

        prepared = PreparedPoint(
            size_bytes=size_bytes, count=num, busbw_factor=2 * (n - 1) / n if shard is None else (n - 1) / n,
            stages=run_stages, fill=fill,
            check=lambda salt=0: count_wrong(backend.download(out), expected(salted(spec.seed, salt)), dtype),
            params={"algorithm": algorithm, "rs_impl": impl},
            metrics={"num_racks_in_group": num_racks, "ranks_per_rack_in_group": per_rack,
                     "scale_up_bytes_per_rank": up, "scale_out_bytes_per_rank": out_bytes,
                     "scale_out_bytes_per_rack": out_bytes * per_rack,
                     "stage_tier_bytes_per_rank": {s: {"scale_up": b[0], "scale_out": b[1]} for s, b in tier.items()},
                     "byte_model": "pairwise" if impl in ("pairwise", "duplex") else f"ring in group-rank order ({backend.name})"},
            stage_metrics=stage_metrics,
        )
        return prepared, out, shard



def _duplex_reduce_scatter(low_to_high, high_to_low, src, parts, accumulate):
    """(stage callable, output) of a reduce-scatter by point-to-point exchange: chunk j of `src` goes
    to group rank j, each rank pair's two directions on two communicators (`low_to_high` carries
    messages to a higher group rank), all in flight at once; then the received chunks and the rank's
    own chunk are summed into the first peer's receive buffer."""
    n, me = low_to_high.size, low_to_high.rank
    num = len(parts[0])
    chunks = [src[j * num:(j + 1) * num] for j in range(n)]
    peers = [(me + step) % n for step in range(1, n)]
    acc = parts[peers[0]]

    def run():
        pending = []
        for step in range(1, n):
            dst, origin = (me + step) % n, (me - step) % n
            pending.append((low_to_high if dst > me else high_to_low).start_send(chunks[dst], dst))
            pending.append((low_to_high if origin < me else high_to_low).start_recv(parts[origin], origin))
        for handle in pending:
            handle.wait()
        for peer in peers[1:]:
            accumulate(acc, parts[peer])
        accumulate(acc, chunks[me])
    return run, acc

