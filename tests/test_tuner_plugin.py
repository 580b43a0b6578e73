"""commbench's NCCL tuner plugin, built with the system C compiler and driven through dlopen the way NCCL
calls it (src/enqueue.cc: a contiguous float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] cost table cast to
float**, nChannels starting at 0): every rule of a generated config applies at its bounds and midpoint,
everything else leaves nChannels 0 and the table unchanged, and an IGNORE'd pair is left to NCCL."""

from __future__ import annotations

import ctypes
import dataclasses
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.comm.nccl_tuning import TuningCombo
from commbench.tuner_plugin import LIBRARY_NAME, build_plugin, find_compiler
from tests.test_nccl_tuner import _results_file, reproduced_plugin_load

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler (cc/gcc/clang) on PATH")

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")  # NCCL_ALGO_* order
PROTOCOLS = ("ll", "ll128", "simple")  # NCCL_PROTO_* order
FUNCS = {"broadcast": 0, "reduce": 1, "allgather": 2, "reducescatter": 3, "allreduce": 4}  # ncclFunc_t
IGNORE = -1.0  # NCCL_ALGO_PROTO_IGNORE
CostTable = ctypes.c_float * len(PROTOCOLS) * len(ALGORITHMS)

LOGGER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
INIT_V5 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, ctypes.c_size_t,
                           ctypes.c_size_t, LOGGER, ctypes.c_void_p, ctypes.c_void_p)
GET_COLL_INFO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_int,
                                 ctypes.POINTER(ctypes.POINTER(ctypes.c_float)), ctypes.c_int, ctypes.c_int,
                                 ctypes.c_int, ctypes.POINTER(ctypes.c_int))
FINALIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class TunerV5(ctypes.Structure):  # ncclTuner_v5_t (src/include/plugin/tuner/tuner_v5.h)
    _fields_ = [("name", ctypes.c_char_p), ("init", INIT_V5), ("getCollInfo", GET_COLL_INFO), ("finalize", FINALIZE)]


class Driver:
    """One communicator's tuner, as NCCL holds it: init with nRanks/nNodes, then getCollInfo per call."""

    def __init__(self, library: str, config: str, *, ranks: int, nodes: int, logger_address: int | None = None):
        self.formats: list[str] = []
        self.logged: list[tuple[int, str]] = []  # (level, format): NCCL_LOG_WARN 2, NCCL_LOG_INFO 3

        def log(level, flags, file, line, fmt):
            self.formats.append(fmt.decode())
            self.logged.append((level, fmt.decode()))

        # NCCL passes its own ncclDebugLog; a C function's address stands in for it where given
        self._logger = LOGGER(log) if logger_address is None else LOGGER(logger_address)
        self._lib = ctypes.CDLL(library)
        self.tuner = TunerV5.in_dll(self._lib, "ncclTunerPlugin_v5")
        os.environ["NCCL_TUNER_CONFIG_FILE"] = config
        self.context = ctypes.c_void_p()
        assert self.tuner.init(ctypes.byref(self.context), 1, ranks, nodes, self._logger, None, None) == 0

    def call(self, coll: str, nbytes: int, *, ignored: tuple[tuple[str, str], ...] = (),
             costs: dict[tuple[str, str], float] | None = None, pipe_ops: int = 1) -> tuple[int, list[list[float]]]:
        table = CostTable()
        for a in range(len(ALGORITHMS)):
            for p in range(len(PROTOCOLS)):
                table[a][p] = IGNORE if (ALGORITHMS[a], PROTOCOLS[p]) in ignored else 100.0 + 10 * a + p
        for (algo, proto), cost in (costs or {}).items():
            table[ALGORITHMS.index(algo)][PROTOCOLS.index(proto)] = cost
        channels = ctypes.c_int(0)
        as_pointers = ctypes.cast(table, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)))
        result = self.tuner.getCollInfo(self.context, FUNCS[coll], nbytes, pipe_ops, as_pointers, len(ALGORITHMS),
                                        len(PROTOCOLS), 0, ctypes.byref(channels))
        assert result == 0
        return channels.value, [list(row) for row in table]

    def close(self) -> None:
        assert self.tuner.finalize(self.context) == 0


def untouched() -> list[list[float]]:
    return [[100.0 + 10 * a + p for p in range(len(PROTOCOLS))] for a in range(len(ALGORITHMS))]


def picked(table: list[list[float]]) -> tuple[str, str] | None:
    """What NCCL then picks: the cheapest non-ignored entry, if the tuner changed the table."""
    if table == untouched():
        return None
    cost, a, p = min((v, a, p) for a, row in enumerate(table) for p, v in enumerate(row) if v >= 0)
    return ALGORITHMS[a], PROTOCOLS[p]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return str(build_plugin(tmp_path_factory.mktemp("plugin")))


@pytest.fixture
def config_env(monkeypatch):
    """NCCL_TUNER_CONFIG_FILE as the Driver sets it, removed (or restored) after each test."""
    monkeypatch.setenv("NCCL_TUNER_CONFIG_FILE", "")


