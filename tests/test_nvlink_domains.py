"""NVLink domains from NVML GPU fabric info (a fake NVML): one clique over 18 hosts is one rack of 72,
two cliques are two racks, no fabric info falls back to hostnames, and the topology says which."""

from __future__ import annotations

import ctypes
import types

import pytest

from commbench.comm import nvlink_domains
from commbench.comm.nvlink_domains import FABRIC_SOURCE, fabric_key, topology_from_fabric
from commbench.comm.topology import TopologySpec, resolve_on_ranks


class FakeFabricInfo(ctypes.Structure):  # the fields of pynvml's c_nvmlGpuFabricInfo_v2_t that are read
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint32), ("state", ctypes.c_uint), ("healthMask", ctypes.c_uint32)]


def fake_nvml(fabric_of_gpu: dict[str, tuple[bytes, int] | None]) -> types.SimpleNamespace:
    """pynvml's surface used here: GPUs by UUID; a GPU mapped to None has no fabric info (NotSupported)."""

    class NVMLError_NotSupported(Exception):
        pass

    def get_info(handle, pointer):
        fabric = fabric_of_gpu[handle]
        if fabric is None:
            raise NVMLError_NotSupported("Not Supported")
        info = ctypes.cast(pointer, ctypes.POINTER(FakeFabricInfo)).contents
        cluster, clique = fabric
        info.clusterUuid[:] = list(cluster)
        info.cliqueId, info.state, info.status = clique, 3, 0

    return types.SimpleNamespace(
        NVML_GPU_FABRIC_STATE_COMPLETED=3, NVML_SUCCESS=0, c_nvmlGpuFabricInfoV_t=FakeFabricInfo,
        nvmlDeviceGetHandleByUUID=lambda uuid: uuid, nvmlDeviceGetHandleByIndex=lambda i: f"GPU-{i}",
        nvmlDeviceGetGpuFabricInfoV=get_info)


RACK_A, RACK_B = bytes(range(1, 17)), bytes(range(17, 33))


def nvl72_hosts(num_racks: int) -> list[str]:
    """18 compute trays of 4 GPUs per rack, ranks in tray order."""
    return [f"tray{rank // 4:02d}" for rank in range(72 * num_racks)]


def keys_for(nvml, num_ranks: int) -> list[str | None]:
    return [fabric_key(nvml, uuid=f"GPU-{rank}")[0] for rank in range(num_ranks)]


def test_one_clique_over_18_hosts_is_one_rack_of_72():
    nvml = fake_nvml({f"GPU-{r}": (RACK_A, 7) for r in range(72)})
    topology = topology_from_fabric(keys_for(nvml, 72), nvl72_hosts(1))
    assert topology.num_racks == 1 and topology.ranks_per_rack == 72
    assert topology.source.startswith(FABRIC_SOURCE) and "1 NVLink domain(s) over 18 host(s)" in topology.source


def test_two_cliques_are_two_racks_whatever_the_rank_order():
    fabric = {f"GPU-{r}": (RACK_A, 1) if r % 2 == 0 else (RACK_A, 2) for r in range(144)}  # same cluster
    topology = topology_from_fabric(keys_for(fake_nvml(fabric), 144), nvl72_hosts(2))
    assert topology.racks == (tuple(range(0, 144, 2)), tuple(range(1, 144, 2)))
    other_cluster = {f"GPU-{r}": (RACK_A if r < 72 else RACK_B, 0) for r in range(144)}  # same clique id
    assert topology_from_fabric(keys_for(fake_nvml(other_cluster), 144), nvl72_hosts(2)).ranks_per_rack == 72


def test_no_fabric_info_falls_back_to_hostnames_and_says_why():
    nvml = fake_nvml({f"GPU-{r}": None for r in range(8)})
    key, why = fabric_key(nvml, uuid="GPU-0")
    assert key is None and "Not Supported" in why
    topology = topology_from_fabric(keys_for(nvml, 8), ["a"] * 4 + ["b"] * 4, why_not=why)
    assert topology.racks == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert topology.source.startswith("hostnames (NVLink domains not detected") and "Not Supported" in topology.source
    partial = keys_for(fake_nvml({**{f"GPU-{r}": (RACK_A, 1) for r in range(4)}, **{f"GPU-{r}": None for r in range(4, 8)}}), 8)
    mixed = topology_from_fabric(partial, ["a"] * 4 + ["b"] * 4)
    assert mixed.racks == ((0, 1, 2, 3), (4, 5, 6, 7)) and "on 4 of 8 ranks only (rank 4" in mixed.source


