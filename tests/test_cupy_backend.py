"""cupy-nccl without a GPU: dtype/op mapping, bfloat16 storage, availability reasons, the exact NCCL
calls the communicator makes (against recording fakes), and the CLI's one-line refusal."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.cupy_backend import CupyCommunicator, cupy_status
from commbench.comm.nccl_types import (
    NCCL_DTYPES, bfloat16_bits, bfloat16_values, check_nccl_op, format_nccl_version, from_storage,
    nccl_dtype_of, storage_dtype, to_storage,
)
from commbench.dtypes import dtype_names, get_dtype
from commbench.errors import CommbenchError


def test_every_commbench_dtype_has_storage_and_the_nccl_h_enum():
    expected = {"float32": ("float32", 7), "float64": ("float64", 8), "float16": ("float16", 6),
                "bfloat16": ("uint16", 9), "int8": ("int8", 0), "uint8": ("uint8", 1), "int32": ("int32", 2),
                "int64": ("int64", 4)}
    assert set(expected) == set(dtype_names()) == set(NCCL_DTYPES)
    for name, (storage, enum) in expected.items():
        assert storage_dtype(get_dtype(name)) == np.dtype(storage)
        assert nccl_dtype_of(storage_dtype(get_dtype(name))) == enum


def test_bfloat16_bits_round_like_torch_and_widen_exactly():
    values = np.array([1.0, -2.5, 1 + 2**-8, 1 + 3 * 2**-9, 3.14159, 65504.0, 1e-40, np.inf, -np.inf])
    bits = bfloat16_bits(values)
    assert bits.dtype == np.uint16 and bits[0] == 0x3F80 and bits[1] == 0xC020
    reference = torch.from_numpy(values).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(bfloat16_values(bits), reference)
    assert bfloat16_values(bits)[2] == 1.0  # halfway rounds to even
    assert np.isnan(bfloat16_values(bfloat16_bits(np.array([np.nan])))[0])


def test_storage_roundtrip_widens_like_backend_download():
    stored = to_storage(np.array([1.0, 2.0, 250.0]), np.dtype(np.uint8))
    assert stored.dtype == np.uint8 and from_storage(stored).dtype == np.int64
    half = to_storage(np.array([0.5, 3.0]), np.dtype(np.float16))
    assert from_storage(half).dtype == np.float64 and from_storage(half).tolist() == [0.5, 3.0]
    bf = to_storage(np.array([7.0, 1 / 3]), np.dtype(np.uint16))
    assert from_storage(bf).tolist() == [7.0, float(torch.tensor(1 / 3).to(torch.bfloat16))]


def test_op_checks_name_the_option_and_the_nccl_version():
    check_nccl_op("avg", get_dtype("bfloat16"), 22105)
    check_nccl_op("avg", get_dtype("int32"), 22105)  # NCCL averages integers: the sum, then a truncating division
    with pytest.raises(CommbenchError, match=r"--op=avg needs NCCL >= 2.10"):
        check_nccl_op("avg", get_dtype("int32"), 2804)
    with pytest.raises(CommbenchError, match=r"--dtype=bfloat16 needs NCCL >= 2.10, CuPy loaded NCCL 2.8.4"):
        check_nccl_op("sum", get_dtype("bfloat16"), 2804)
    with pytest.raises(CommbenchError, match="--op='xor' is invalid"):
        check_nccl_op("xor", get_dtype("float32"), 22105)
    assert format_nccl_version(22105) == "2.21.5" and format_nccl_version(2708) == "2.7.8"


def _importer(modules: dict):
    def import_module(name):
        if isinstance(modules.get(name), BaseException):
            raise modules[name]
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return modules[name]
    return import_module


def _fake_cupy(device_count):
    def get_count():
        if isinstance(device_count, BaseException):
            raise device_count
        return device_count
    runtime = types.SimpleNamespace(getDeviceCount=get_count)
    return types.SimpleNamespace(__version__="13.3.0", cuda=types.SimpleNamespace(runtime=runtime))


def test_status_says_why_cupy_nccl_is_unavailable():
    nccl_ok = types.SimpleNamespace(available=True, get_version=lambda: 22105)
    assert cupy_status(_importer({})) == (False, "CuPy is not installed (pip install 'commbench[cuda]')")
    broken = ImportError("CuPy failed to load libnvrtc.so.12")
    assert cupy_status(_importer({"cupy": broken}))[1] == "CuPy failed to import (CuPy failed to load libnvrtc.so.12)"
    no_nccl = cupy_status(_importer({"cupy": _fake_cupy(1), "cupy.cuda.nccl": types.SimpleNamespace(available=False)}))
    assert not no_nccl[0] and "cannot load NCCL" in no_nccl[1] and "nvidia-nccl-cu12" in no_nccl[1]
    no_gpu = cupy_status(_importer({"cupy": _fake_cupy(RuntimeError("cudaErrorNoDevice: no CUDA-capable device")),
                                    "cupy.cuda.nccl": nccl_ok}))
    assert no_gpu == (False, "no CUDA GPU is visible to CuPy (cudaErrorNoDevice: no CUDA-capable device)")
    ok = cupy_status(_importer({"cupy": _fake_cupy(8), "cupy.cuda.nccl": nccl_ok}))
    assert ok == (True, "CuPy 13.3.0, NCCL 2.21.5, 8 GPU(s) visible")


class FakeBuffer:
    """What the communicator reads from a cupy array: data.ptr, size, dtype, itemsize."""

    def __init__(self, ptr: int, size: int, dtype=np.float32):
        self.data = types.SimpleNamespace(ptr=ptr)
        self.size, self.dtype, self.itemsize = size, np.dtype(dtype), np.dtype(dtype).itemsize


class RecordingNccl:
    """Stands in for both cupy.cuda.nccl (groupStart/groupEnd) and an NcclCommunicator."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, *args))


