"""Why gloo's reduce_scatter was slow on the CPU path, measured side by side (issue 29, item 9).

Finding: not gloo's algorithm but thread oversubscription. Forked ranks inherited the parent's torch
intra-op thread count (one per core: OMP_NUM_THREADS set after torch is imported is never read), so 2
ranks on 2 cores ran 4 OpenMP threads; those spin-wait after every parallel ATen op (reduce_scatter's
clone and chunk copy, a local sum: > 32768 elements) and starve the other rank's gloo thread.
all_reduce, a pure gloo call on a reused buffer, never runs such an op, so it stayed fast. The fix
(comm/local_ranks.apply_thread_limit) gives each forked rank OMP_NUM_THREADS (1, as torchrun sets).
This script runs every variant under both settings, same host, back to back: "inherited" (the
parent's thread count, the old behaviour) and "1 thread" (the fix), and prints the ratio.

torch 2.13's ProcessGroupGloo implements `reduce_scatter_tensor` (what commbench's native
reduce_scatter calls) as: clone the whole input, all-reduce the clone, copy this rank's chunk out
(ProcessGroupGloo.cpp, reduce_scatter_tensor_coalesced). The list form `dist.reduce_scatter` (what
PARAM comms' default reduce_scatter calls) is a different path. Variants, same processes and buffers,
rounds interleaved so the host's load hits all alike:
- tensor: dist.reduce_scatter_tensor(out, inp)               (commbench --rs-impl native)
- list:   dist.reduce_scatter(out, list(inp.chunk(n)))       (PARAM comms' reduce_scatter, where gloo has it)
- all_reduce: dist.all_reduce(inp) on the full buffer         (what `tensor` does inside, without clone/copy)
- pairwise: all_to_all_single + local sum                     (commbench --rs-impl pairwise)
- commbench: the harness's own reduce_scatter point (collectives/reduce_scatter.py on TorchBackend)
Printed per size: the median per-call time of each (µs) and its ratio to `all_reduce`; a variant that
gloo refuses prints why.

    python benchmarks/gloo_reduce_scatter.py [--ranks 2] [--rounds 15] [--iters 20]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np

SIZES_BYTES = [512 << 10, 2 << 20]


def rank_main(rank: int, world: int, port: int, rounds: int, iters: int, threads: int | None, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    if threads is not None:
        torch.set_num_threads(threads)

    from collectives import get_collective
    from collectives.base import PointSpec
    from commbench.comm.torch_backend import TorchBackend
    from commbench.dtypes import get_dtype

    backend = TorchBackend("gloo", rank=rank, world_size=world, local_rank=rank, timeout_s=120)
    results: dict = {}
    for size in SIZES_BYTES:
        count = size // 4
        inp = torch.ones(count)
        out = torch.empty(count // world)
        recv = torch.empty(count)
        prepared = get_collective("reduce_scatter").prepare(
            backend.world, backend, PointSpec(size_bytes=size, dtype=get_dtype("float32"), op="sum", seed=1))
        prepared.fill()
        commbench_stage = prepared.stages[0][1]

        def pairwise():
            dist.all_to_all_single(recv, inp)
            torch.sum(recv.view(world, -1), dim=0, out=out)

        variants = {"tensor": lambda: dist.reduce_scatter_tensor(out, inp),
                    "list": lambda: dist.reduce_scatter(out, list(inp.chunk(world))),
                    "all_reduce": lambda: dist.all_reduce(inp),
                    "pairwise": pairwise, "commbench": commbench_stage}
        times: dict = {name: [] for name in variants}
        refused: dict = {}
        for name, fn in list(variants.items()):
            try:
                fn()
            except RuntimeError as exc:
                refused[name] = str(exc).splitlines()[0][:120]
                del variants[name]
        for r in range(rounds):
            names = list(variants)[::(1 if r % 2 == 0 else -1)]
            for name in names:
                dist.barrier()
                start = time.perf_counter()
                for _ in range(iters):
                    variants[name]()
                times[name].append((time.perf_counter() - start) / iters * 1e6)
        results[size] = ({k: float(np.median(v)) for k, v in times.items() if v}, refused)
    if rank == 0:
        queue.put((torch.get_num_threads(), results))
    dist.barrier()
    backend.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    from commbench.comm.job import free_port   # not tests/: an installed commbench has no tests package

    import torch  # imported in the parent before the fork, as the CLI has it (no parallel op run yet)

    ctx = mp.get_context("fork")
    runs = {}
    for label, threads in (("inherited", None), ("1 thread", 1)):
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=rank_main, args=(r, args.ranks, port, args.rounds, args.iters, threads, queue))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        runs[label] = queue.get(timeout=600)
        for p in procs:
            p.join(timeout=60)
    print(f"gloo reduce_scatter variants, {args.ranks} ranks on {os.cpu_count()} cores, torch {torch.__version__}: "
          f"median µs per call ({args.rounds} rounds x {args.iters} calls), intra-op threads per rank "
          f"{runs['inherited'][0]} (inherited) vs {runs['1 thread'][0]} (fix); ratio = inherited / fix")
    for size in SIZES_BYTES:
        old, refused = runs["inherited"][1][size]
        new, _ = runs["1 thread"][1][size]
        cells = [f"{k} {old[k]:,.0f} vs {new[k]:,.0f} ({old[k] / new[k]:.1f}x)" for k in old if k in new]
        print(f"{size >> 10:>5} KiB: " + "; ".join(cells))
        for name, why in refused.items():
            print(f"          {name}: refused by gloo: {why}")


if __name__ == "__main__":
    main()