def write_config(tmp_path, *args) -> tuple[str, list[dict]]:
    conf = tmp_path / "tuner.conf"
    result = CliRunner().invoke(app, ["nccl-tuner", *args, "-O", str(conf)])
    assert result.exit_code == 0, result.output
    configs, problems = reproduced_plugin_load(conf.read_text())
    assert problems == [] and configs
    return str(conf), configs


def check_every_rule(library, conf, configs, *, ranks, nodes):
    driver = Driver(library, conf, ranks=ranks, nodes=nodes)
    for c in configs:
        for nbytes in (c["min"], (c["min"] + c["max"]) // 2, c["max"]):
            channels, table = driver.call(c["coll"], nbytes)
            assert picked(table) == (c["algo"], c["proto"]), (c, nbytes)
            assert channels == max(c["channels"], 0), (c, nbytes)  # 0 (or -1): NCCL's own count
    return driver


def test_every_measured_rule_applies_and_other_calls_are_left_to_nccl(library, tmp_path, config_env):
    path, sizes = _results_file(tmp_path)
    conf, configs = write_config(tmp_path, str(path))
    driver = check_every_rule(library, conf, configs, ranks=4, nodes=2)
    covered = [(c["min"], c["max"]) for c in configs]
    uncovered = [65536, 1 << 20, (16 << 20) + 1, 1 << 40]  # NCCL default kept there, and above the largest size
    assert not any(lo <= n <= hi for n in uncovered for lo, hi in covered)
    for nbytes in uncovered:
        assert driver.call("allreduce", nbytes) == (0, untouched())
    for coll in ("allgather", "reducescatter", "broadcast", "reduce"):  # other collectives
        assert driver.call(coll, 1024) == (0, untouched())
    driver.close()
    for ranks, nodes in ((4, 1), (8, 2)):  # other scales: no rule matches at any size
        other = Driver(library, conf, ranks=ranks, nodes=nodes)
        assert all(other.call("allreduce", n) == (0, untouched()) for n in (0, 1024, 16 << 20))
        other.close()


def test_rules_from_single_calls_leave_groups_of_more_than_one_pipe_op_to_nccl(library, tmp_path, config_env):
    """NCCL asks the tuner once per group of collectives with their summed bytes and numPipeOps = ceil(collectives /
    channels) (src/enqueue.cc ncclPrepareTasks, NVIDIA/nccl v2.30.7-1): the generated rules (numPipeOps 1, every
    point one call) leave numPipeOps 2 and 8 to NCCL, while a hand-written -1 still matches any."""
    path, _ = _results_file(tmp_path)
    conf, configs = write_config(tmp_path, str(path))
    assert {c["pipe_ops"] for c in configs} == {1}
    driver = check_every_rule(library, conf, configs, ranks=4, nodes=2)  # numPipeOps 1: each rule applies
    for c in configs:
        for pipe_ops in (2, 8):
            assert driver.call(c["coll"], c["min"], pipe_ops=pipe_ops) == (0, untouched()), (c, pipe_ops)
    driver.close()
    any_pipe = tmp_path / "any.conf"
    any_pipe.write_text("allreduce,0,1000,ring,ll,8,1,8,-1,-1\nallreduce,1001,2000,tree,ll,4,1,8,2,-1\n")
    driver = Driver(library, str(any_pipe), ranks=8, nodes=1)
    assert [driver.call("allreduce", 500, pipe_ops=n)[0] for n in (1, 2, 8)] == [8, 8, 8]
    assert [driver.call("allreduce", 1500, pipe_ops=n)[0] for n in (1, 2, 3)] == [0, 4, 0]
    driver.close()


def test_every_predicted_rule_applies_with_nccl_own_channel_count(library, tmp_path, config_env):
    conf, configs = write_config(tmp_path, "--system", "gb300-nvl72", "--gpus", "72")
    assert {c["channels"] for c in configs} == {0} and {c["nodes"] for c in configs} == {1}
    check_every_rule(library, conf, configs, ranks=72, nodes=1).close()
    conf16, configs16 = write_config(tmp_path, "--system", "h100-hgx", "--gpus", "16", "--channels", "16")
    check_every_rule(library, conf16, configs16, ranks=16, nodes=2).close()


def test_an_ignored_pair_is_left_to_nccl_and_logged_once(library, tmp_path, config_env):
    conf = tmp_path / "ignore.conf"
    conf.write_text("allreduce,0,1000,nvls,simple,16,1,8,-1,-1\nallreduce,0,1000,ring,ll,8,1,8,-1,-1\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1)
    assert driver.call("allreduce", 500, ignored=(("nvls", "simple"),)) == (0, _with_ignored(("nvls", "simple")))
    driver.call("allreduce", 600, ignored=(("nvls", "simple"),))
    assert sum("not applied" in f for f in driver.formats) == 1  # the second call is not logged again
    channels, table = driver.call("allreduce", 500)  # allowed again: the first rule applies, never the second
    assert (channels, picked(table)) == (16, ("nvls", "simple"))
    driver.call("allreduce", 700)
    assert sum("applied (first at" in f for f in driver.formats) == 1
    driver.close()


def _with_ignored(pair: tuple[str, str]) -> list[list[float]]:
    table = untouched()
    table[ALGORITHMS.index(pair[0])][PROTOCOLS.index(pair[1])] = IGNORE
    return table


def test_bad_lines_are_dropped_not_guessed_and_a_missing_file_means_no_rules(library, tmp_path, config_env):
    conf = tmp_path / "bad.conf"
    conf.write_text("# comment\n\nallreduce,0,100,ringx,ll,8,1,8\nallreduce,0,100,ring,ll,8,1,8,,\n"
                    "alltoall,0,100,ring,ll,8,1,8\nallreduce,200,100,ring,ll,8,1,8\n"
                    "  allreduce , 0 , 100 , tree , ll128 , -1 , 1 , 8  \r\n"
                    "allgather,0,-1,ring,simple,4,-1,-1,-1\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1)
    assert sum("dropped:" in f for f in driver.formats) == 4
    channels, table = driver.call("allreduce", 50)
    assert (channels, picked(table)) == (0, ("tree", "ll128"))  # -1 channels: NCCL's own count, never 1
    assert driver.call("allreduce", 101) == (0, untouched())
    channels, table = driver.call("allgather", 2**64 - 1)  # max_bytes -1: no upper bound, as the example reads it
    assert (channels, picked(table)) == (4, ("ring", "simple"))
    driver.close()
    missing = Driver(library, str(tmp_path / "nope.conf"), ranks=8, nodes=1)
    assert missing.call("allreduce", 50) == (0, untouched()) and any("cannot open" in f for f in missing.formats)
    missing.close()
    # a NUL byte cut the rule at it (strlen after getline): read as a broader 8-field rule, no word (found from
    # outside); a folder read as a file of 0 rules, with no WARN: both now say so
    nul = tmp_path / "nul.conf"
    nul.write_bytes(b"allreduce,0,100,ring,ll,8,1,8\0,2,1\nallreduce,0,100,tree,ll,8,1,8\n")
    cut = Driver(library, str(nul), ranks=8, nodes=1)
    assert any("holds a NUL byte" in f for f in cut.formats), cut.formats
    channels, table = cut.call("allreduce", 50, pipe_ops=5)
    assert picked(table) == ("tree", "ll")   # the next rule, not the cut one
    cut.close()
    folder = Driver(library, str(tmp_path), ranks=8, nodes=1)
    assert folder.call("allreduce", 50) == (0, untouched()) and any("cannot read" in f for f in folder.formats)
    folder.close()


def test_example_plugin_output_covers_every_size_with_explicit_channels(library, tmp_path, config_env):
    path, _ = _results_file(tmp_path)
    conf, configs = write_config(tmp_path, str(path), "--for", "example-plugin")
    assert all(c["channels"] >= 0 for c in configs)  # 0 where NCCL lowered the measured count: NCCL's own
    driver = check_every_rule(library, conf, configs, ranks=4, nodes=2)
    for nbytes in (0, 65536, 1 << 20, 1 << 40, 2**64 - 1):
        channels, table = driver.call("allreduce", nbytes)
        assert channels == (0 if nbytes < 16 * 512 * 32 else 8)  # ring/ll/16 lowered by NCCL; tree/simple/8
        assert picked(table) is not None
    driver.close()


def test_build_plugin_command_and_its_one_line_error(tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / LIBRARY_NAME).exists() and "NCCL_TUNER_PLUGIN=" in result.output
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    missing = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "out2")])
    # $CC is used alone when set: the error names it (it said "no C compiler found" with gcc on PATH)
    assert missing.exit_code == 2 and "is not a command on PATH: set CC to your C compiler" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    monkeypatch.setenv("CC", "")
    monkeypatch.setenv("PATH", str(tmp_path))   # no compiler anywhere
    none = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "out3")])
    assert none.exit_code == 2 and "no C compiler found (looked for cc, gcc, clang on PATH)" in none.output


