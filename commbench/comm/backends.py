"""Choosing and creating a backend: NCCL when CUDA is available, gloo otherwise."""

from __future__ import annotations

from commbench.comm.launch import RankEnv
from commbench.errors import CommbenchError

BACKEND_NAMES = ("nccl", "gloo", "cupy-nccl")


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def backend_status(name: str) -> tuple[bool, str]:
    """(available, why) for a backend on this machine."""
    import torch.distributed as dist

    if name == "gloo":
        return (True, "gloo is built into torch") if dist.is_gloo_available() else (False, "this torch build has no gloo")
    if name == "nccl":
        if not dist.is_nccl_available():
            return False, "this torch build has no NCCL (a CPU build)"
        if cuda_device_count() == 0:
            return False, "no CUDA GPU is visible"
        return True, f"{cuda_device_count()} CUDA GPU(s) visible"
    if name == "cupy-nccl":
        from commbench.comm.cupy_backend import cupy_status

        return cupy_status()
    return False, f"unknown backend (allowed: {', '.join(BACKEND_NAMES)})"


def resolve_backend(requested: str | None, option: str = "--backend", needs: str = "") -> str:
    """The backend a run uses: the requested one if available (else a clear error), else nccl or gloo.
    `option`: how the error names where it was asked for (a sweep file's `[sweep] backend`, not an option never
    given); `needs`: what that asker needs, said after the reason."""
    if requested is None or requested == "auto":
        return "nccl" if backend_status("nccl")[0] else "gloo"
    if requested not in BACKEND_NAMES:
        raise CommbenchError(f"{option}={requested!r} is invalid: allowed auto, {', '.join(BACKEND_NAMES)}")
    available, why = backend_status(requested)
    if not available:
        raise CommbenchError(f"{option}={requested} is not available here: {why}" + (f"; {needs}" if needs else ""))
    return requested


def max_local_ranks(backend: str) -> tuple[int, str]:
    """How many ranks this machine can run for a backend, and why."""
    import os

    if backend == "nccl":
        return cuda_device_count(), "one rank per visible GPU"
    if backend == "cupy-nccl":
        from commbench.comm.cupy_backend import cupy_device_count

        return cupy_device_count(), "one rank per GPU visible to CuPy"
    cores = os.cpu_count() or 1
    return max(8, 4 * cores), f"gloo ranks are processes sharing {cores} CPU core(s)"


def ranks_allowed(option: str, nproc: int, backend: str, limit: int, why: str, minimum: int = 1) -> str:
    """The one line refusing `nproc` local ranks against max_local_ranks' `limit`: with no device ('allowed
    1..0 on nccl' was printed where no GPU is visible) it says the backend cannot launch here."""
    if limit <= 0:
        return (f"{option}={nproc} cannot launch here: {backend} runs {why}, and this machine has none "
                "(--world-size plans for another machine)")
    return f"{option}={nproc} is invalid: allowed {minimum}..{limit} on {backend} ({why})"


# the variable each launcher gives a rank's place on its host (RankEnv.local_rank)
LOCAL_RANK_VARIABLES = {"torchrun": "LOCAL_RANK", "env": "LOCAL_RANK", "emulate": "LOCAL_RANK", "slurm": "SLURM_LOCALID",
                        "mpi": "OMPI_COMM_WORLD_LOCAL_RANK", "hydra": "MPI_LOCALRANKID"}


def cuda_device_for(rank_env: RankEnv, visible: int) -> int:
    """The CUDA ordinal this rank uses, of the `visible` devices this process sees (CUDA_VISIBLE_DEVICES applied):
    its local rank where the process sees every GPU of its host (torchrun, srun --gpus-per-node N), cuda:0 where it
    sees one (srun --gpus-per-task 1 and --gpu-bind bind each task to its own GPU: CUDA_VISIBLE_DEVICES lists that
    one, srun(1)); else refused in one line, before the rank joins anything: an ordinal past the visible devices
    does not exist, and another rank's GPU would be shared silently."""
    import os

    local = rank_env.local_rank
    if visible == 1 or local < visible:
        return 0 if visible == 1 else local
    variable = LOCAL_RANK_VARIABLES.get(rank_env.launcher, "local rank")
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise CommbenchError(f"{variable}={local} but this process sees {visible} CUDA device(s) (CUDA_VISIBLE_DEVICES="
                         f"{'unset' if shown is None else repr(shown)}): cuda:{local} does not exist; give each rank "
                         "one GPU (srun --gpus-per-task 1: it uses cuda:0) or every GPU of its node (srun "
                         "--ntasks-per-node N --gpus-per-node N, torchrun --nproc-per-node N)")


def create_backend(name: str, rank_env: RankEnv, timeout_s: float, *, join_timeout_s: float | None = None,
                   join_setting: str = "--timeout"):
    """Join the job as `rank_env` on backend `name` (collective: every rank calls it); a GPU backend on the device
    cuda_device_for picks. `timeout_s`: the collectives'; `join_timeout_s` (default `timeout_s`): how long joining
    waits for the launch's ranks, named as `join_setting` (README: joining ends at the command's timeout + 5 s)."""
    if name == "cupy-nccl":
        from commbench.comm.cupy_backend import CupyNcclBackend, cupy_device_count

        backend = CupyNcclBackend(rank_env, timeout_s=timeout_s, join_timeout_s=join_timeout_s,
                                  device_index=cuda_device_for(rank_env, cupy_device_count()))
    else:
        from commbench.comm.torch_backend import TorchBackend

        device = cuda_device_for(rank_env, cuda_device_count()) if name == "nccl" else None
        backend = TorchBackend(name, rank=rank_env.rank, world_size=rank_env.world_size,
                               local_rank=rank_env.local_rank, timeout_s=timeout_s, init_method=rank_env.init_method,
                               device_index=device, join_timeout_s=join_timeout_s, join_setting=join_setting)
    if rank_env.progress is not None:
        rank_env.progress.joined()
    return backend
