"""Op-specific faults through the whole measurement (check, timed loop, check again), at 2, 3 and 4 gloo ranks
on all_reduce (in and out of place) and reduce_scatter: an avg computed as max/n, as a sum without the /n, or with
one rank's input dropped fails in fp32, bf16 and fp16; a signed type reduced as unsigned (int8 as uint8, an
ncclInt8 -> ncclUint8 mix-up) fails max and min; the right data never fails. Found from outside: the avg check saw
only the lead rank's value (the others held 0 or 1, inside the bound) and no max/min input was negative."""

from __future__ import annotations

import pytest
import torch

from collectives import REGISTRY, PointSpec
from commbench.dtypes import get_dtype
from commbench.measure.harness import LoopOptions, measure_point
from tests.distributed import run_ranks

AVG_FAULTS = ("avg_as_max", "avg_no_div", "avg_drop_rank")
SIGN_FAULTS = ("signed_as_unsigned",)


class OpFaultComm:
    """The real comm with one op-level bug (only where it applies: avg faults on avg, sign faults on int8)."""

    def __init__(self, comm, mode: str) -> None:
        self.comm, self.mode = comm, mode
        self.rank, self.size, self.global_ranks = comm.rank, comm.size, comm.global_ranks

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def _call(self, run, out, inp, op):
        """run(out_view, inp_view, op) with the fault applied."""
        if self.mode == "signed_as_unsigned" and out.dtype == torch.int8:
            if inp.data_ptr() == out.data_ptr() and inp.numel() == out.numel():
                view = out.view(torch.uint8)
                return run(view, view, op)
            return run(out.view(torch.uint8), inp.view(torch.uint8), op)
        if op != "avg" or self.mode not in AVG_FAULTS:
            return run(out, inp, op)
        if self.mode == "avg_drop_rank":
            saved = inp.clone()
            if self.rank == self.size - 1:
                inp.zero_()
            run(out, inp, "sum")
            if self.rank == self.size - 1 and inp.data_ptr() != out.data_ptr():
                inp.copy_(saved)
        else:
            run(out, inp, "max" if self.mode == "avg_as_max" else "sum")
        if self.mode != "avg_no_div":
            out.div_(self.size)

    def all_reduce(self, buf, op):
        self._call(lambda o, i, p: self.comm.all_reduce(o, p), buf, buf, op)

    def all_reduce_into(self, out, inp, op):
        self._call(lambda o, i, p: self.comm.all_reduce_into(o, i, p), out, inp, op)

    def reduce_scatter(self, out, inp, op):
        self._call(lambda o, i, p: self.comm.reduce_scatter(o, i, p), out, inp, op)


def _cases(world):
    for name in ("all_reduce", "reduce_scatter"):
        for out_of_place in ((False, True) if name == "all_reduce" else (False,)):
            for dtype in ("float32", "bfloat16", "float16"):
                yield name, dtype, "avg", out_of_place, AVG_FAULTS
            for dtype, op in (("int8", "max"), ("int8", "min")):
                yield name, dtype, op, out_of_place, SIGN_FAULTS


def _wrong(backend):
    out = {}
    loop = LoopOptions(iters=2, warmup_iters=1)
    for index, (name, dtype, op, out_of_place, faults) in enumerate(_cases(backend.world_size)):
        spec = PointSpec(size_bytes=backend.world_size * 256, dtype=get_dtype(dtype), op=op, out_of_place=out_of_place,
                         seed=index + 1)
        for mode in ("none", *faults):
            comm = backend.world if mode == "none" else OpFaultComm(backend.world, mode)
            out[(name, dtype, op, out_of_place, mode)] = measure_point(backend, comm, REGISTRY[name], spec, loop,
                                                                      run_id="op-faults").num_wrong
    return out


@pytest.mark.parametrize("world", [2, 3, 4])
def test_wrong_avg_and_signed_as_unsigned_are_caught(world):
    wrong = run_ranks(_wrong, world, timeout_s=300)[0]
    assert {key[4] for key in wrong} == {"none", *AVG_FAULTS, *SIGN_FAULTS}
    missed = [key for key, count in wrong.items() if (key[4] == "none") != (count == 0)]
    assert missed == [], f"right data reported wrong or a fault not caught: {missed}"
