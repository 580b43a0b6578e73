"""Which errors say a peer failed under a rank (sweep.isolation.peer_failure), on the texts gloo, NCCL and torch print.

The NCCL texts are torch's DistBackendError as C10D_NCCL_CHECK builds it: "NCCL error in: FILE:LINE,
<ncclGetErrorString(result)>, NCCL version V" then getNcclErrorDetailStr's line and NCCL's last error (pytorch
04dbcd01, torch/csrc/distributed/c10d/NCCLUtils.hpp and NCCLUtils.cpp); ncclGetErrorString's words from NCCL
src/init.cc (v2.30.7-1:3422-3430), the socket warning from src/misc/socket.cc (v2.30.7-1:58)."""

from __future__ import annotations

import pytest

from commbench.sweep.isolation import peer_failure, peer_gone

NCCL_REMOTE = ("DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
               "remote process exited or there was a network error, NCCL version 2.27.5\n"
               "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
               "prematurely.\nLast error:\nsocketProgress: Connection closed by remote peer node2<42123>")
NCCL_SYSTEM = ("DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled "
               "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.12.12\nncclSystemError: System "
               "call (e.g. socket, malloc) or external library call failed or device error. It can be also caused by "
               "unexpected exit of a remote peer.")
NCCL_ABORTED = "DistBackendError: NCCL communicator was aborted on rank 1. "   # NCCLComm::getNcclComm, no reason kept
GLOO_CLOSED = ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
               "[127.0.0.1]:46212")
GLOO_RESET = ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
              "[127.0.0.1]:46212: Connection reset by peer")


@pytest.mark.parametrize("text, words", [
    (GLOO_CLOSED, "a peer closed its connection"),
    (GLOO_RESET, "a peer closed its connection"),
    (NCCL_REMOTE, "NCCL reported a remote process exited (or a network error)"),
    # NCCL's socket warning alone (the last error, as NCCL_DEBUG=WARN prints it)
    ("socketProgress: Connection closed by remote peer node2<42123>",
     "NCCL reported a remote process exited (or a network error)"),
    (NCCL_SYSTEM, "NCCL reported a system error (a peer's exit, or a local fault)"),
    (NCCL_ABORTED, "NCCL's communicator was aborted (a peer failed or timed out)"),
])
def test_peer_failure_texts(text, words):
    assert peer_failure(text) == words
    assert peer_gone(text)


@pytest.mark.parametrize("text", [
    None, "TimeoutError: store keys commbench/sweep/point0/done/1 not all set within 10 s",
    "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms "
    "for recv operation to complete",
    "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, invalid usage (run with NCCL_DEBUG=WARN for details), "
    "NCCL version 2.27.5\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
])
def test_other_errors_say_nothing_of_peers(text):
    assert peer_failure(text) is None and not peer_gone(text)