def test_an_unregistered_fabric_is_not_a_domain():
    nvml = fake_nvml({"GPU-0": (RACK_A, 1)})
    real = nvml.nvmlDeviceGetGpuFabricInfoV

    def in_progress(handle, pointer):
        real(handle, pointer)
        ctypes.cast(pointer, ctypes.POINTER(FakeFabricInfo)).contents.state = 2

    nvml.nvmlDeviceGetGpuFabricInfoV = in_progress
    assert fabric_key(nvml, uuid="GPU-0") == (None, "GPU fabric not registered (state 2, status 0)")
    zero = fake_nvml({"GPU-0": (bytes(16), 1)})
    assert fabric_key(zero, uuid="GPU-0")[0] is None  # NCCL: an all-zero cluster UUID is no fabric info


def test_a_run_on_gpu_ranks_takes_its_racks_from_the_fabric(monkeypatch):
    """resolve_on_ranks on a stand-in 72-rank GPU world: every 'rank' reads the fake NVML for its device."""
    hosts = nvl72_hosts(1)
    nvml = fake_nvml({f"GPU-{r}": (RACK_A, 3) for r in range(72)})
    keys = [fabric_key(nvml, uuid=f"GPU-{r}")[0] for r in range(72)]
    answers = iter([hosts, keys, [""] * 72])  # host names, fabric keys, reasons: what each gather returns
    monkeypatch.setattr("commbench.comm.backend.gather_strings", lambda backend, value: next(answers))
    monkeypatch.setattr(nvlink_domains, "local_fabric_key", lambda index: fabric_key(nvml, uuid=f"GPU-{index}"))
    backend = types.SimpleNamespace(device="cuda:0", world_size=72, local_rank=0, rank=0)
    topology = resolve_on_ranks(TopologySpec(), backend)
    assert topology.racks == (tuple(range(72)),) and topology.source.startswith(FABRIC_SOURCE)
    assert topology.to_dict()["source"] == topology.source  # the header records which source decided


def test_cpu_ranks_and_given_racks_do_not_ask_nvml(monkeypatch):
    def never(index):
        raise AssertionError("NVML read on CPU ranks")

    monkeypatch.setattr(nvlink_domains, "local_fabric_key", never)
    answers = iter([["a", "a", "b", "b"]])
    monkeypatch.setattr("commbench.comm.backend.gather_strings", lambda backend, value: next(answers))
    cpu = types.SimpleNamespace(device="cpu", world_size=4, local_rank=0, rank=0)
    topology = resolve_on_ranks(TopologySpec(), cpu)
    assert topology.racks == ((0, 1), (2, 3)) and "CPU ranks" in topology.source
    answers = iter([["a", "a", "b", "b"]])
    gpu = types.SimpleNamespace(device="cuda:0", world_size=4, local_rank=0, rank=0)
    assert resolve_on_ranks(TopologySpec(nodes_per_rack=2), gpu).racks == ((0, 1, 2, 3),)


def test_without_nvidia_ml_py_the_reason_is_recorded(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    nvml, why = nvlink_domains.import_nvml()
    assert nvml is None and "nvidia-ml-py is not installed" in why
    assert nvlink_domains.local_fabric_key(0) == (None, why)


@pytest.mark.gpu
def test_real_nvml_answers_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    key, why = nvlink_domains.local_fabric_key(0)
    assert (key is None) != (why == "")  # a key, or a reason: never both, never neither


def test_cuda_visible_devices_maps_a_cuda_index_to_the_nvml_gpu():
    from commbench.comm.nvlink_domains import visible_device

    assert visible_device(1, "4,5,6") == (None, 5)
    assert visible_device(0, "GPU-abc,GPU-def") == ("GPU-abc", 0)
    assert visible_device(2, None) == (None, 2) and visible_device(3, "1,2") == (None, 3)


def test_an_older_driver_without_the_versioned_call_still_answers():
    nvml = fake_nvml({"GPU-0": (RACK_A, 5)})

    def not_found(handle, pointer):
        raise RuntimeError("Function Not Found")

    nvml.nvmlDeviceGetGpuFabricInfo, nvml.c_nvmlGpuFabricInfo_t = nvml.nvmlDeviceGetGpuFabricInfoV, FakeFabricInfo
    nvml.nvmlDeviceGetGpuFabricInfoV = not_found
    assert fabric_key(nvml, uuid="GPU-0") == (f"{RACK_A.hex()}:5", "")
    del nvml.nvmlDeviceGetGpuFabricInfo
    assert "Function Not Found" in fabric_key(nvml, uuid="GPU-0")[1]