def _communicator(rank, size):
    nccl = RecordingNccl()
    stream = types.SimpleNamespace(ptr=99)
    return CupyCommunicator(nccl, range(size), rank, stream, nccl), nccl


def test_uneven_all_to_all_is_one_group_of_sends_and_recvs_at_the_right_addresses():
    comm, nccl = _communicator(rank=1, size=3)
    inp, out = FakeBuffer(1000, 9), FakeBuffer(5000, 7)
    comm.all_to_all(out, inp, out_splits=[4, 0, 3], in_splits=[2, 3, 4])
    assert nccl.calls == [
        ("groupStart",),
        ("send", 1000 + 2 * 4, 3, 7, 1, 99),  # own chunk to self (step 0); recv from self is 0 elements
        ("send", 1000 + 5 * 4, 4, 7, 2, 99), ("recv", 5000, 4, 7, 0, 99),
        ("send", 1000, 2, 7, 0, 99), ("recv", 5000 + 4 * 4, 3, 7, 2, 99),
        ("groupEnd",)]


def test_even_all_to_all_and_collectives_pass_counts_types_and_ops():
    comm, nccl = _communicator(rank=0, size=2)
    comm.all_to_all(FakeBuffer(200, 4, np.uint16), FakeBuffer(100, 4, np.uint16))
    assert [c[0] for c in nccl.calls] == ["groupStart", "send", "recv", "send", "recv", "groupEnd"]
    assert nccl.calls[3] == ("send", 100 + 2 * 2, 2, 9, 1, 99)  # bfloat16 storage -> ncclBfloat16
    nccl.calls.clear()
    buf, half = FakeBuffer(10, 8, np.float64), FakeBuffer(20, 4, np.float64)
    comm.all_reduce(buf, "max")
    comm.reduce_scatter(half, buf, "avg")
    comm.all_gather(buf, half)
    comm.broadcast(buf, 1)
    comm.send_recv(half, 1, FakeBuffer(30, 4, np.float64), 1)
    assert nccl.calls == [("allReduce", 10, 10, 8, 8, 2, 99), ("reduceScatter", 10, 20, 4, 8, 4, 99),
                          ("allGather", 20, 10, 4, 8, 99), ("broadcast", 10, 10, 8, 8, 1, 99),
                          ("groupStart",), ("send", 20, 4, 8, 1, 99), ("recv", 30, 4, 8, 1, 99), ("groupEnd",)]


def test_all_to_all_refuses_splits_that_overrun_the_buffer():
    comm, nccl = _communicator(rank=0, size=2)
    with pytest.raises(CommbenchError, match="more than the input buffer's 4"):
        comm.all_to_all(FakeBuffer(0, 8), FakeBuffer(0, 4), out_splits=[4, 4], in_splits=[3, 3])
    assert nccl.calls == []


@pytest.mark.skipif(cupy_status()[0], reason="CuPy/NCCL is available here")
def test_cli_refuses_cupy_nccl_with_one_line_and_exit_2():
    result = CliRunner().invoke(app, ["bench", "all_reduce", "--backend", "cupy-nccl", "--nproc", "1"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --backend=cupy-nccl is not available here: ")


def test_cached_schedules_are_keyed_by_splits():
    comm, nccl = _communicator(rank=0, size=2)
    inp, out = FakeBuffer(0, 4), FakeBuffer(100, 4)
    comm.all_to_all(out, inp, out_splits=[1, 3], in_splits=[2, 2])
    first = list(nccl.calls)
    nccl.calls.clear()
    comm.all_to_all(out, inp, out_splits=[3, 1], in_splits=[2, 2])
    assert ("recv", 100 + 3 * 4, 1, 7, 1, 99) in nccl.calls and nccl.calls != first
    nccl.calls.clear()
    comm.all_to_all(out, inp, out_splits=[1, 3], in_splits=[2, 2])
    assert nccl.calls == first
