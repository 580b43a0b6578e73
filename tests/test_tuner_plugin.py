"""commbench's NCCL tuner plugin, built with the system C compiler and driven through dlopen the way NCCL
calls it (src/enqueue.cc: a contiguous float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] cost table cast to
float**, nChannels starting at 0): every rule of a generated config applies at its bounds and midpoint,
everything else leaves nChannels 0 and the table unchanged, and an IGNORE'd pair is left to NCCL."""

from __future__ import annotations

import ctypes
import os

import pytest
from typer.testing import CliRunner

from commbench.cli.app import app
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

    def __init__(self, library: str, config: str, *, ranks: int, nodes: int):
        self.formats: list[str] = []
        self._logger = LOGGER(lambda level, flags, file, line, fmt: self.formats.append(fmt.decode()))
        self._lib = ctypes.CDLL(library)
        self.tuner = TunerV5.in_dll(self._lib, "ncclTunerPlugin_v5")
        os.environ["NCCL_TUNER_CONFIG_FILE"] = config
        self.context = ctypes.c_void_p()
        assert self.tuner.init(ctypes.byref(self.context), 1, ranks, nodes, self._logger, None, None) == 0

    def call(self, coll: str, nbytes: int, *, ignored: tuple[tuple[str, str], ...] = ()) -> tuple[int, list[list[float]]]:
        table = CostTable()
        for a in range(len(ALGORITHMS)):
            for p in range(len(PROTOCOLS)):
                table[a][p] = IGNORE if (ALGORITHMS[a], PROTOCOLS[p]) in ignored else 100.0 + 10 * a + p
        channels = ctypes.c_int(0)
        as_pointers = ctypes.cast(table, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)))
        result = self.tuner.getCollInfo(self.context, FUNCS[coll], nbytes, 1, as_pointers, len(ALGORITHMS),
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


def test_example_plugin_output_covers_every_size_with_explicit_channels(library, tmp_path, config_env):
    path, _ = _results_file(tmp_path)
    conf, configs = write_config(tmp_path, str(path), "--for", "example-plugin")
    assert all(c["channels"] >= 1 for c in configs)
    driver = check_every_rule(library, conf, configs, ranks=4, nodes=2)
    for nbytes in (0, 65536, 1 << 20, 1 << 40, 2**64 - 1):
        channels, table = driver.call("allreduce", nbytes)
        assert channels >= 1 and picked(table) is not None
    driver.close()


def test_build_plugin_command_and_its_one_line_error(tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / LIBRARY_NAME).exists() and "NCCL_TUNER_PLUGIN=" in result.output
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    missing = CliRunner().invoke(app, ["nccl-tuner", "--build-plugin", str(tmp_path / "out2")])
    assert missing.exit_code == 2 and "no C compiler found" in missing.output
    assert len(missing.output.strip().splitlines()) == 1


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
