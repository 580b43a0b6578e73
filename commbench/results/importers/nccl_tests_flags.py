"""nccl-tests flags that change what a row measures, read from the log: -z (blocking mode), -R (buffer registration),
-D / -V (device-API kernels). Sources: NVIDIA/nccl-tests v2.19.6 src/common.cu (getopt string
"...z:...R:x:D:V:...", parseArgs) and src/util.cu writeBenchmarkLinePreamble/banner lines; v2.18.3 src/util.cu for
the older -z wording. A point measured with one of them is another measurement than a default run's: each is a key
of the record's params, as -m (agg_iters), -G (cuda_graph) and -u (unalign) are, so compare, fit and nccl-tuner never
match it to a default point."""

from __future__ import annotations

import re

# -z modes (src/util.cu v2.19.6 lines 629-633; v2.18.3 lines 522-523 printed two wordings for 1 and >1). Mode 1 is
# stored as True, as commbench's own `bench -z` records it (measure/harness.py loop_params: wait, then a barrier of
# every rank after each call), so a mode-1 import still matches commbench's blocking runs; 2 and 3 are ints.
BLOCKING_UNKNOWN = "unknown"
_BLOCKING_WORDING = (
    ("wait and barrier after each inner iteration", True),          # -z 1, >= 2.19.3
    ("wait for completion and barrier after each collective", True),  # -z 1, before
    ("wait after each inner iteration (-m), no barrier", 2),        # -z 2: no barrier
    ("wait for completion after each collective (no barrier)", 2),  # 2.18: -z > 1 (no -z 3 yet: as -z 2)
    ("wait and barrier after each outer iteration", 3),             # -z 3: times the collectives only (collOnlySec)
)
BLOCKING_UNKNOWN_NOTE = ("nccl-tests -z mode unknown: the -J file says only blocking_collectives=true (a bool for every "
                         "-z mode; src/util.cu jsonBool(blocking_coll)) and its args name no -z: params.blocking="
                         "'unknown', matched to no run of a known mode")
DEVICE_KERNEL_NOTE = ("nccl-tests -D {impl}: timed nccl-tests' own device-API kernels (src/common.cu startColl calls "
                      "ncclTestEngine.runColl with deviceImpl > 0, e.g. all_reduce.cu's 'Basic LSA implementation for "
                      "demonstration'), not NCCL's collective call: params.device_impl={impl}; nccl-tuner leaves such "
                      "points out and fit names the loop")
REGISTER_NAMES = {1: "local", 2: "symmetric"}   # -R 1: ncclCommRegister; -R 2: ncclCommWindowRegister (NCCL >= 2.27)
SYMMETRIC_SINCE = (2, 27, 0)   # src/common.cu: "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting
# to local registration"


def blocking_from_banner(line_body: str):
    """params.blocking for a text log's '# Blocking Enabled: ...' line: True (-z 1), 2 or 3, or 'unknown' for a wording
    none of the releases read here print."""
    for wording, mode in _BLOCKING_WORDING:
        if wording in line_body:
            return mode
    return BLOCKING_UNKNOWN


def option_value(argv: list[str], short: str, long: str) -> str | None:
    """The last value getopt_long would give a required-argument option: '-D 1', '-D1', '--device_implementation 1'
    or '--device_implementation=1' (later ones win, as in parseArgs' loop); None where argv names none."""
    value = None
    items = list(argv[1:])
    for index, item in enumerate(items):
        nxt = items[index + 1] if index + 1 < len(items) else None
        if item in (f"-{short}", f"--{long}"):
            value = nxt
        elif item.startswith(f"--{long}="):
            value = item.partition("=")[2]
        elif item.startswith(f"-{short}") and not item.startswith("--") and len(item) > 2:
            value = item[2:]
    return value


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None   # strtol(optarg, NULL, 0): 0x.. and 0.. too
    except ValueError:
        return None


def blocking_from_json(blocking_collectives, argv: list[str]):
    """params.blocking for a -J file: its config.blocking_collectives is one bool for every -z mode, so the mode comes
    from its args' -z where they name one (True for 1, else the int), 'unknown' where they do not; None when false."""
    if str(blocking_collectives).lower() != "true":
        return None
    mode = _int(option_value(argv, "z", "blocking"))
    if mode is None or mode < 1:
        return BLOCKING_UNKNOWN
    return True if mode == 1 else mode


def _version_tuple(nccl_version: str | None) -> tuple[int, ...] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", nccl_version or "")
    return tuple(int(g) for g in match.groups()) if match else None


def kernel_params(argv: list[str], nccl_version: str | None) -> tuple[dict, list[str]]:
    """params (and notes) for -R and -D from a run's command line: buffer_register 'local' / 'symmetric' (-R 1 / 2; a
    -R 2 with NCCL < 2.27 ran local registration), device_impl N for -D N > 0 with device_ctas (-V, default 16) when
    given. ({}, []) where argv names neither (a text log without its command line cannot say)."""
    params: dict = {}
    notes: list[str] = []
    register = _int(option_value(argv, "R", "local_register"))
    if register in REGISTER_NAMES:
        version = _version_tuple(nccl_version)
        if register == 2 and version is not None and version < SYMMETRIC_SINCE:
            register = 1
        params["buffer_register"] = REGISTER_NAMES[register]
    impl = _int(option_value(argv, "D", "device_implementation"))
    if impl is not None and impl > 0:
        params["device_impl"] = impl
        ctas = _int(option_value(argv, "V", "device_cta_count"))
        if ctas is not None and 0 < ctas <= 128:   # parseArgs: outside 1..128 it uses the default, 16
            params["device_ctas"] = ctas
        notes.append(DEVICE_KERNEL_NOTE.format(impl=impl))
    return params, notes