INIT_V4 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, LOGGER, ctypes.POINTER(ctypes.c_void_p))


class TunerV6(ctypes.Structure):  # ncclTuner_v6_t: v5's fields, then getChunkSize (optional: NULL)
    _fields_ = [*TunerV5._fields_, ("getChunkSize", ctypes.c_void_p)]


class TunerV4(ctypes.Structure):  # ncclTuner_v4_t (tuner_v4.h): init(nRanks, nNodes, logFunction, context)
    _fields_ = [("name", ctypes.c_char_p), ("init", INIT_V4), ("getCollInfo", GET_COLL_INFO), ("destroy", FINALIZE)]


def test_the_v6_and_v4_symbols_serve_the_same_rules(library, tmp_path, config_env):
    conf = tmp_path / "one.conf"
    conf.write_text("allreduce,0,1000,tree,ll,8,1,8,-1,-1\n")
    os.environ["NCCL_TUNER_CONFIG_FILE"] = str(conf)
    lib = ctypes.CDLL(library)
    v6, v4 = TunerV6.in_dll(lib, "ncclTunerPlugin_v6"), TunerV4.in_dll(lib, "ncclTunerPlugin_v4")
    assert v6.name == v4.name == b"commbench" and v6.getChunkSize is None
    logger = LOGGER(lambda *args: None)
    for tuner, init in ((v6, lambda ctx: v6.init(ctypes.byref(ctx), 7, 8, 1, logger, None, None)),
                        (v4, lambda ctx: v4.init(8, 1, logger, ctypes.byref(ctx)))):
        context = ctypes.c_void_p()
        assert init(context) == 0
        table, channels = CostTable(*[(ctypes.c_float * 3)(*untouched()[a]) for a in range(7)]), ctypes.c_int(0)
        assert tuner.getCollInfo(context, FUNCS["allreduce"], 500, 1,
                                 ctypes.cast(table, ctypes.POINTER(ctypes.POINTER(ctypes.c_float))), 7, 3, 0,
                                 ctypes.byref(channels)) == 0
        assert channels.value == 8 and picked([list(row) for row in table]) == ("tree", "ll")
        assert (tuner.finalize if tuner is v6 else tuner.destroy)(context) == 0


