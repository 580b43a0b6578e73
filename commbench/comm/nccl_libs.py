"""Which NCCL each backend would load: torch's (its pip bundle, the system's, or linked into torch)
and CuPy's. A benchmark of NCCL must measure the NCCL the user's job uses, and the two backends
only compare like with like when they load the same library.

Where the library comes from is read from the process's memory map (/proc/self/maps on Linux)
after the library has been loaded: a path under site-packages/nvidia/nccl is the pip wheel
(nvidia-nccl-cuXX, what PyPI torch depends on); a path elsewhere (e.g. /usr/lib/x86_64-linux-gnu
in NGC containers) is the system's; no libnccl mapped while torch reports a version means NCCL
is linked into torch's own library.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from commbench.comm.nccl_types import format_nccl_version


@dataclass(frozen=True, kw_only=True)
class NcclLibrary:
    """One backend's NCCL: version (None when unavailable), the file mapped, and its origin."""

    version: str | None
    path: str | None
    origin: str  # "pip bundle (...)", "system", "linked into torch", "unavailable: ..."

    def describe(self) -> str:
        if self.version is None:
            return self.origin
        return f"{self.version}, {self.origin}" + (f": {self.path}" if self.path else "")


def mapped_libnccl(maps_text: str) -> list[str]:
    """The distinct libnccl shared objects in a /proc/<pid>/maps text, in order of appearance."""
    paths: list[str] = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5].strip() if len(fields) == 6 else ""
        if "/libnccl" in path and ".so" in path and path not in paths:
            paths.append(path)
    return paths


def origin_of(path: str | None) -> str:
    """Where a libnccl path comes from, in words."""
    if path is None:
        return "linked into torch (no separate libnccl loaded)"
    if "site-packages/nvidia/nccl" in path or "dist-packages/nvidia/nccl" in path:
        return "pip bundle (nvidia-nccl-cu*)"
    return "system library"


def _read_maps() -> str:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def torch_nccl(import_module: Callable = importlib.import_module, read_maps: Callable[[], str] = _read_maps) -> NcclLibrary:
    """torch's NCCL. Asking torch for its NCCL version loads the library, so the map shows it after."""
    try:
        torch = import_module("torch")
    except ImportError:
        return NcclLibrary(version=None, path=None, origin="unavailable: torch is not installed")
    if not torch.cuda.is_available():
        build = "CPU build of torch" if torch.version.cuda is None else "no CUDA GPU visible"
        return NcclLibrary(version=None, path=None, origin=f"unavailable: {build}")
    try:
        version = ".".join(str(v) for v in torch.cuda.nccl.version())
    except (RuntimeError, AttributeError) as exc:
        return NcclLibrary(version=None, path=None, origin=f"unavailable: {str(exc).splitlines()[0]}")
    paths = mapped_libnccl(read_maps())
    path = paths[0] if paths else None
    return NcclLibrary(version=version, path=path, origin=origin_of(path))


def cupy_nccl(import_module: Callable = importlib.import_module, read_maps: Callable[[], str] = _read_maps) -> NcclLibrary:
    """CuPy's NCCL (cupy.cuda.nccl), without starting a GPU context. In a process where torch already
    loaded a libnccl.so.2, the dynamic loader hands CuPy that same library (one soname, loaded once):
    then the path is torch's, and a CuPy-only run could load another; the version shown is the one
    CuPy reports here."""
    before = mapped_libnccl(read_maps())
    try:
        nccl = import_module("cupy.cuda.nccl")
    except Exception as exc:  # noqa: BLE001 - CuPy raises many kinds when CUDA libraries are missing
        reason = "CuPy is not installed" if isinstance(exc, ModuleNotFoundError) else str(exc).splitlines()[0]
        return NcclLibrary(version=None, path=None, origin=f"unavailable: {reason}")
    if not getattr(nccl, "available", False):
        return NcclLibrary(version=None, path=None, origin="unavailable: CuPy cannot load NCCL")
    after = mapped_libnccl(read_maps())
    new = [p for p in after if p not in before]
    path = new[0] if new else (after[0] if after else None)
    return NcclLibrary(version=format_nccl_version(nccl.get_version()), path=path, origin=origin_of(path))


def version_mismatch(torch_lib: NcclLibrary, cupy_lib: NcclLibrary) -> str | None:
    """A warning when both backends have an NCCL and the versions differ, else None."""
    if torch_lib.version is None or cupy_lib.version is None or torch_lib.version == cupy_lib.version:
        return None
    return (f"torch uses NCCL {torch_lib.version} but CuPy loads NCCL {cupy_lib.version}: the torch-nccl "
            "and cupy-nccl backends would not measure the same library (see docs/cuda.md)")
