"""NCCL data types and reduction ops for raw NCCL calls, and how our dtypes are stored in CuPy.

Enum values are ncclDataType_t / ncclRedOp_t from nccl.h (NCCL 2.10+: ncclBfloat16 = 9,
ncclAvg = 4). CuPy has no bfloat16 dtype: bfloat16 buffers are held as uint16 raw storage (the
bit pattern, same size) and passed to NCCL as ncclBfloat16; values are converted on upload with
torch's rounding (round to nearest even, as the torch backend) and widened on download by
shifting the 16 bits into the top of a float32 (bfloat16 is float32's upper half). uint16 is no
other commbench dtype, so a uint16 buffer always means bfloat16.
"""

from __future__ import annotations

import numpy as np

from commbench.comm.backend import REDUCE_OPS
from commbench.dtypes import DType
from commbench.errors import CommbenchError

NCCL_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7, "float64": 8,
               "bfloat16": 9}
NCCL_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_NCCL_BY_STORAGE = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int32): 2, np.dtype(np.int64): 4,
                    np.dtype(np.float16): 6, np.dtype(np.float32): 7, np.dtype(np.float64): 8,
                    np.dtype(np.uint16): 9}
NCCL_2_10 = 21000  # ncclGetVersion's code: major * 10000 + minor * 100 + patch (NCCL >= 2.9)
assert set(NCCL_OPS) == set(REDUCE_OPS)


def storage_dtype(dtype: DType) -> np.dtype:
    """The numpy/CuPy dtype a buffer of `dtype` is allocated with."""
    if dtype.name not in NCCL_DTYPES:
        raise CommbenchError(f"--dtype={dtype.name} has no NCCL type: allowed {', '.join(NCCL_DTYPES)}")
    return np.dtype(np.uint16) if dtype.name == "bfloat16" else np.dtype(dtype.name)


def nccl_dtype_of(storage: np.dtype) -> int:
    """ncclDataType_t for a buffer's storage dtype (uint16 = bfloat16)."""
    return _NCCL_BY_STORAGE[np.dtype(storage)]


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float values -> bfloat16 bit patterns (uint16), rounded as torch rounds."""
    import torch

    wide = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
    return wide.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> exact float64 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def to_storage(values: np.ndarray, storage: np.dtype) -> np.ndarray:
    """Host values (any numeric dtype) -> a contiguous host array in the buffer's storage dtype."""
    if np.dtype(storage) == np.uint16:
        return bfloat16_bits(values)
    return np.ascontiguousarray(values).astype(storage, copy=False)


def from_storage(host: np.ndarray) -> np.ndarray:
    """A downloaded buffer -> float64 (floats, bfloat16) or int64 (integers), as Backend.download."""
    if host.dtype == np.uint16:
        return bfloat16_values(host)
    return host.astype(np.float64 if host.dtype.kind == "f" else np.int64)


def check_nccl_op(op: str, dtype: DType, nccl_version: int) -> None:
    """Raise CommbenchError if NCCL `nccl_version` cannot reduce `dtype` with `op`."""
    if op not in NCCL_OPS:
        raise CommbenchError(f"--op={op!r} is invalid: allowed {', '.join(NCCL_OPS)}")
    storage_dtype(dtype)
    if nccl_version < NCCL_2_10 and (op == "avg" or dtype.name == "bfloat16"):
        what = "--op=avg" if op == "avg" else "--dtype=bfloat16"
        raise CommbenchError(f"{what} needs NCCL >= 2.10, CuPy loaded NCCL {format_nccl_version(nccl_version)}")


def format_nccl_version(code: int) -> str:
    """ncclGetVersion's integer -> '2.21.5' (codes below 2.9 used major * 1000 + minor * 100 + patch)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