def _table_with(costs: dict[tuple[str, str], float]) -> list[list[float]]:
    table = untouched()
    for (algo, proto), cost in costs.items():
        table[ALGORITHMS.index(algo)][PROTOCOLS.index(proto)] = cost
    return table


def test_any_negative_cost_is_a_pair_nccl_does_not_take_and_a_relegated_ring_is_left_to_nccl(library, tmp_path,
                                                                                              config_env):
    """NCCL takes only entries >= 0 (topoGetAlgoInfo); NCCL multiplies ring's entries by 1024 for fp8 beyond 8 ranks
    (updateCollCostTable, v2.24.3-1 to v2.30.7-1: "a partition between lossy and non-lossy algos"), so a ring/proto
    NCCL ignores there reads -1024, not -1.0, and one it allows stays positive: a ring rule (measured on another type
    of the same bytes; the plugin cannot see the type) forced the lossy path NCCL relegated (found from outside). A
    ring entry over 256x the cheapest other algorithm's is left to NCCL; one within it is applied."""
    conf = tmp_path / "fp8.conf"
    conf.write_text("allreduce,0,1000,ring,ll128,16,2,16,-1,-1\n")
    driver = Driver(library, str(conf), ranks=16, nodes=2)
    for cost in (-1024.0, -2.0, float("nan")):
        costs = {("ring", "ll"): 102400.0, ("ring", "ll128"): cost, ("ring", "simple"): 112640.0}
        channels, table = driver.call("allreduce", 500, costs=costs)
        assert channels == 0 and table[1][0] == 102400.0 and table[1][2] == 112640.0, cost
        assert table[1][1] == cost or (cost != cost and table[1][1] != table[1][1])  # untouched (NaN != NaN)
    relegated = {("ring", p): 1024.0 * (110 + i) for i, p in enumerate(PROTOCOLS)}
    assert driver.call("allreduce", 500, costs=relegated) == (0, _table_with(relegated))   # NCCL's choice: tree
    assert any("or has relegated it" in f for f in driver.formats)
    slow = {("ring", "ll128"): 111.0 * 200}   # a ring NCCL merely prices high (200x tree's): the rule applies
    channels, table = driver.call("allreduce", 500, costs=slow)
    assert (channels, picked(table)) == (16, ("ring", "ll128"))
    driver.close()


def test_no_call_and_no_init_ever_fails_nccl(library, tmp_path, config_env):
    """NCCL NCCLCHECKs getCollInfo (src/enqueue.cc) and init (src/init.cc): an error fails the collective or the
    communicator, whatever tuner.h says about falling back. A call without a context leaves NCCL alone."""
    lib = ctypes.CDLL(library)
    tuner = TunerV5.in_dll(lib, "ncclTunerPlugin_v5")
    table, channels = CostTable(*[(ctypes.c_float * 3)(*untouched()[a]) for a in range(7)]), ctypes.c_int(0)
    as_pointers = ctypes.cast(table, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)))
    assert tuner.getCollInfo(None, FUNCS["allreduce"], 500, 1, as_pointers, 7, 3, 0, ctypes.byref(channels)) == 0
    assert channels.value == 0 and [list(row) for row in table] == untouched()
    assert tuner.finalize(None) == 0
    os.environ["NCCL_TUNER_CONFIG_FILE"] = str(tmp_path)  # a folder: opens, reads nothing
    context = ctypes.c_void_p()
    assert tuner.init(ctypes.byref(context), 1, 8, 1, LOGGER(lambda *a: None), None, None) == 0
    assert tuner.finalize(context) == 0


