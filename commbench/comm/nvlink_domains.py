"""NVLink domains read from the GPUs: each rank's GPU fabric info through NVML, ranks grouped by it.

A GB200/GB300 NVL72 rack is 18 compute trays (hosts) of 4 GPUs on one NVLink fabric: grouping ranks by
hostname makes 18 "racks" of 4. NVML reports, per GPU, the fabric it is attached to
(`nvmlDeviceGetGpuFabricInfoV`: clusterUuid + cliqueId, once the fabric manager has registered it,
state COMPLETED and status SUCCESS); GPUs with the same pair share one NVLink domain. NCCL decides
multi-node NVLink the same way (src/graph/paths.cc, ncclTopoCheckMNNVL: same clusterUuid and same
cliqueId; an all-zero clusterUuid means no fabric info).

NVML comes from the optional dependency `nvidia-ml-py` (module `pynvml`), imported only here and only
on GPU ranks. Without it, on GPUs without fabric info (HGX H100: NOT_SUPPORTED) or when any rank has
none, ranks are grouped by hostname and the topology's `source` says why.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Sequence

from commbench.comm.topology import Topology

FABRIC_SOURCE = "NVML GPU fabric info (clusterUuid+cliqueId)"
NO_KEY = "-"  # what a rank without fabric info sends (a key always holds a ':')


def import_nvml() -> tuple[Any | None, str]:
    """The `pynvml` module of nvidia-ml-py, initialised, or None and why not."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'commbench[nvml]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or OSError without libnvidia-ml
        return None, f"NVML init failed: {exc}"
    return pynvml, ""


def fabric_key(nvml: Any, *, uuid: str | None = None, index: int = 0) -> tuple[str | None, str]:
    """'<clusterUuid hex>:<cliqueId>' of one GPU (by UUID when known, else by NVML index), or None and why."""
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        return None, f"no NVML handle for GPU {uuid or index} ({exc})"
    info, error = None, None
    for getter, struct in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),  # the versioned call
                           ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):  # older drivers: same fields
        if not (hasattr(nvml, getter) and hasattr(nvml, struct)):
            continue
        try:
            info = getattr(nvml, struct)()
            getattr(nvml, getter)(handle, ctypes.byref(info))
            break
        except Exception as exc:  # NVMLError_NotSupported on GPUs without a multi-node NVLink fabric
            info, error = None, exc
    if info is None:
        return None, f"no GPU fabric info ({error or 'this nvidia-ml-py has no fabric-info call'})"
    completed = getattr(nvml, "NVML_GPU_FABRIC_STATE_COMPLETED", 3)
    if info.state != completed or info.status != getattr(nvml, "NVML_SUCCESS", 0):
        return None, f"GPU fabric not registered (state {info.state}, status {info.status})"
    cluster = bytes(info.clusterUuid)
    if not any(cluster):
        return None, "GPU fabric info has no cluster UUID"
    return f"{cluster.hex()}:{info.cliqueId}", ""


def local_fabric_key(device_index: int) -> tuple[str | None, str]:
    """This rank's key, for the CUDA device it uses (matched to NVML by UUID when torch reports one)."""
    nvml, why = import_nvml()
    if nvml is None:
        return None, why
    uuid = None
    try:
        import torch

        raw = getattr(torch.cuda.get_device_properties(device_index), "uuid", None)
        uuid = None if raw is None else ("GPU-" + str(raw) if not str(raw).startswith("GPU-") else str(raw))
    except Exception:  # an older torch without device UUIDs, or no CUDA torch: map through CUDA_VISIBLE_DEVICES
        uuid = None
    nvml_index = device_index
    if uuid is None:
        uuid, nvml_index = visible_device(device_index, os.environ.get("CUDA_VISIBLE_DEVICES"))
    try:
        return fabric_key(nvml, uuid=uuid, index=nvml_index)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def visible_device(cuda_index: int, visible: str | None) -> tuple[str | None, int]:
    """(UUID, NVML index) of CUDA device `cuda_index`: NVML numbers all GPUs and ignores CUDA_VISIBLE_DEVICES,
    which lists indices or UUIDs (https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-environment-variables)."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if cuda_index >= len(entries):
        return None, cuda_index
    entry = entries[cuda_index]
    if entry.isdecimal():
        return None, int(entry)
    return (entry, cuda_index) if entry.startswith("GPU-") else (None, cuda_index)


def topology_from_fabric(keys: Sequence[str | None], hostnames: Sequence[str], *, why_not: str = "") -> Topology:
    """Ranks grouped by fabric key when every rank has one; otherwise by hostname, saying why.
    Racks in order of first appearance, ranks in world order within each."""
    from commbench.comm.topology import from_hostnames

    missing = [rank for rank, key in enumerate(keys) if key is None]
    if keys and not missing:
        order = list(dict.fromkeys(keys))
        racks = tuple(tuple(r for r, key in enumerate(keys) if key == wanted) for wanted in order)
        hosts = len(set(hostnames)) if hostnames else 0
        return Topology(racks=racks, source=f"{FABRIC_SOURCE}: {len(racks)} NVLink domain(s) over {hosts} host(s)")
    base = from_hostnames(hostnames)
    if not keys:
        reason = why_not or "CPU ranks"
    elif len(missing) == len(keys):
        reason = why_not or "no rank has GPU fabric info"
    else:
        reason = f"GPU fabric info on {len(keys) - len(missing)} of {len(keys)} ranks only (rank {missing[0]}: {why_not or 'none'})"
    return Topology(racks=base.racks, source=f"hostnames (NVLink domains not detected: {reason})")


def _gather_keys(backend) -> tuple[list[str | None], str]:
    """Every GPU rank calls this together: each rank's fabric key (None: none) and the first reason one is missing."""
    from commbench.comm.backend import gather_strings

    device = str(backend.device)
    index = int(device.split(":", 1)[1]) if ":" in device else getattr(backend, "local_rank", 0)
    key, why = local_fabric_key(index)
    gathered = gather_strings(backend, key if key else NO_KEY)
    why_texts = gather_strings(backend, why[:120] if why else "")
    keys = [None if value == NO_KEY else value for value in gathered]
    return keys, next((w for w in why_texts if w), "")


def gather_topology(backend, hostnames: Sequence[str]) -> Topology:
    """Every rank calls this together: on GPU ranks each gathers its fabric key, then all group by it."""
    if not str(backend.device).startswith("cuda"):
        return topology_from_fabric([], hostnames, why_not="CPU ranks: no GPU fabric")
    keys, first_why = _gather_keys(backend)
    return topology_from_fabric(keys, hostnames, why_not=first_why)


def gather_fabric(backend) -> Topology | None:
    """Every GPU rank calls this together: the NVLink domains of the fabric where every rank has fabric info, else
    None (racks the user declared are checked against it: comm/topology.resolve_on_ranks)."""
    keys, _ = _gather_keys(backend)
    if not keys or any(key is None for key in keys):
        return None
    return topology_from_fabric(keys, [])
