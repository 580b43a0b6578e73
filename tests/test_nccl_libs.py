"""Which NCCL each backend loads (commbench env): origin from the memory map, version mismatch."""

from __future__ import annotations

import types

from commbench.comm.nccl_libs import NcclLibrary, cupy_nccl, mapped_libnccl, origin_of, torch_nccl, version_mismatch

MAPS = """\
7f00-7f10 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f10-7f20 r-xp 00000000 08:01 2 /venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
7f20-7f30 r--p 00001000 08:01 2 /venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
7f30-7f40 rw-p 00000000 00:00 0
"""


def test_memory_map_names_each_libnccl_once():
    assert mapped_libnccl(MAPS) == ["/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"]
    assert mapped_libnccl("7f30-7f40 rw-p 00000000 00:00 0\n") == []


def test_origin_in_words():
    assert origin_of("/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2").startswith("pip bundle")
    assert origin_of("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5") == "system library"
    assert origin_of(None).startswith("linked into torch")


def _fake_torch(available: bool, version=(2, 21, 5), cuda="12.4"):
    nccl = types.SimpleNamespace(version=lambda: version)
    cuda_mod = types.SimpleNamespace(is_available=lambda: available, nccl=nccl)
    return types.SimpleNamespace(cuda=cuda_mod, version=types.SimpleNamespace(cuda=cuda))


def test_torch_nccl_reads_version_and_origin():
    lib = torch_nccl(import_module=lambda name: _fake_torch(True), read_maps=lambda: MAPS)
    assert lib.version == "2.21.5" and lib.origin.startswith("pip bundle") and lib.path.endswith("libnccl.so.2")
    cpu = torch_nccl(import_module=lambda name: _fake_torch(False, cuda=None), read_maps=lambda: "")
    assert cpu.version is None and "CPU build" in cpu.origin


def test_cupy_nccl_not_installed_is_unavailable_not_an_error():
    def missing(name):
        raise ModuleNotFoundError(name)
    lib = cupy_nccl(import_module=missing, read_maps=lambda: "")
    assert lib.version is None and "not installed" in lib.origin


def test_cupy_nccl_path_is_the_library_it_added():
    maps = iter(["", "7f00-7f10 r-xp 0 0:0 1 /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"])
    fake = types.SimpleNamespace(available=True, get_version=lambda: 22304)
    lib = cupy_nccl(import_module=lambda name: fake, read_maps=lambda: next(maps))
    assert lib.version == "2.23.4" and lib.origin == "system library"


def test_mismatch_warns_only_when_both_versions_are_known_and_differ():
    a = NcclLibrary(version="2.21.5", path=None, origin="x")
    b = NcclLibrary(version="2.23.4", path=None, origin="y")
    none = NcclLibrary(version=None, path=None, origin="unavailable")
    assert "2.21.5" in version_mismatch(a, b) and "2.23.4" in version_mismatch(a, b)
    assert version_mismatch(a, a) is None and version_mismatch(a, none) is None