def test_channel_counts_nccl_cannot_hold_and_collnet_counts_are_dropped(library, tmp_path, config_env):
    """nMaxChannels is an 8-bit field and MAXCHANNELS 64 (src/include/comm.h, device.h); a CollNet task's count
    is used unbounded by the channels NCCL set up (src/enqueue.cc scheduleCollTasksToPlan)."""
    conf = tmp_path / "channels.conf"
    conf.write_text("allreduce,0,100,ring,simple,128,1,8,-1,-1\nallreduce,0,100,ring,simple,65,1,8,-1,-1\n"
                    "allreduce,0,100,collnet_direct,simple,8,1,8,-1,-1\nallreduce,0,100,collnet_chain,simple,4,1,8,-1,-1\n"
                    "allreduce,0,100,collnet_direct,simple,0,1,8,-1,-1\nallreduce,101,200,ring,simple,64,1,8,-1,-1\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1)
    dropped = [f for f in driver.formats if "dropped:" in f]
    assert len(dropped) == 4, driver.formats
    channels, table = driver.call("allreduce", 50)
    assert (channels, picked(table)) == (0, ("collnet_direct", "simple"))  # line 5, NCCL's own count
    channels, table = driver.call("allreduce", 150)
    assert (channels, picked(table)) == (64, ("ring", "simple"))
    driver.close()


def test_file_problems_are_warned_once_per_process_and_each_communicator_says_one_line(library, tmp_path,
                                                                                         config_env):
    """Every communicator of every rank runs init: the file's own problems are WARNed by the first only, and
    each communicator logs one INFO line on what it uses."""
    missing = str(tmp_path / "missing.conf")
    comms = [Driver(library, missing, ranks=8, nodes=1) for _ in range(3)]
    warns = [f for d in comms for level, f in d.logged if level == 2]
    assert len(warns) == 1 and "cannot open" in warns[0]
    assert all(sum(level == 3 for level, _ in d.logged) == 1 for d in comms)
    assert all(d.call("allreduce", 50) == (0, untouched()) for d in comms)
    bad = tmp_path / "bad-once.conf"
    bad.write_text("allreduce,0,100,ringx,ll,8,1,8\nallreduce,0,100,ring,ll,8,1,8,-1,-1\n")
    comms = [Driver(library, str(bad), ranks=8, nodes=1) for _ in range(3)]
    assert sum("dropped:" in f for d in comms for f in d.formats) == 1
    assert all(d.call("allreduce", 50)[0] == 8 for d in comms)
    for d in comms:
        d.close()


FAKE_NCCL = r"""
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
char fakeLogText[1 << 16];
int ncclGetVersion(int* version) { *version = FAKE_VERSION; return 0; }
void fakeLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  size_t used = strlen(fakeLogText);
  used += snprintf(fakeLogText + used, sizeof(fakeLogText) - used, "%d|", level);
  va_list args;
  va_start(args, fmt);
  vsnprintf(fakeLogText + used, sizeof(fakeLogText) - used, fmt, args);
  va_end(args);
  strncat(fakeLogText, "\n", sizeof(fakeLogText) - strlen(fakeLogText) - 1);
}
"""


def _compile(tmp_path, name: str, source: str, *flags: str) -> str:
    import subprocess

    c_file, library = tmp_path / f"{name}.c", tmp_path / name
    c_file.write_text(source)
    subprocess.run([*find_compiler(), "-shared", "-fPIC", *flags, "-o", str(library), str(c_file)], check=True)
    return str(library)


@pytest.mark.parametrize("version, applied", [(22703, True), (22809, False), (21905, False)])
def test_a_file_for_another_nccl_version_is_not_used(library, tmp_path, config_env, version, applied):
    """The NCCL version comes from ncclGetVersion of the library that holds the logger NCCL passed to init."""
    fake = ctypes.CDLL(_compile(tmp_path, f"libfakenccl{version}.so", FAKE_NCCL, f"-DFAKE_VERSION={version}"))
    conf = tmp_path / f"v{version}.conf"
    conf.write_text("# requires: nccl 2.27.3\nallreduce,0,1000,tree,ll,8,1,8,1,-1\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1,
                    logger_address=ctypes.cast(fake.fakeLog, ctypes.c_void_p).value)
    log = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(fake, "fakeLogText"))).decode()
    channels, table = driver.call("allreduce", 500)
    if applied:
        assert (channels, picked(table)) == (8, ("tree", "ll")) and "loaded 1 rule(s)" in log
    else:
        assert (channels, table) == (0, untouched())
        assert log.count("2|") == 1 and "is for NCCL 2.27.3, this is NCCL" in log, log
    driver.close()


