"""Pure pieces of the measurement core: sizes, dtypes, bus-bandwidth factors, records, launch detection."""

import json

import pytest

from collectives import REGISTRY
from commbench.comm.launch import detect_rank_env, first_slurm_host
from commbench.dtypes import get_dtype
from commbench.errors import CommbenchError
from commbench.results.records import JsonlWriter, Measurement, RunHeader, headers, iter_records, measurements
from commbench.units import parse_rate_bits_per_s, parse_size_bytes, size_range, size_step


def test_sizes_parse_like_nccl_tests():
    assert parse_size_bytes("8") == 8
    assert parse_size_bytes("64K") == 65536
    assert parse_size_bytes("16M") == 16 * 2**20
    assert parse_size_bytes("2G") == 2 * 2**30
    assert parse_size_bytes("1.5MiB") == 1572864
    assert size_range(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_range(8, 16 * 2**20, 4)[-1] == 8 * 2**20
    assert size_range(100, 400, step_bytes=100) == [100, 200, 300, 400]
    # both: nccl-tests' loop multiplies when stepFactor > 1, else adds stepBytes
    assert size_range(8, 512, 8, step_bytes=8) == [8, 64, 512]
    assert size_range(8, 32, 1, step_bytes=8) == [8, 16, 24, 32]
    assert parse_rate_bits_per_s("1gbit") == 1e9
    assert parse_rate_bits_per_s("800mbit") == 8e8


@pytest.mark.parametrize("call,needle", [
    (lambda: parse_size_bytes("0"), "positive"), (lambda: parse_size_bytes("-5"), "size"),
    (lambda: parse_size_bytes("12Q"), "12Q"), (lambda: size_range(64, 8, 2), "--min-bytes"),
    (lambda: size_range(8, 64, 0.5), "--step-factor"), (lambda: get_dtype("float7"), "--dtype"),
    (lambda: parse_rate_bits_per_s("fast"), "fast"),
])
def test_bad_values_name_the_field(call, needle):
    with pytest.raises(CommbenchError, match=needle):
        call()


def test_dtype_aliases_follow_nccl_tests():
    assert get_dtype("float").name == "float32"
    assert get_dtype("half").name == "float16"
    assert get_dtype("bf16").itemsize == 2


def test_busbw_factors_match_nccl_tests():
    # nccl-tests docs/PERFORMANCE.md
    assert REGISTRY["all_reduce"].busbw_factor(8) == pytest.approx(2 * 7 / 8)
    assert REGISTRY["reduce_scatter"].busbw_factor(4) == pytest.approx(3 / 4)
    assert REGISTRY["all_gather"].busbw_factor(3) == pytest.approx(2 / 3)
    assert REGISTRY["all_to_all"].busbw_factor(2) == pytest.approx(1 / 2)
    assert REGISTRY["sendrecv"].busbw_factor(8) == 1.0
    assert REGISTRY["broadcast"].busbw_factor(8) == 1.0


def test_size_column_means_what_nccl_tests_means():
    # all_gather: size = full output, count = elements each rank sends; chunks trimmed to 16 B as nccl-tests
    assert REGISTRY["all_gather"].count_for(1000, 4, 3) == (80, 960)
    # reduce_scatter: size = full input, count = elements each rank receives
    assert REGISTRY["reduce_scatter"].count_for(4096, 4, 4) == (256, 4096)
    # all_to_all: count = elements per peer
    assert REGISTRY["all_to_all"].count_for(1024, 2, 3) == (168, 1008)
    # all_reduce / broadcast / sendrecv: the buffer; at least one element
    assert REGISTRY["all_reduce"].count_for(2, 4, 2) == (1, 4)
    assert REGISTRY["sendrecv"].count_for(4096, 8, 2) == (512, 4096)


def _measurement(**overrides):
    fields = dict(run_id="r1", collective="all_reduce", backend="gloo", size_bytes=1024, count=256,
                  dtype="float32", op="sum", in_place=True, world_size=2, group_size=2, iters=20,
                  warmup_iters=5, time_us_median=10.0, time_us_mean=11.0, time_us_min=9.0, time_us_p99=20.0,
                  algbw_gbps=0.1024, busbw_gbps=0.1024, num_wrong=0)
    fields.update(overrides)
    return Measurement(**fields)


def test_jsonl_round_trip_and_torn_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    header = RunHeader(run_id="r1", started_at="2026-01-01T00:00:00+00:00", argv=["commbench"], commbench_version="0",
                       python_version="3.11", torch_version="2.13.0", nccl_version=None, cuda_version=None,
                       cupy_version=None, backend="gloo", world_size=2, hostnames=["a", "a"], devices=["cpu", "cpu"],
                       nccl_env={"NCCL_DEBUG": "INFO"}, launcher="local")
    with JsonlWriter(path) as writer:
        writer.write(header)
        writer.write(_measurement())
        writer.write(_measurement(size_bytes=2048, count=512, algbw_gbps=0.2048, busbw_gbps=0.2048, metrics={"x": 1}))
    with path.open("a") as handle:
        handle.write('{"record_type": "measurement", "run_id"')  # a crash mid-write
    bad = []
    records = list(iter_records(path, on_bad_line=lambda n, why: bad.append(n)))
    assert headers(records) == [header]
    assert [m.size_bytes for m in measurements(records)] == [1024, 2048]
    assert measurements(records)[1].metrics == {"x": 1}
    assert bad == [4]
    assert all(json.loads(line)["record_type"] for line in path.read_text().splitlines()[:3])


def test_missing_results_file_is_a_user_error(tmp_path):
    with pytest.raises(CommbenchError, match="cannot be read"):
        list(iter_records(tmp_path / "nope.jsonl"))


def test_launcher_detection():
    assert detect_rank_env({}) is None
    torchrun = detect_rank_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "h0", "MASTER_PORT": "1234",
                                "TORCHELASTIC_RUN_ID": "j"})
    assert (torchrun.rank, torchrun.world_size, torchrun.local_rank, torchrun.launcher) == (3, 8, 1, "torchrun")
    assert (torchrun.master_addr, torchrun.master_port) == ("h0", 1234)
    slurm = detect_rank_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0",
                             "SLURM_JOB_NODELIST": "gpu[03-04,09]"})
    assert (slurm.rank, slurm.world_size, slurm.local_rank, slurm.launcher) == (5, 16, 1, "slurm")
    assert slurm.master_addr == "gpu03" and slurm.master_port == 29500
    mpi = detect_rank_env({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
                           "OMPI_COMM_WORLD_LOCAL_RANK": "2", "MASTER_ADDR": "n1"})
    assert (mpi.rank, mpi.world_size, mpi.local_rank, mpi.launcher, mpi.master_addr) == (2, 4, 2, "mpi", "n1")
    with pytest.raises(CommbenchError, match="MASTER_ADDR"):
        detect_rank_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"})
    with pytest.raises(CommbenchError, match="RANK"):
        detect_rank_env({"RANK": "x", "WORLD_SIZE": "2"})
    assert first_slurm_host("node7") == "node7"
    assert first_slurm_host("a[1-3],b2") == "a1"


