"""nccl-tests letters that carry over to `bench` (and `sweep`), and those refused with why.

Accepted on `bench` (nccl-tests src/common.cu flags): -G N (CUDA-graph launches: --cuda-graph, with
N launches of the -n iterations timed as n*N replays), -N N (run cycles: the whole size sweep N
times, appended to one results file), -T S (timeout, = --timeout), -m N (aggregated iterations:
each timed iteration runs the collective N times, time per operation = iteration / N), -z 0|1
(blocking: the host syncs with the device after every collective, then every rank meets at a barrier).
"""

from __future__ import annotations

from commbench.errors import CommbenchError
from commbench.limits import MAX_ITERS

# nccl-tests letter -> why it has no meaning here (one line each)
REFUSED = {
    "-g": "one process per GPU here (nccl-tests -g = GPUs per thread): start one rank per GPU with --nproc, "
          "torchrun, srun or mpirun",
    "-t": "one process per GPU here (nccl-tests -t = threads per process): start one rank per GPU with --nproc, "
          "torchrun, srun or mpirun",
    "-p": "every rank is its own process and initialises on its own (nccl-tests -p = parallel init of threads)",
    "-y": "torch and CuPy run on their current stream (nccl-tests -y = the NULL stream); not selectable here",
    "-C": "the loop's host time is recorded beside the device time as loop_time_us and `--format nccl-tests` "
          "prints it (nccl-tests -C = report CPU time)",
    "-R": "user-buffer registration (nccl-tests -R) is not exposed through torch.distributed or CuPy",
}


def refuse_nccl_tests_flags(given: dict[str, object]) -> None:
    """One line for the first nccl-tests letter given that means nothing here."""
    for letter, value in given.items():
        if value is not None:
            raise CommbenchError(f"{letter} {value}: not supported: {REFUSED[letter]}")


def nccl_tests_loop(*, graph_launches: int | None, agg_iters: int | None, blocking: int | None,
                    run_cycles: int | None) -> dict:
    """The bench settings the accepted nccl-tests letters map to (one-line errors on bad values)."""
    out: dict = {}
    if graph_launches is not None:
        if not 0 <= graph_launches <= MAX_ITERS:
            raise CommbenchError(f"-G={graph_launches} is invalid: allowed 0 (no CUDA graph) or 1 to {MAX_ITERS:,} "
                                 "launches")
        out["graph_launches"] = graph_launches
    if agg_iters is not None:
        if not 1 <= agg_iters <= MAX_ITERS:
            raise CommbenchError(f"-m={agg_iters} is invalid: allowed 1 to {MAX_ITERS:,} aggregated iterations "
                                 "(as -n: an iteration runs them all)")
        out["agg_iters"] = agg_iters
    if blocking is not None:
        if blocking not in (0, 1):
            raise CommbenchError(f"-z={blocking} is invalid: allowed 0 (non-blocking) or 1 (blocking)")
        out["blocking"] = bool(blocking)
    if run_cycles is not None:
        if run_cycles < 1:
            raise CommbenchError(f"-N={run_cycles} is invalid: allowed a positive number of cycles "
                                 "(nccl-tests' 0 = forever is not supported: give a count)")
        out["run_cycles"] = run_cycles
    return out