def test_a_file_whose_nccl_version_cannot_be_told_is_used_and_says_so(library, tmp_path, config_env):
    conf = tmp_path / "unchecked.conf"
    conf.write_text("# requires: nccl 2.27.3\nallreduce,0,1000,tree,ll,8,1,8,1,-1\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1)  # a Python logger: no ncclGetVersion beside it
    assert any("unchecked" in f for f in driver.formats)
    assert driver.call("allreduce", 500)[0] == 8
    driver.close()


FAKE_CUDA = r"""
#include <stdio.h>
int cuCtxGetDevice(int* device) { *device = 0; return 0; }
int cuDeviceGetName(char* name, int size, int device) { snprintf(name, size, "%s", FAKE_GPU); return 0; }
"""


@pytest.mark.parametrize("gpu, applied", [("NVIDIA H100 80GB HBM3", True), ("NVIDIA A100-SXM4-80GB", False)])
def test_a_file_for_another_gpu_is_not_used(library, tmp_path, gpu, applied):
    """The GPU of NCCL's current CUDA context (cuDeviceGetName); a stand-in libcuda.so.1, in a child process."""
    import subprocess
    import sys

    cuda = _compile(tmp_path, "libcuda.so.1", FAKE_CUDA, f'-DFAKE_GPU="{gpu}"', "-Wl,-soname,libcuda.so.1")
    conf = tmp_path / "gpu.conf"
    conf.write_text("# requires: gpu NVIDIA H100 80GB HBM3\nallreduce,0,1000,tree,ll,8,1,8,1,-1\n")
    script = (f"import ctypes; ctypes.CDLL({cuda!r}, mode=ctypes.RTLD_GLOBAL)\n"
              "from tests.test_tuner_plugin import Driver\n"
              f"d = Driver({library!r}, {str(conf)!r}, ranks=8, nodes=1)\n"
              "print(d.call('allreduce', 500)[0]); print([f for level, f in d.logged if level == 2])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    channels, warns = done.stdout.splitlines()
    assert (channels == "8") == applied
    assert ("this GPU is" in warns) != applied, warns


def test_a_generated_file_names_its_nccl_and_gpu_and_is_not_used_under_another_nccl(library, tmp_path, config_env):
    from commbench.results.records import JsonlWriter, read_records
    from tests.test_nccl_tuner import _header

    path, _ = _results_file(tmp_path)
    gpu_path = tmp_path / "gpu.jsonl"
    with JsonlWriter(gpu_path) as writer:  # the same records, the headers naming their GPUs
        for record in read_records([path]):
            if record.__class__.__name__ == "RunHeader":   # NCCL 2.27.3: commbench's plugin loads there (v4)
                record = dataclasses.replace(_header(record.run_id, record.hostnames,
                                                     devices=["NVIDIA H100 80GB HBM3"] * 4), nccl_version="2.27.3")
            writer.write(record)
    conf, configs = write_config(tmp_path, str(gpu_path))
    text = open(conf).read()
    assert "# requires: nccl 2.27.3\n" in text and "# requires: gpu NVIDIA H100 80GB HBM3\n" in text
    fake = ctypes.CDLL(_compile(tmp_path, "libfakenccl2289.so", FAKE_NCCL, "-DFAKE_VERSION=22809"))
    driver = Driver(library, conf, ranks=4, nodes=2, logger_address=ctypes.cast(fake.fakeLog, ctypes.c_void_p).value)
    assert all(driver.call(c["coll"], c["min"]) == (0, untouched()) for c in configs)
    driver.close()


@pytest.mark.parametrize("first, second", [("nccl 2.27.3", "nccl 2.28.3"),
                                           ("gpu NVIDIA H100 80GB HBM3", "gpu NVIDIA H200")])
def test_a_file_with_conflicting_requirements_is_not_used(library, tmp_path, config_env, first, second):
    """Two configs joined (one measured on H100, one on H200; or under two NCCL versions): the last `# requires:`
    line used to govern the whole file, so the H100 rule applied on the H200. No rule, one WARN naming both; the
    same requirement twice is no conflict."""
    rule = "allreduce,0,1000,tree,ll,8,1,8,1,-1\n"
    conf = tmp_path / "joined.conf"
    conf.write_text(f"# requires: {first}\n{rule}# requires: {second}\nallreduce,0,1000,ring,ll,16,1,8,1,-1\n")
    fake = ctypes.CDLL(_compile(tmp_path, "libfakenccl-joined.so", FAKE_NCCL, "-DFAKE_VERSION=22703"))
    driver = Driver(library, str(conf), ranks=8, nodes=1,
                    logger_address=ctypes.cast(fake.fakeLog, ctypes.c_void_p).value)  # formats the lines
    assert driver.call("allreduce", 500) == (0, untouched())
    log = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(fake, "fakeLogText"))).decode()
    assert log.count("2|") == 1 and f"requires both {first} and {second}: no rules" in log, log
    driver.close()
    same = tmp_path / "same.conf"
    same.write_text(f"# requires: {first}\n{rule}# requires: {first}\n")
    driver = Driver(library, str(same), ranks=8, nodes=1)
    assert driver.call("allreduce", 500)[0] == 8 and not [f for level, f in driver.logged if level == 2]
    driver.close()


@pytest.mark.parametrize("runtime, applied", [("0", True), (None, False), ("1", False)])
def test_a_file_measured_under_an_nccl_setting_is_used_only_under_it(library, tmp_path, config_env, monkeypatch,
                                                                      runtime, applied):
    """Every run had NCCL_NVLS_ENABLE=0: the default they measured had NVLS off, and in a job without the setting
    NCCL's NVLS is faster than the ring rule. The generated file says `# requires: env NCCL_NVLS_ENABLE=0` and the
    plugin (getenv) uses no rule where the process has it unset or another value (one WARN)."""
    import dataclasses

    from tests.test_nccl_tuner import DEFAULT, RING_LL, _header, _write_runs

    runs = [(dataclasses.replace(_header(run_id, ["h"] * 4), nccl_env={"NCCL_NVLS_ENABLE": "0", **combo.env()}),
             combo, time_us) for run_id, combo, time_us in (("d", DEFAULT, 40.0), ("r", RING_LL, 10.0))]
    conf, configs = write_config(tmp_path, _write_runs(tmp_path, "nvls-off.jsonl", runs))
    text = open(conf).read()
    assert "# requires: env NCCL_NVLS_ENABLE=0\n" in text and "NCCL_ALGO" not in text
    assert "# measured with dtype float32 and op sum:" in text
    if runtime is None:
        monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    else:
        monkeypatch.setenv("NCCL_NVLS_ENABLE", runtime)
    driver = Driver(library, conf, ranks=4, nodes=1)
    channels, table = driver.call(configs[-1]["coll"], configs[-1]["max"])
    warns = [f for level, f in driver.logged if level == 2]
    if applied:
        assert picked(table) == ("ring", "ll") and warns == []
    else:
        assert (channels, table) == (0, untouched())
        assert len(warns) == 1 and "was measured with" in warns[0], driver.logged
    driver.close()


