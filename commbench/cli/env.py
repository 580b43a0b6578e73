"""`commbench env`: what this machine offers and which backend a run would use, and why."""

from __future__ import annotations

import os
import platform
from typing import Annotated

import typer
from rich.markup import escape

from commbench.cli.base import command, console, print_json
from commbench.comm.backends import BACKEND_NAMES, backend_status, resolve_backend
from commbench.comm.launch import detect_rank_env
from commbench.comm.nccl_conf import read_conf_files
from commbench.comm.nccl_libs import cupy_nccl, torch_nccl, version_mismatch
from commbench.results.provenance import package_version, torch_versions
from commbench.results.tables import Col, print_table


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
    for path, settings in read_conf_files(os.environ).items():   # NCCL reads them as unset variables (nccl_conf.py)
        shown = {k: v for k, v in settings.items() if k not in os.environ}
        overridden = sorted(set(settings) - set(shown))
        rows.append((f"NCCL config {path}", (", ".join(f"{k}={v}" for k, v in shown.items()) or "no NCCL_* setting")
                     + (f" (the environment overrides {', '.join(overridden)})" if overridden else "")))
    return rows


def environment_fields() -> dict:
    """The same facts as environment_rows, with typed keys and values for scripts (`machine` in --json)."""
    import dataclasses

    import torch

    versions = torch_versions()
    cupy = package_version("cupy", "cupy-cuda12x", "cupy-cuda13x")
    torch_lib, cupy_lib = torch_nccl(), (cupy_nccl() if cupy else None)
    launch = detect_rank_env()
    chosen = resolve_backend("auto")
    backends = {}
    for name in BACKEND_NAMES:
        available, why = backend_status(name)
        backends[name] = {"available": bool(available), "why": why}
    return {
        "python_version": platform.python_version(), "torch_version": versions["torch"],
        "torch_cuda_version": versions["cuda"], "torch_nccl": dataclasses.asdict(torch_lib),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0)],
        "num_cpu_cores": os.cpu_count(), "backends": backends, "cupy_version": cupy,
        "cupy_nccl": dataclasses.asdict(cupy_lib) if cupy_lib is not None else None,
        "nccl_version_mismatch": version_mismatch(torch_lib, cupy_lib) if cupy_lib is not None else None,
        "backend": chosen, "launch": ({"launcher": launch.launcher, "rank": launch.rank, "world_size": launch.world_size}
                                      if launch else None),
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "nccl_conf": read_conf_files(os.environ),
    }


@command("env", help="Show torch/CUDA/NCCL/CuPy/GPUs and which backend a run would use and why.")
def env(as_json: Annotated[bool, typer.Option("--json", help="Print the rows as a JSON object (schema: docs/json-output.md).")] = False) -> None:
    rows = environment_rows()
    if as_json:
        print_json({"format": "commbench-env", "version": 1, "environment": dict(rows),
                    "machine": environment_fields(), "backend": resolve_backend("auto")})
        return
    print_table(console, "commbench environment", [Col(name="what", numeric=False), Col(name="value", numeric=False)],
                [[escape(key), escape(value)] for key, value in rows])
