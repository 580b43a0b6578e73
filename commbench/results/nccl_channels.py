"""Where NCCL lowers a measured channel count, and rules that leave the count to NCCL there.

A combination with a channel count N is measured with NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = N
(comm.nccl_tuning.TuningCombo.env): the communicator's count, comm->nChannels. NCCL still lowers it per call
(NVIDIA/nccl src/enqueue.cc topoGetAlgoInfo, the same in v2.19.3-1, v2.24.3-1, v2.27.3-1, v2.28.9-1 and
v2.30.7-1): with `nc = comm->nChannels`, `nt = comm->maxThreads[algo][proto]` and
`threadThreshold = comm->threadThresholds[algo][proto]`,

  * ring, tree (and CollNet chain, the same `else` branch): `while (nBytes < nc * nt * threadThreshold)
    { if (nc >= 2) nc--; else break; }`, so the call runs on min(N, max(1, floor(nBytes / (nt *
    threadThreshold)))) channels: lowered exactly where nBytes < N * nt * threadThreshold, and below that
    the result does not depend on the starting count;
  * NVLS, NVLS tree: `nc = comm->nvlsChannels` (2.28+: min(nvlsChannels, nChannels) for NVLS across
    nodes), no lowering by size -- and nvlsChannels is not N: src/transport/nvls.cc sets it from the GPU
    (2.27+: NVLS_NCHANNELS_SM90 16, SM100 24/32; 2.24: 16), NCCL_NVLS_NCHANNELS and NCCL_MIN/MAX_CTAS,
    while NCCL_MIN/MAX_NCHANNELS shape comm->nChannels only (src/graph/connect.cc ncclMinNchannels/ncclMaxNchannels). So NVLS tree, and
    NVLS on one node, ran on nvlsChannels whatever N; a rule's N would run min(N, nvlsChannels) (the scheduler
    caps NVLS at nvlsChannels: scheduleCollTasksToPlan), fewer than measured where N < nvlsChannels. Those
    rules say 0 at every size (`count_not_measured`). NVLS across nodes ran on min(nvlsChannels, N) in 2.28+,
    which N reproduces (the cap there is min(nChannels, nvlsChannels)); in 2.24-2.27 it ran on nvlsChannels
    whatever N, so a rule measured with those releases (the run headers' NCCL version) says 0 too;
  * PAT: the branch of ring/tree, but NCCL never sets comm->maxThreads[PAT] (src/graph/tuning.cc
    ncclTopoTuneModel; the communicator is calloc'ed, src/init.cc), so nt = 0 and nothing is lowered;
  * CollNet direct: a loop of its own by `collnetDirect.nHeads` that halves the threshold on the way down,
    so its result depends on the starting count, and on nHeads, which no run records.

CollNet (direct and chain) rules say channels 0 at every size: NCCL schedules a CollNet call on the tuner's count as
it is (src/enqueue.cc scheduleCollTasksToPlan, `if (task->isCollnet) { int nChannels = task->nMaxChannels;`:
v2.24.3-1 :521, v2.28.9-1 :569, v2.30.7-1 :625), where every other call is capped at the channels NCCL set up,
so commbench's plugin drops a CollNet rule with a count (tuner_plugin/commbench_tuner.c parseRule). Channels 0 runs
NCCL's own count from the communicator's, as measured where the communicator has the measured N.

The tuner's count overrides all of that: ncclGetAlgoInfo calls the plugin's getCollInfo, then
topoGetAlgoInfo, then `info->nMaxChannels = nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`
(src/enqueue.cc, v2.24.3-1 to v2.30.7-1). A rule with channels N therefore runs a small call on N channels
where the measurement ran it on fewer -- and with the thread count NCCL derived for its own, lowered count
(the `nt /= 2` loop after the channel loop): a choice never measured. Channels 0 (NCCL's own count) lets the
loop run; from the communicator's own count C >= N it ends where the measurement's did (the result is
min(C, ...) = the measured one below N * nt * threadThreshold), with the same nt.

nt and threadThreshold (src/graph/tuning.cc ncclTopoTuneModel, v2.19.3-1 to v2.30.7-1; constants in
src/include/device.h and comm.h): maxThreads are NCCL_NTHREADS for ring/tree Simple and LL (64..512; ring
Simple's default is 256 where the ring's intra-node bandwidth is PCI's, else 512), NCCL_LL128_NTHREADS for
LL128 (160..640, default 640), 640 for CollNet chain Simple; not the GPU architecture in these versions.
threadThresholds: LL 8, LL128 8, Simple 64, ring LL's multiplied by nRanks, CollNet 512; then
NCCL_THREAD_THRESHOLDS ("treeLL treeLL128 treeSimple ringLL ringLL128 ringSimple", sscanf %ld, values >= 0
replace) overrides. Where the run records no NCCL_NTHREADS the largest nt is taken (512: ring Simple may have
used 256), so a rule leaves channels to NCCL up to a size where the measurement may already have run all N:
there NCCL's own count may exceed N (up to 2N) where the communicator has more than N channels.
"""