def test_conflicting_or_unreadable_env_requirements_refuse_the_file(library, tmp_path, config_env, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    for name, lines in (("two", "# requires: env NCCL_NVLS_ENABLE=0\n# requires: env NCCL_NVLS_ENABLE=1\n"),
                        ("bad", "# requires: env NCCL_NVLS_ENABLE\n")):
        conf = tmp_path / f"{name}.conf"
        conf.write_text(lines + "allreduce,0,1000,tree,ll,8,1,8,1,-1\n")
        driver = Driver(library, str(conf), ranks=8, nodes=1)
        assert driver.call("allreduce", 500) == (0, untouched())
        assert [f for level, f in driver.logged if level == 2 and "requires %s: no rules" in f], driver.logged
        driver.close()


def test_the_load_line_counts_the_rules_for_this_communicator_and_names_the_unchecked_requirement(library, tmp_path,
                                                                                                  config_env):
    """Probe P2: with NCCL 2.27.3 matched and only the GPU unknown the line said "its NCCL 2.27.3 / GPU ... unchecked:
    not found here" (which one?), and a 2-node 16-rank communicator read "loaded 2 rule(s) ... for nNodes=2
    nRanks=16" of rules both for 1 node / 8 ranks. Now it counts the rules for the communicator and names what was
    checked."""
    conf = tmp_path / "one-node.conf"
    conf.write_text("# requires: nccl 2.27.3\n# requires: gpu NVIDIA H100 80GB HBM3\n"
                    "allreduce,0,1000,tree,ll,8,1,8,1,-1\nallreduce,1001,4000,ring,ll,8,1,8,1,-1\n")
    fake = ctypes.CDLL(_compile(tmp_path, "libfakenccl-count.so", FAKE_NCCL, "-DFAKE_VERSION=22703"))
    logger = ctypes.cast(fake.fakeLog, ctypes.c_void_p).value
    for ranks, nodes in ((16, 2), (8, 1)):
        driver = Driver(library, str(conf), ranks=ranks, nodes=nodes, logger_address=logger)
        driver.close()
    lines = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(fake, "fakeLogText"))).decode().splitlines()
    loaded = [line for line in lines if "loaded" in line]
    assert len(loaded) == 2, lines   # no CUDA context in this process: the GPU cannot be told
    assert "loaded 2 rule(s)" in loaded[0] and "0 of them for this communicator (nNodes=2 nRanks=16): NCCL decides" \
        in loaded[0], loaded[0]
    assert "2 of them for this communicator (nNodes=1 nRanks=8); a requirement unchecked" in loaded[1], loaded[1]
    assert ("its NCCL 2.27.3 matches, its GPU NVIDIA H100 80GB HBM3 is unchecked (no CUDA context found here)"
            in loaded[1]), loaded[1]


def test_a_predicted_file_requires_the_nccl_and_gpu_it_was_predicted_for(library, tmp_path, config_env):
    """Probe P2: `nccl-tuner --system h100-hgx --gpus 8` wrote no `# requires:` line, so the plugin applied rules
    priced from NCCL 2.27.7's tables for an H100 under any NCCL and on any GPU, and its header said "sizes between
    measured points". Now it requires both and speaks of predicted points."""
    conf, configs = write_config(tmp_path, "--system", "h100-hgx", "--gpus", "8")
    text = open(conf).read()
    assert "# requires: nccl 2.27.7\n" in text and "# requires: gpu NVIDIA H100 80GB HBM3\n" in text, text[:800]
    assert "measured points" not in text and "sizes between predicted points go to the nearer one" in text
    for version, applied in ((22809, False), (22707, True)):
        fake = ctypes.CDLL(_compile(tmp_path, f"libfakenccl-pred{version}.so", FAKE_NCCL, f"-DFAKE_VERSION={version}"))
        driver = Driver(library, conf, ranks=8, nodes=1,
                        logger_address=ctypes.cast(fake.fakeLog, ctypes.c_void_p).value)
        c = configs[0]
        assert (picked(driver.call(c["coll"], c["min"])[1]) == (c["algo"], c["proto"])) == applied, (version, c)
        driver.close()


