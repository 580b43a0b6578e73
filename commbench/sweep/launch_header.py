"""What a launch here would record in its header, told without starting a rank: `sweep --dry-run --resume` checks
it against the file as the launch checks its own header (runner.resumed_on_another_setup), so the dry run refuses a
resume the launch would refuse (probe P3: OMP_NUM_THREADS=2 listed '7 ... would not be measured again', exit 0, where
the launch refused 'torch threads on gloo: 1 -> 2')."""

from __future__ import annotations

import datetime
import os
import platform
import socket
import sys

from commbench import __version__
from commbench.comm.local_ranks import DEFAULT_OMP_NUM_THREADS
from commbench.comm.nccl_conf import read_conf_files
from commbench.results.provenance import emulated_from_env, torch_versions
from commbench.results.records import RunHeader


def local_rank_threads() -> int | None:
    """The torch intra-op threads a local launch's rank runs with (local_ranks.apply_thread_limit): OMP_NUM_THREADS,
    DEFAULT_OMP_NUM_THREADS unless set; a value that is no positive count leaves torch's own (this process's, which
    a forked rank keeps). None without torch."""
    value = os.environ.get("OMP_NUM_THREADS", DEFAULT_OMP_NUM_THREADS)
    if value.isdecimal() and int(value) > 0:
        return int(value)
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def _devices(backend: str, world_size: int) -> list[str]:
    """Each local rank's device name as provenance.device_name gives it; 'unknown' (not compared) where this process
    cannot tell (no GPU seen here for an NCCL launch)."""
    if backend == "gloo":
        return [f"cpu ({platform.processor() or platform.machine()})"] * world_size
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return [torch.cuda.get_device_name(rank % count) for rank in range(world_size)] if count else ["unknown"]
    except (ImportError, RuntimeError):
        return ["unknown"]


def local_launch_header(backend: str, world_size: int) -> RunHeader:
    """The header a local launch of `world_size` ranks on `backend` here would write, in what a --resume compares
    (results.run_setup.resume_setup_changes: torch version and threads on gloo, NCCL version, devices, fabric, NCCL_*
    settings); what cannot be told here is left unrecorded (no change there, as for an older file)."""
    versions = torch_versions()
    threads = local_rank_threads()
    return RunHeader(
        run_id="dry-run", started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        argv=list(sys.argv), commbench_version=__version__, python_version=sys.version.split()[0],
        torch_version=versions["torch"], nccl_version=versions["nccl"] if backend == "nccl" else None,
        cuda_version=versions["cuda"], cupy_version=None, backend=backend, world_size=world_size,
        hostnames=[socket.gethostname()] * world_size, devices=_devices(backend, world_size),
        nccl_env={k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        nccl_conf=read_conf_files(os.environ), launcher="local",
        emulated=emulated_from_env(),
        torch_threads=None if threads is None else [threads] * world_size)