from __future__ import annotations

import dataclasses
import re

from commbench.comm.nccl_tuning import TuningCombo

WARP_SIZE = 32  # src/include/device.h
NCCL_MAX_NTHREADS = 640  # src/include/device.h
NCCL_SIMPLE_MAX_NTHREADS = 512
NCCL_LL_MAX_NTHREADS = 512
NCCL_LL128_MAX_NTHREADS = 640
# src/include/comm.h NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD; CollNet's 512 is set in tuning.cc
THREAD_THRESHOLDS = {"ll": 8, "ll128": 8, "simple": 64}
COLLNET_THREAD_THRESHOLD = 512
# NCCL_THREAD_THRESHOLDS order: t[0] = tree (NCCL_ALGO_TREE 0), t[1] = ring (NCCL_ALGO_RING 1), protocols LL, LL128, Simple
THRESHOLD_ENV_ORDER = (("tree", "ll"), ("tree", "ll128"), ("tree", "simple"),
                       ("ring", "ll"), ("ring", "ll128"), ("ring", "simple"))
RING_TREE = ("ring", "tree")
NEVER_LOWERED = ("nvls", "nvls_tree", "pat")  # nvlsChannels, or PAT's nt of 0: no lowering by size
COLLNET = ("collnet_direct", "collnet_chain")  # a count of the tuner's is scheduled uncapped: always 0


def _threads_from_env(value: str | None, minimum: int, maximum: int) -> int:
    """tuning.cc getNthreads with the default unknown: a positive multiple of 32 clamped to [minimum, maximum]; any
    other or no value: `maximum` (NCCL's default is at most that, and a bad value falls back to it or to the default)."""
    try:
        threads = int(str(value).strip(), 0)
    except ValueError:
        return maximum
    if threads <= 0 or threads % WARP_SIZE:
        return maximum
    return max(minimum, min(maximum, threads))


def max_threads_per_channel(algo: str, proto: str, nccl_env: dict) -> int:
    """The largest comm->maxThreads[algo][proto] NCCL could have used with these NCCL_* settings (0: NCCL sets none,
    and a loop on nc * 0 * threshold lowers nothing)."""
    if algo in RING_TREE and proto in ("simple", "ll"):
        top = NCCL_SIMPLE_MAX_NTHREADS if proto == "simple" else NCCL_LL_MAX_NTHREADS
        return _threads_from_env(nccl_env.get("NCCL_NTHREADS"), 2 * WARP_SIZE, top)
    if algo in RING_TREE and proto == "ll128":
        return _threads_from_env(nccl_env.get("NCCL_LL128_NTHREADS"), NCCL_LL128_MAX_NTHREADS // 4,
                                 NCCL_LL128_MAX_NTHREADS)
    if algo == "collnet_chain" and proto == "simple":
        return NCCL_MAX_NTHREADS
    return 0


def threshold_overrides(value: str | None) -> dict[tuple[str, str], int]:
    """NCCL_THREAD_THRESHOLDS as tuning.cc reads it: sscanf("%ld %ld %ld %ld %ld %ld") -- leading integers up to the
    first that does not parse -- each >= 0 replacing the (algorithm, protocol) of its position."""
    out, text = {}, str(value or "")
    for key in THRESHOLD_ENV_ORDER:
        match = re.match(r"\s*([+-]?\d+)", text)
        if not match:
            break
        text = text[match.end():]
        if int(match.group(1)) >= 0:
            out[key] = int(match.group(1))
    return out


def thread_threshold(algo: str, proto: str, ranks: int, nccl_env: dict) -> int:
    """comm->threadThresholds[algo][proto]: the defaults, ring LL's times nRanks, CollNet's 512, then
    NCCL_THREAD_THRESHOLDS (which replaces ring LL's product: it is applied after)."""
    threshold = THREAD_THRESHOLDS[proto]
    if algo == "ring" and proto == "ll":
        threshold *= ranks
    if algo.startswith("collnet") and proto == "simple":
        threshold = COLLNET_THREAD_THRESHOLD
    return threshold_overrides(nccl_env.get("NCCL_THREAD_THRESHOLDS")).get((algo, proto), threshold)


def lowering_bound_bytes(combo: TuningCombo, ranks: int, nccl_env: dict) -> int | None:
    """The size from which a call of `combo` ran on all of its `combo.channels` (the communicator's count): below it
    NCCL may have lowered the count (src/enqueue.cc topoGetAlgoInfo, `nBytes < nc * nt * threadThreshold`), taking
    the largest nt these settings allow. 0: NCCL never lowers this algorithm's count by size (NVLS, NVLS tree, PAT)
    or the combination names none; None: not known (CollNet direct: its own loop, by nHeads)."""
    if combo.channels is None or combo.algo in NEVER_LOWERED:
        return 0
    if combo.algo == "collnet_direct":
        return None
    threads = max_threads_per_channel(combo.algo, combo.proto, nccl_env)
    return combo.channels * threads * thread_threshold(combo.algo, combo.proto, ranks, nccl_env)


