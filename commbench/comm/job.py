"""Run a per-rank function as one rank of an existing launch, or on N local ranks."""

from __future__ import annotations

from typing import Any, Callable

from commbench.comm.backends import max_local_ranks
from commbench.comm.launch import RankEnv, detect_rank_env, partial_rank_env_note, slurm_unlaunched_note
from commbench.comm.local_ranks import in_process_thread_limit, launch_local
from commbench.comm.stop_signals import signal_name, stops_raise
from commbench.errors import CommbenchError, Interrupted
from commbench.files import results_so_far

DEFAULT_NPROC = 2


def free_port() -> int:
    """A free TCP port on loopback (for benchmarks that start their own ranks)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_gloo_interface() -> None:
    """GLOO_SOCKET_IFNAME, when set, must name interfaces this machine has (gloo aborts every rank otherwise)."""
    import os
    import socket

    wanted = os.environ.get("GLOO_SOCKET_IFNAME")
    if not wanted:
        return
    have = [name for _, name in socket.if_nameindex()]
    missing = [name for name in wanted.split(",") if name.strip() not in have]
    if missing:
        raise CommbenchError(f"GLOO_SOCKET_IFNAME={wanted!r} is invalid: no interface {missing[0]!r} here "
                             f"(this machine has {', '.join(have)})")


def check_local_ranks(nproc: int, backend: str, *, option: str = "--nproc", minimum: int = 1) -> None:
    """Refuse more (or fewer than `minimum`) local ranks than this machine runs for `backend`
    (backends.max_local_ranks), in one line naming `option`: run_job's check before it starts ranks; tune's (at least
    2: a fit needs a group) before it empties its folder."""
    limit, why = max_local_ranks(backend)
    if not minimum <= nproc <= limit:
        from commbench.comm.backends import ranks_allowed
        raise CommbenchError(ranks_allowed(option, nproc, backend, limit, why, minimum))


def check_job(*, nproc: int | None, backend: str, validate_world: Callable[[int], None]) -> int:
    """run_job's checks, before any rank starts: the gloo interface, --nproc against a launch (or the local rank
    limit), then `validate_world(world_size)`; returns the world size. A command that says something before its
    ranks start (bench's note on appending to --out) calls it first, so a refused run prints the refusal alone."""
    if backend == "gloo":
        check_gloo_interface()
    rank_env = detect_rank_env()
    if rank_env is not None and rank_env.launcher != "local":
        if nproc is not None and nproc != rank_env.world_size:
            raise CommbenchError(f"--nproc={nproc} conflicts with the {rank_env.launcher} launch of "
                                 f"{rank_env.world_size} ranks: omit --nproc under a launcher")
        world = rank_env.world_size
    else:
        world = DEFAULT_NPROC if nproc is None else nproc
        check_local_ranks(world, backend)
    validate_world(world)
    return world


def run_job(rank_fn: Callable[[RankEnv, Any], Any], config: Any, *, nproc: int | None, backend: str,
            validate_world: Callable[[int], None], output_path: str,
            timeout_s: float | None = None) -> dict[int, Any]:
    """`rank_fn(rank_env, config)` on every rank; returns {rank: result} for the ranks of this process.

    Under torchrun/srun/mpirun this process is one rank and `nproc` must be omitted (or match);
    otherwise `nproc` local ranks (default 2) start under commbench's own launcher (local_ranks.py),
    which kills ranks that hang longer than the collective `timeout_s` (plus a grace) after another
    stopped. `validate_world(world_size)` raises CommbenchError before anything starts (check_job).
    """
    nproc = check_job(nproc=nproc, backend=backend, validate_world=validate_world)
    rank_env = detect_rank_env()
    if rank_env is not None and rank_env.launcher != "local":
        with stops_raise():
            try:
                return {rank_env.rank: rank_fn(rank_env, config)}
            except KeyboardInterrupt as exc:
                raise Interrupted(f"interrupted ({signal_name(exc)}): rank {rank_env.rank} of the "
                                  f"{rank_env.launcher} launch stopped; {results_so_far(output_path)}",
                                  signal=signal_name(exc)) from None
    for unlaunched in (slurm_unlaunched_note(), partial_rank_env_note()):
        if unlaunched:
            import sys
            print(f"note: {unlaunched} (--nproc {nproc})", file=sys.stderr, flush=True)
    if nproc == 1:
        from commbench.comm.rendezvous_folder import rendezvous_folder

        # as launch_local's ranks: OMP_NUM_THREADS 1 unless set, restored after (local_ranks.in_process_thread_limit)
        with in_process_thread_limit(), rendezvous_folder() as folder:
            single = RankEnv(rank=0, world_size=1, local_rank=0, launcher="single", master_addr="127.0.0.1",
                             master_port=0, rendezvous=f"file://{folder}/store")
            return {0: rank_fn(single, config)}
    return launch_local(nproc, rank_fn, config, backend=backend, output_path=output_path, timeout_s=timeout_s)
