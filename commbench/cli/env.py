"""`commbench env`: what this machine offers and which backend a run would use, and why."""

from __future__ import annotations

import os
import platform

from rich.table import Table

from commbench.cli.base import command, console
from commbench.comm.backends import BACKEND_NAMES, backend_status, resolve_backend
from commbench.comm.launch import detect_rank_env
from commbench.comm.nccl_libs import cupy_nccl, torch_nccl, version_mismatch
from commbench.results.provenance import package_version, torch_versions


def environment_rows() -> list[tuple[str, str]]:
    versions = torch_versions()
    torch_lib = torch_nccl()
    rows = [("python", platform.python_version()), ("torch", versions["torch"] or "not installed"),
            ("CUDA (torch)", versions["cuda"] or "none (CPU build)"), ("NCCL (torch)", torch_lib.describe())]
    import torch

    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        rows.append((f"GPU {index}", torch.cuda.get_device_name(index)))
    rows.append(("CPU cores", str(os.cpu_count())))
    for name in BACKEND_NAMES:
        available, why = backend_status(name)
        rows.append((f"backend {name}", f"{'available' if available else 'unavailable'}: {why}"))
    cupy = package_version("cupy", "cupy-cuda12x", "cupy-cuda13x")
    rows.append(("CuPy", cupy or "not installed (pip install 'commbench[cuda]')"))
    cupy_lib = cupy_nccl() if cupy else None
    if cupy_lib is not None:
        rows.append(("NCCL (CuPy)", cupy_lib.describe()))
        mismatch = version_mismatch(torch_lib, cupy_lib)
        if mismatch:
            rows.append(("WARNING", mismatch))
    chosen = resolve_backend("auto")
    rows.append(("a run would use", f"{chosen} ({'CUDA is available' if chosen == 'nccl' else 'no CUDA GPU: gloo on CPU'})"))
    launch = detect_rank_env()
    rows.append(("launch", f"{launch.launcher}: rank {launch.rank} of {launch.world_size}" if launch
                 else "none detected (commbench starts --nproc local ranks)"))
    rows.extend((k, v) for k, v in sorted(os.environ.items()) if k.startswith("NCCL_"))
    return rows


@command("env", help="Show torch/CUDA/NCCL/CuPy/GPUs and which backend a run would use and why.")
def env() -> None:
    table = Table(title="commbench environment", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for key, value in environment_rows():
        table.add_row(key, value)
    console.print(table)