NVLS_CHANNELS_ACROSS_NODES = (2, 28)   # from 2.28.3-1 multi-node NVLS runs min(nvlsChannels, nChannels)


def count_not_measured(combo: TuningCombo, nodes: int, nccl_versions: tuple[str | None, ...] = ()) -> bool:
    """Whether NCCL ran `combo` on a count its channels did not set: NVLS tree, and NVLS on one node (nNodes as
    NCCL counts it), run on comm->nvlsChannels, which NCCL_MIN/MAX_NCHANNELS leave alone (src/enqueue.cc
    topoGetAlgoInfo, src/transport/nvls.cc, v2.24.3-1 to v2.30.7-1); and NVLS across nodes where a run measuring it
    had an NCCL before 2.28 (`nccl_versions`, the rule's runs': v2.27.7-1 topoGetAlgoInfo sets nc = nvlsChannels for
    every NVLS call, v2.28.3-1 min(nvlsChannels, nChannels) across nodes). An unknown version keeps the count."""
    if combo.channels is None:
        return False
    if combo.algo == "nvls_tree" or (combo.algo == "nvls" and nodes == 1):
        return True
    return combo.algo == "nvls" and any(v is not None and v < NVLS_CHANNELS_ACROSS_NODES
                                        for v in map(_release, nccl_versions))


def _release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of an NCCL version string ("2.27.3", "2.27.3+cuda12.9"); None when it is not one."""
    parts = str(version or "").split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else None


def _part(rule, lo: int, hi: int, channels: int, lowered: bool):
    """The rule's sizes [lo, hi] with `channels`; the measured sizes (and their speed-ups) within it, or the
    nearest one where none is: the measurement that part of the range follows."""
    inside = [i for i, size in enumerate(rule.sizes_bytes) if lo <= size <= hi]
    if not inside and rule.sizes_bytes:
        inside = [min(range(len(rule.sizes_bytes)), key=lambda i: min(abs(rule.sizes_bytes[i] - lo),
                                                                       abs(rule.sizes_bytes[i] - hi)))]
    return dataclasses.replace(rule, min_bytes=lo, max_bytes=hi, channels=channels,
                               lowered_channels=rule.lowered_channels if lowered else 0,
                               lowered_below_bytes=rule.lowered_below_bytes if lowered else 0,
                               sizes_bytes=tuple(rule.sizes_bytes[i] for i in inside),
                               speedups=tuple(rule.speedups[i] for i in inside) if rule.speedups else ())


def leave_lowered_channels_to_nccl(rules: list, env_of_run: dict[str, dict],
                                   version_of_run: dict[str, str | None] | None = None) -> list:
    """Each rule with a channel count N, at the sizes where NCCL may have lowered N while it was measured
    (lowering_bound_bytes, the largest over the rule's runs' NCCL_* settings; none given: NCCL's defaults), says
    channels 0 instead -- NCCL's own count, lowered by NCCL as in the measurement -- and keeps N from that size up;
    a rule across that size becomes two. CollNet rules (direct and chain) say 0 at every size: NCCL would schedule
    their N uncapped, and commbench's plugin drops such a line (module docstring). NVLS tree and one-node NVLS rules
    (and multi-node NVLS measured with NCCL before 2.28: `version_of_run`), measured on nvlsChannels whatever N
    (count_not_measured), say 0 at every size."""
    out = []
    for rule in rules:
        if rule.channels <= 0:
            out.append(rule)
            continue
        if rule.algo in COLLNET:
            out.append(dataclasses.replace(rule, channels=0, collnet_channels=rule.channels))
            continue
        combo = TuningCombo(algo=rule.algo, proto=rule.proto, channels=rule.channels)
        if count_not_measured(combo, rule.nodes, tuple((version_of_run or {}).get(r) for r in rule.run_ids)):
            out.append(dataclasses.replace(rule, channels=0, nvls_channels=rule.channels))
            continue
        bounds = [lowering_bound_bytes(combo, rule.ranks, env_of_run.get(run_id, {}))
                  for run_id in (rule.run_ids or ("",))]
        bound = max(bounds)
        if bound <= rule.min_bytes:
            out.append(rule)
            continue
        rule = dataclasses.replace(rule, lowered_channels=rule.channels, lowered_below_bytes=bound)
        if bound > rule.max_bytes:
            out.append(_part(rule, rule.min_bytes, rule.max_bytes, 0, True))
        else:
            out += [_part(rule, rule.min_bytes, bound - 1, 0, True), _part(rule, bound, rule.max_bytes, rule.channels,
                                                                           False)]
    return out
