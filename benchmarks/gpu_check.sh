#!/usr/bin/env bash
# Device check for the cupy-nccl backend on a machine with one GPU (NCCL world size 1).
#
# Runs, in one go (about 3-5 minutes on one GPU):
#   1. `commbench env` and the GPU tests of the CuPy backend (tests/test_cupy_gpu.py);
#   2. every registered workload with --compare-backends torch-nccl,cupy-nccl (both backends on the
#      same points, interleaved; the torch-nccl records carry the ratio to cupy-nccl); if that fails,
#      each backend alone, so one broken backend does not hide the other's numbers;
#   3. every workload again on cupy-nccl with --cuda-graph;
#   4. the NCCL tuning axes: a 2-combination bench (NCCL default + ring/simple, each in fresh processes;
#      at world size 1 the axes are exercised, not meaningful) and the tuner-plugin config from it
#      (nccl_tuner.conf, nccl_tuner.csv);
#   5. a summary table of every measured record (summary.md), read from the JSONL files.
# Writes everything under $OUT if set (the device runner collects it), else results/gpu_check.
# A failing step is recorded and the script goes on; the exit code is the number of failed steps.
#
# Usage: bash benchmarks/gpu_check.sh            (from the repository root)
#        SIZES="-b 8 -e 1G -f 2" bash benchmarks/gpu_check.sh   (a fuller sweep)
set -u

OUT_DIR="${OUT:-results/gpu_check}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/steps.txt"
: > "$LOG"
read -r -a SIZE_ARGS <<< "${SIZES:--b 8 -e 64M -f 8}"
LOOP_ARGS=(-n 20 -w 5 --timeout 120)
STEP_TIMEOUT_S="${STEP_TIMEOUT_S:-180}"
failures=0

step() {  # step NAME COMMAND...: run with a timeout, keep its output, log rc and seconds
  local name=$1; shift
  local start=$SECONDS
  timeout "$STEP_TIMEOUT_S" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  printf '%-40s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - start))" "$*" | tee -a "$LOG"
  if [ "$rc" -ne 0 ]; then
    failures=$((failures + 1))
    tail -n 5 "$OUT_DIR/$name.log" | sed 's/^/    | /' | tee -a "$LOG"
  fi
  return "$rc"
}

step env commbench env
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT_DIR/nvidia-smi.csv" 2>&1 || true
step gpu-tests python -m pytest -q -m gpu tests/test_cupy_gpu.py -p no:cacheprovider

# Workloads swept by size take -b/-e/-f; the others (takes_size False) sweep their own parameters.
read -r -a SIZED <<< "$(python -c 'from collectives import REGISTRY; print(*[n for n, c in REGISTRY.items() if c.takes_size])')"
read -r -a OWN <<< "$(python -c 'from collectives import REGISTRY; print(*[n for n, c in REGISTRY.items() if not c.takes_size])')"

for workload in "${SIZED[@]}" "${OWN[@]}"; do
  sweep=("${SIZE_ARGS[@]}")
  [[ " ${OWN[*]} " == *" $workload "* ]] && sweep=()
  common=(bench "$workload" --nproc 1 "${sweep[@]}" "${LOOP_ARGS[@]}")
  if ! step "compare-$workload" commbench "${common[@]}" --compare-backends torch-nccl,cupy-nccl \
        -J "$OUT_DIR/compare-$workload.jsonl"; then
    step "cupy-$workload" commbench "${common[@]}" --backend cupy-nccl -J "$OUT_DIR/cupy-$workload.jsonl"
    step "torch-$workload" commbench "${common[@]}" --backend nccl -J "$OUT_DIR/torch-$workload.jsonl"
  fi
  step "graph-$workload" commbench "${common[@]}" --backend cupy-nccl --cuda-graph \
    -J "$OUT_DIR/graph-$workload.jsonl"
done

step tuning-bench commbench bench all_reduce --nproc 1 --backend nccl -b 1K -e 1M -f 32 "${LOOP_ARGS[@]}" \
  --nccl-algo ring --nccl-proto simple -J "$OUT_DIR/tuning-all_reduce.jsonl"
step tuning-config commbench nccl-tuner "$OUT_DIR/tuning-all_reduce.jsonl" -o "$OUT_DIR/nccl_tuner.conf" \
  --csv "$OUT_DIR/nccl_tuner.csv"

python - "$OUT_DIR" <<'PY' > "$OUT_DIR/summary.md" 2>&1 || failures=$((failures + 1))
"""One row per measured record: what NCCL (cupy-nccl), torch-nccl and CUDA-graph replays took."""
import pathlib
import sys

from commbench.results.records import measurements, read_records

out = pathlib.Path(sys.argv[1])
print("| file | collective | backend | graph | nccl axes | status | size B | median us | busbw GB/s | wrong | ratio to baseline |")
print("|---|---|---|---|---|---|---:|---:|---:|---:|---:|")
for path in sorted(out.glob("*.jsonl")):
    for m in measurements(read_records([path])):
        ratio = m.metrics.get("time_ratio_to_baseline")
        median = f"{m.time_us_median:.2f}" if m.time_us_median is not None else m.status
        busbw = f"{m.busbw_gbps:.2f}" if m.busbw_gbps is not None else "-"
        axes = "/".join(str(m.params[k]) for k in ("nccl_algo", "nccl_proto", "nccl_channels") if k in m.params) or "-"
        print(f"| {path.stem} | {m.collective} | {m.backend} | {bool(m.params.get('cuda_graph'))} | {axes} | {m.status} "
              f"| {m.size_bytes} "
              f"| {median} | {busbw} | {m.num_wrong} | {'' if ratio is None else f'{ratio:.3f}'} |")
PY
echo "failed steps: $failures (details in $LOG; per-record numbers in $OUT_DIR/summary.md)" | tee -a "$LOG"
exit "$failures"
