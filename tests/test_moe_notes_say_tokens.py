"""bench's and sweep's closing note for a MoE curve whose time does not grow said "measure up to 16 MiB (sizes in the
sweep file)" / "(-e 16M)" (probe PE): moe_all_to_all takes no sizes (a sweep entry's tokens_per_rank, bench's
--tokens; its size is the busiest rank's routed bytes). The note says to raise the tokens per rank now."""

from __future__ import annotations

from commbench.costmodel.fit_readiness import undetermined_bandwidth_notes
from commbench.results.records import JsonlWriter, Measurement, RunHeader


def _flat_moe(path) -> None:
    with JsonlWriter(path) as writer:
        writer.write(RunHeader(run_id="m", started_at="t", argv=[], commbench_version="0", python_version="3",
                               torch_version="2", nccl_version=None, cuda_version=None, cupy_version=None,
                               backend="gloo", world_size=2, hostnames=["h", "h"], devices=["cpu", "cpu"],
                               nccl_env={}, launcher="local"))
        for tokens, size in ((8, 4096), (64, 32768), (512, 262144)):
            writer.write(Measurement(run_id="m", collective="moe_all_to_all", backend="gloo", size_bytes=size,
                                     count=size // 2, dtype="bfloat16", op=None, in_place=False, world_size=2,
                                     group_size=2, iters=20, warmup_iters=5, time_us_median=300.0,
                                     params={"tokens_per_rank": tokens}, metrics={"combine_bytes_max": size},
                                     stages_us_median={"count_exchange": 100.0, "dispatch": 100.0, "combine": 100.0}))


def test_a_moe_curve_is_told_to_raise_its_tokens_not_its_sizes(tmp_path):
    path = tmp_path / "moe.jsonl"
    _flat_moe(path)
    swept = undetermined_bandwidth_notes(str(path), larger="sizes in the sweep file",
                                         larger_moe="tokens_per_rank in the sweep file")
    assert swept and all("raise the tokens per rank (tokens_per_rank in the sweep file) until the busiest rank's "
                         "bytes reach 16 MiB" in line and "sizes in the sweep file" not in line for line in swept), swept
    benched = undetermined_bandwidth_notes(str(path), larger="-e 16M")   # bench's: --tokens
    assert benched and all("(--tokens)" in line and "-e 16M" not in line for line in benched), benched