@pytest.mark.parametrize("rule, reason", [
    ("allreduce,1K,16K,ring,ll,0,1,8,1,0", "bad min_bytes"),   # probe P2: said "bad max_bytes", max checked first
    ("allreduce,0,16K,ring,ll,0,1,8,1,0", "bad max_bytes"),
    ("allreduce,0,100,ring,ll,0,x,8,1,0", "bad nNodes"),       # was "bad integer field": which of five
    ("allreduce,0,100,ring,ll,0,1,8,1,z", "bad regBuff")])
def test_a_dropped_line_names_its_first_bad_field(library, tmp_path, config_env, rule, reason):
    fake = ctypes.CDLL(_compile(tmp_path, "libfakenccl.so", FAKE_NCCL, "-DFAKE_VERSION=22703"))
    conf = tmp_path / f"bad-{reason.replace(' ', '-')}.conf"   # a path of its own: each file is reported once
    conf.write_text(rule + "\n")
    driver = Driver(library, str(conf), ranks=8, nodes=1,
                    logger_address=ctypes.cast(fake.fakeLog, ctypes.c_void_p).value)
    log = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(fake, "fakeLogText"))).decode()
    assert f"line 1 dropped: {reason}\n" in log, log
    driver.close()


def _applies_as_written(library, conf: str, rules, *, ranks: int, nodes: int) -> None:
    """The plugin warns of nothing (drops none of the file's lines), and each rule decides its bounds with its own channel count."""
    driver = Driver(library, conf, ranks=ranks, nodes=nodes)
    assert not [f for level, f in driver.logged if level == 2], (Path(conf).read_text(), driver.formats)  # no WARN
    for rule in rules:
        for nbytes in (rule.min_bytes, rule.max_bytes):
            channels, table = driver.call("allreduce", nbytes)
            assert (picked(table), channels) == ((rule.algo, rule.proto), rule.channels), (rule, nbytes)
    driver.close()


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_rule_the_writer_can_emit_is_read_by_the_plugins_own_parser(library, tmp_path, config_env, algo):
    """Whatever channel count an algorithm was measured with (1, 4, 64: NCCL's MAXCHANNELS), at sizes below, across
    and above where NCCL lowers it, on one node and three, with an NCCL before and after 2.28: every line the writer
    makes of it (results.nccl_channels, then the file) is one commbench's plugin keeps -- a CollNet rule with a count
    was written and then dropped by the plugin (NCCL would schedule that count uncapped, src/enqueue.cc)."""
    from commbench.results.nccl_channels import leave_lowered_channels_to_nccl
    from commbench.results.nccl_tuner import Rule
    from commbench.results.nccl_tuner_file import plugin_config_text

    ranges = ((0, 1023), (1024, 64 << 20), (1 << 30, 8 << 30))
    for proto in PROTOCOLS:
        for channels in (1, 4, 64):
            for nodes in (1, 3):
                for version in ("2.27.3", "2.28.9"):
                    measured = [Rule(collective="allreduce", min_bytes=lo, max_bytes=hi, algo=algo, proto=proto,
                                     channels=channels, nodes=nodes, ranks=8 * nodes, pipe_ops=1, reg_buff=0,
                                     sizes_bytes=(lo, hi), speedups=(2.0, 2.0), run_ids=("a",)) for lo, hi in ranges]
                    rules = leave_lowered_channels_to_nccl(measured, {"a": {}}, {"a": version})
                    conf = tmp_path / f"{proto}-{channels}-{nodes}-{version}.conf"
                    conf.write_text(plugin_config_text(rules, [], intro=[], statistic="median"))
                    _applies_as_written(library, str(conf), rules, ranks=8 * nodes, nodes=nodes)


def test_measured_collnet_rules_say_nccls_own_count_and_apply(library, tmp_path, config_env):
    """3 hosts x 2 ranks, all-reduce: CollNet direct (small sizes) and chain (large) measured on 4 channels and 2x
    faster than NCCL's default: the rules say channels 0 (found from outside: `collnet_direct,simple,4` was written and
    commbench's plugin dropped it, with a WARN on every rank)."""
    from commbench.results.records import JsonlWriter
    from tests.test_nccl_tuner import DEFAULT, _header, _record

    hosts = ["h0", "h0", "h1", "h1", "h2", "h2"]
    direct = TuningCombo(algo="collnet_direct", proto="simple", channels=4)
    chain = TuningCombo(algo="collnet_chain", proto="simple", channels=4)
    path = tmp_path / "collnet.jsonl"
    with JsonlWriter(path) as writer:
        for index, combo in enumerate((DEFAULT, direct, chain)):
            writer.write(_header(f"run{index}", hosts))
            for size in (1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20):
                fast = combo == (direct if size <= 4 << 20 else chain)
                writer.write(_record(f"run{index}", size, combo, (50.0 if fast else 100.0) * size / (1 << 20), world=6))
    conf, configs = write_config(tmp_path, str(path))
    assert {(c["algo"], c["channels"]) for c in configs} == {("collnet_direct", 0), ("collnet_chain", 0)}
    assert "NCCL_MIN/MAX_NCHANNELS=4" in Path(conf).read_text()
    driver = check_every_rule(library, conf, configs, ranks=6, nodes=3)
    assert not [f for level, f in driver.logged if level == 2], driver.formats  # no WARN (NCCL_LOG_WARN 2)
    driver.close()
