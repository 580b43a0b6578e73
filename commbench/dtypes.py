"""Element types a benchmark can use, by nccl-tests name, with what the data check needs to know."""

from __future__ import annotations

from dataclasses import dataclass

from commbench.errors import invalid


@dataclass(frozen=True, kw_only=True)
class DType:
    """One element type. `exact_int_limit`: every integer in [-limit, limit] is representable."""

    name: str
    itemsize: int
    torch_name: str
    is_float: bool
    exact_int_limit: int
    eps: float  # machine epsilon (1 for integer types)


_DTYPES = {
    d.name: d
    for d in (
        DType(name="float32", itemsize=4, torch_name="float32", is_float=True, exact_int_limit=1 << 24, eps=2.0**-23),
        DType(name="float64", itemsize=8, torch_name="float64", is_float=True, exact_int_limit=1 << 53, eps=2.0**-52),
        DType(name="float16", itemsize=2, torch_name="float16", is_float=True, exact_int_limit=1 << 11, eps=2.0**-10),
        DType(name="bfloat16", itemsize=2, torch_name="bfloat16", is_float=True, exact_int_limit=1 << 8, eps=2.0**-7),
        DType(name="int8", itemsize=1, torch_name="int8", is_float=False, exact_int_limit=127, eps=1.0),
        DType(name="uint8", itemsize=1, torch_name="uint8", is_float=False, exact_int_limit=255, eps=1.0),
        DType(name="int32", itemsize=4, torch_name="int32", is_float=False, exact_int_limit=(1 << 31) - 1, eps=1.0),
        DType(name="int64", itemsize=8, torch_name="int64", is_float=False, exact_int_limit=(1 << 63) - 1, eps=1.0),
    )
}

# nccl-tests' -d names map onto ours.
_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "bf16": "bfloat16",
            "fp32": "float32", "fp16": "float16", "fp64": "float64", "int": "int32", "char": "int8"}


def dtype_names() -> list[str]:
    return list(_DTYPES)


def get_dtype(name: str) -> DType:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _DTYPES:
        raise invalid("--dtype", name, f"allowed: {', '.join(_DTYPES)} (or nccl-tests' float, half, double)")
    return _DTYPES[key]