def test_step_factor_1_alone_steps_by_nccl_tests_default_1_mib():
    """-f 1 alone was refused ('give -i SIZE, or -f 1 -i SIZE as nccl-tests'), yet it is nccl-tests' own default:
    stepBytes = 1 MiB and stepFactor = 1 (src/common.cu v2.19.6 :94-95), its loop adding stepBytes when stepFactor is
    not > 1 (:936). A pasted `-b 8 -e 64 -f 1` now runs nccl-tests' sizes (8 alone); a factor below 1 is refused."""
    assert size_range(8, 64, 1.0) == [8]
    assert size_range(1 << 20, 4 << 20, 1) == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    assert size_range(8, 32, 1, step_bytes=8) == [8, 16, 24, 32]   # -f 1 -i 8: the given step
    assert size_step(1, None) == (1 << 20, "bytes") and size_step(None, None) == (2.0, "factor")
    with pytest.raises(CommbenchError, match=r"--step-factor=0\.5 is invalid: .*> 1, or 1 .*1 MiB unless given") as info:
        size_range(8, 64, 0.5)
    assert "\n" not in str(info.value)
    with pytest.raises(CommbenchError, match=r"--step-factor=1 is invalid: without -i, steps of nccl-tests' default "
                                             r"1 MiB: 16,384 sizes"):
        size_range(8, 16 << 30, 1)