"""RunHeader contents: versions, hosts, devices and NCCL_* environment, gathered from every rank."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import socket
import sys

from commbench import __version__
from commbench.comm.backend import Backend, gather_strings
from commbench.comm.nccl_conf import read_conf_files
from commbench.comm.nccl_tuning import tuning_from_env
from commbench.results.records import RunHeader


def package_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def torch_versions() -> dict[str, str | None]:
    """torch, CUDA and NCCL versions as torch reports them (None when absent)."""
    try:
        import torch
    except ImportError:
        return {"torch": None, "cuda": None, "nccl": None}
    nccl = None
    try:
        if torch.cuda.is_available():
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except (RuntimeError, AttributeError):
        nccl = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl}


def measured_nccl_version(backend: Backend, torch_nccl: str | None) -> str | None:
    """The version of the NCCL library the run measured: for --backend cupy-nccl CuPy's own NCCL
    (cupy.cuda.nccl.get_version(), which CupyNcclBackend keeps as `nccl_version`; it may differ from the NCCL torch
    was built with, README), else torch's (`torch_nccl`, torch.cuda.nccl.version()); None when unknown."""
    if backend.name == "cupy-nccl":
        from commbench.comm.nccl_types import format_nccl_version

        code = getattr(backend, "nccl_version", None)
        return format_nccl_version(code) if isinstance(code, int) and code > 0 else None
    return torch_nccl


def device_name(backend: Backend) -> str:
    if backend.device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(int(backend.device.split(":", 1)[1]) if ":" in backend.device else 0)
    return f"cpu ({platform.processor() or platform.machine()})"


LOCAL_LAUNCH_NOTE = ("local launch: ranks meet through a file store in a private temporary folder (nothing listens "
                     "for it) and gloo binds 127.0.0.1 (GLOO_SOCKET_IFNAME=lo unless set): nothing listens beyond loopback")


def torch_threads(backend: Backend) -> list[int] | None:
    """Every rank's torch intra-op thread count (torch.get_num_threads()), in rank order (collective: every rank
    calls it, with or without torch); None where a rank has no torch."""
    try:
        import torch
        mine = str(torch.get_num_threads())
    except ImportError:
        mine = ""
    every = gather_strings(backend, mine)
    return [int(n) for n in every] if all(n.isdigit() for n in every) else None


def _threads_note() -> str:
    import torch

    return (f"{torch.get_num_threads()} torch intra-op thread(s) per rank (OMP_NUM_THREADS, 1 unless set, as torchrun: "
            "more ranks x threads than cores starve gloo's threads)")


def collect_header(backend: Backend, *, run_id: str, argv: list[str], launcher: str,
                   topology: dict | None = None, notes: list[str] | None = None) -> RunHeader:
    """Build the RunHeader (collective over the world: every rank calls it)."""
    versions = torch_versions()
    emulated = os.environ.get("COMMBENCH_EMULATED")
    return RunHeader(
        run_id=run_id,
        started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        argv=list(argv), commbench_version=__version__, python_version=sys.version.split()[0],
        torch_version=versions["torch"], nccl_version=measured_nccl_version(backend, versions["nccl"]), cuda_version=versions["cuda"],
        cupy_version=package_version("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
        backend=backend.name, world_size=backend.world_size,
        hostnames=gather_strings(backend, socket.gethostname()),
        devices=gather_strings(backend, device_name(backend)),
        nccl_env={k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        nccl_conf=read_conf_files(os.environ),
        launcher=launcher, topology=topology,
        emulated=_emulated_record(emulated), nccl_tuning=tuning_from_env(os.environ),
        torch_threads=torch_threads(backend),
        notes=list(notes or []) + ([LOCAL_LAUNCH_NOTE, _threads_note()] if launcher in ("local", "single") else []),
    )


def emulated_from_env() -> dict | None:
    """The emulated fabric this process runs on (COMMBENCH_EMULATED, set by `commbench emulate`), or None."""
    return _emulated_record(os.environ.get("COMMBENCH_EMULATED"))


def _emulated_record(value: str | None) -> dict | None:
    """COMMBENCH_EMULATED: a JSON object from `commbench emulate`, or free text."""
    if not value:
        return None
    import json

    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"description": value}
