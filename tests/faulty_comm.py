"""A communicator wrapper that breaks collectives on purpose, so tests can prove the data check
catches them: `noop` (nothing happens), `half` (the second half of every output keeps what it held
before the call), `wrong_peer` (group rank 0's input is replaced by rank 1's for the call: its peers
receive data from the wrong rank, and reductions count rank 1 twice and miss rank 0), `nan` (one
output element NaN, float dtypes) and `zeros` (the whole output zero after the call); and faults that
show only after the first call or only in the data's width: `first_only` (works on the first call
per output shape and dtype, a no-op after), `stale` (after the first call every output of that shape
holds that call's result), `narrow`
(the output passed through a narrower type: fp64 via fp32, fp32/fp16 via bf16, bf16 via fp8,
int32/int64 via uint8; 1-byte integers have none narrower: unchanged), `shift` (the output rotated by
one chunk: every chunk lands one place off) and `offset` (rotated by one element)."""

from __future__ import annotations

import torch

MODES = ("noop", "half", "wrong_peer", "nan", "zeros", "first_only", "stale", "narrow", "shift", "offset")
LATE_MODES = ("first_only", "stale", "narrow", "shift", "offset")  # applied after the call, by `_after`
NARROWER = {torch.float64: torch.float32, torch.float32: torch.bfloat16, torch.float16: torch.bfloat16,
            torch.bfloat16: torch.float8_e5m2, torch.int32: torch.uint8, torch.int64: torch.uint8}


class _Done:
    def __init__(self, after=None) -> None:
        self.after = after

    def wait(self) -> None:
        if self.after:
            self.after()


class FaultyComm:
    def __init__(self, comm, mode: str) -> None:
        assert mode in MODES
        self.comm, self.mode = comm, mode
        self.rank, self.size, self.global_ranks = comm.rank, comm.size, comm.global_ranks
        # per kind of output (shape, dtype): its first call's result. Not per address: a workload that
        # allocates its temporaries per call gets new addresses at random, and a fault keyed on them
        # came and went with the allocator (CI saw grad_reduce_scatter's 'first_only' pass once).
        self.first_result: dict[tuple, torch.Tensor] = {}

    def _after(self, out: torch.Tensor, before: torch.Tensor) -> None:
        """Apply a late fault to `out` after a call that started with `out` holding `before`."""
        kind = (tuple(out.shape), out.dtype)
        first = kind not in self.first_result
        if first:
            self.first_result[kind] = out.clone()
        if self.mode == "first_only" and not first:
            out.copy_(before)
        elif self.mode == "stale" and not first:
            out.copy_(self.first_result[kind])
        elif self.mode == "narrow" and out.dtype in NARROWER:
            out.copy_(out.to(NARROWER[out.dtype]).to(out.dtype))
        elif self.mode == "shift" and out.numel() > 1:
            out.copy_(torch.roll(out, max(1, out.numel() // max(self.size, 2))))
        elif self.mode == "offset" and out.numel() > 1:
            out.copy_(torch.roll(out, 1))

    # --- faults ---------------------------------------------------------------------------------
    def _peer_input(self, buf: torch.Tensor) -> torch.Tensor:
        """The next group rank's `buf` (padded/truncated to this rank's length): via the real comm."""
        length = torch.tensor([buf.numel()], dtype=torch.int64)
        self.comm.all_reduce(length, "max")
        padded = torch.zeros(int(length[0]), dtype=buf.dtype)
        padded[:buf.numel()] = buf
        every = torch.empty(int(length[0]) * self.size, dtype=buf.dtype)
        self.comm.all_gather(every, padded)
        peer = (self.rank + 1) % self.size
        return every[peer * int(length[0]):peer * int(length[0]) + buf.numel()].clone()

    def _run(self, call, out: torch.Tensor, inp: torch.Tensor | None):
        if self.mode == "noop":
            return None
        if self.mode in LATE_MODES:
            before = out.clone()
            result = call()
            self._after(out, before)
            return result
        if self.mode in ("nan", "zeros"):
            result = call()
            if self.mode == "zeros":
                out.zero_()
            elif out.is_floating_point() and out.numel():
                out[out.numel() // 2] = float("nan")
            return result
        if self.mode == "half":
            before = out.clone()
            result = call()
            half = out.numel() // 2
            out[half:] = before[half:]
            return result
        saved, peer = inp.clone(), self._peer_input(inp)
        if self.rank == 0:
            inp.copy_(peer)
        result = call()
        if self.rank == 0 and inp.data_ptr() != out.data_ptr():
            inp.copy_(saved)
        return result

    # --- the Communicator interface ---------------------------------------------------------------
    def all_reduce(self, buf, op):
        self._run(lambda: self.comm.all_reduce(buf, op), buf, buf)

    def reduce_scatter(self, out, inp, op):
        self._run(lambda: self.comm.reduce_scatter(out, inp, op), out, inp)

    def all_gather(self, out, inp):
        self._run(lambda: self.comm.all_gather(out, inp), out, inp)

    def all_to_all(self, out, inp, out_splits=None, in_splits=None):
        self._run(lambda: self.comm.all_to_all(out, inp, out_splits, in_splits), out, inp)

    def all_reduce_into(self, out, inp, op):
        self._run(lambda: self.comm.all_reduce_into(out, inp, op), out, inp)

    def broadcast_into(self, out, inp, root):
        if self.mode == "wrong_peer":  # every rank takes the next rank as the root
            return self.comm.broadcast_into(out, inp, (root + 1) % self.size)
        self._run(lambda: self.comm.broadcast_into(out, inp, root), out, inp)

    def broadcast(self, buf, root):
        if self.mode == "wrong_peer":  # every rank takes the next rank as the root
            self.comm.broadcast(buf, (root + 1) % self.size)
        else:
            self._run(lambda: self.comm.broadcast(buf, root), buf, buf)

    def reduce(self, buf, root, op):
        self._run(lambda: self.comm.reduce(buf, root, op), buf, buf)

    def reduce_into(self, out, inp, root, op):
        self._run(lambda: self.comm.reduce_into(out, inp, root, op), out, inp)

    def send_recv(self, send_buf, dst, recv_buf, src):
        self._run(lambda: self.comm.send_recv(send_buf, dst, recv_buf, src), recv_buf, send_buf)

    def start_send(self, buf, dst):
        return _Done() if self.mode in ("noop", "zeros") else self.comm.start_send(buf, dst)

    def start_recv(self, buf, src):
        if self.mode in ("noop", "zeros"):
            return _Done()
        # The copy of what the buffer held is taken before the receive starts: an irecv may land
        # before start_recv returns, and a copy taken after it would restore the received data.
        before = buf.clone() if self.mode == "half" or self.mode in LATE_MODES else None
        half = buf.numel() // 2 if self.mode == "half" else 0
        handle = self.comm.start_recv(buf, src)
        if self.mode == "nan" and buf.is_floating_point():
            return _Done(lambda: (handle.wait(), buf.__setitem__(0, float("nan"))))
        if self.mode in LATE_MODES:
            return _Done(lambda: (handle.wait(), self._after(buf, before)))
        if self.mode != "half":
            return handle

        def restore():
            handle.wait()
            buf[half:] = before[half:]
        return _Done(restore)

    def barrier(self):
        self.comm.barrier()
