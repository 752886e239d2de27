#!/usr/bin/env bash
# One GPU session on the H200: environment facts, GPU tests, and the chosen experiments, all output
# under OUT (default $OUT, else ./out). Steps run in the order given:
#   experiments/gpu_run.sh [OUT] tests goldens ...
# The device returns at most 8 files: run into another folder and pack it into $OUT afterwards, e.g.
#   timeout 540 bash experiments/gpu_run.sh /tmp/o tests bench-ab; tar czf $OUT/run.tgz -C /tmp/o .
# Pass GIT_COMMIT=<full hash> literally: the device's copy of .git may be stale, so `git rev-parse` there can lie.
# Overrides: TESTS (pytest paths for `tests`), GOLDENS (comma list of oracle_*.npz for `check-engine`).
# Missing Python packages travel as wheels in .whl/ (see README, "GPU runs").
set -uo pipefail
out=${OUT:-out}
if [ $# -gt 0 ] && [[ "$1" == */* || -d "$1" ]]; then out=$1; shift; fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || exit 1
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import sys, torch, transformers, cupy, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
  command -v compute-sanitizer >/dev/null && compute-sanitizer --version | tail -1
  echo "commit ${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null) (git rev-parse on the device: may be stale)}"
} 2>&1 | tee "$out/environment.txt"

status=0
for step in "$@"; do
  echo "=== $step ($(date -u +%H:%M:%S))"
  case "$step" in
    # MEGAKERNEL_REQUIRE_GPU=1: a GPU test that skips (a broken CuPy, a missing package) fails the step
    tests)   MEGAKERNEL_REQUIRE_GPU=1 python3 -m pytest -q -m gpu ${TESTS:-tests/gpu} 2>&1 | tee "$out/gpu_tests.log" ;;
    goldens) python3 experiments/record_goldens.py --out "$out" --models tiny,27b 2>&1 | tee "$out/goldens.log" ;;
    goldens-27b-pow2) python3 experiments/record_goldens.py --out "$out" --models 27b-pow2 2>&1 | tee "$out/goldens_27b_pow2.log" ;;
    goldens-pow2) python3 experiments/record_goldens.py --out "$out" --models tiny-pow2 2>&1 | tee "$out/goldens_pow2.log" ;;
    check-engine) python3 experiments/check_engine.py --out "$out" ${GOLDENS:+--goldens "$GOLDENS"} 2>&1 | tee "$out/check_engine.log" ;;
    bench-step) python3 experiments/bench_step.py --out "$out" 2>&1 | tee "$out/bench_step.log" ;;
    generate-27b) python3 -m megakernel generate --backend graph --model synthetic:qwen3.5-27b --chat \
        --prompt "Write a haiku about GPUs." --max-new-tokens 24 --context 512 2>&1 | tee "$out/generate_27b.log" ;;
    bench-ab) python3 -m megakernel bench --model synthetic:qwen3.5-27b --out "$out/ab_bench.json" \
        --plot "$out/ab_per_token.png" 2>&1 | tee "$out/ab_bench.log" ;;
    trace) python3 -m megakernel trace --model synthetic:qwen3.5-27b --steps 2 --out "$out/trace.json.gz" --records "$out/trace_records.npz" \
        --plot "$out/trace_timeline.png" 2>&1 | tee "$out/trace.log" ;;
    generate-27b-mk) python3 -m megakernel generate --backend megakernel --model synthetic:qwen3.5-27b --chat \
        --prompt "Write a haiku about GPUs." --max-new-tokens 24 --context 512 2>&1 | tee "$out/generate_27b_megakernel.log" ;;
    bench-spec) python3 -m megakernel bench --spec-k 3 --backends graph,megakernel --model synthetic:qwen3.5-27b \
        --contexts 1024 --tokens 64 --out "$out/spec_bench.json" --plot "$out/spec_bench.png" 2>&1 | tee "$out/spec_bench.log" ;;
    generate-27b-spec) python3 -m megakernel generate --backend megakernel --model synthetic:qwen3.5-27b --chat \
        --prompt "Write a haiku about GPUs." --max-new-tokens 24 --context 512 --spec-k 3 2>&1 | tee "$out/generate_27b_spec.log" ;;
    generate-27b-spec-working) python3 -m megakernel generate --backend megakernel --model synthetic:qwen3.5-27b --chat \
        --prompt "Write a haiku about GPUs." --max-new-tokens 24 --context 512 --spec-k 3 --draft-vocab working 2>&1 \
        | tee "$out/generate_27b_spec_working.log" ;;
    # compute-sanitizer memcheck, synccheck and initcheck over the tiny model's decode, 8-row prompt and 4-row
    # verify passes in both builds (experiments/sanitize.py); a tool's exit status is nonzero on any error it
    # reports. racecheck cannot finish this workload in one device call: it has the step below.
    sanitize)
      for tool in memcheck synccheck initcheck; do
        MEGAKERNEL_LINEINFO=1 timeout "${SANITIZE_TIMEOUT:-170}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
          --print-limit 50 python3 experiments/sanitize.py > "$out/sanitize_$tool.log" 2>&1
        rc=$?
        echo "$tool: exit $rc; $(grep -h 'ERROR SUMMARY' "$out/sanitize_$tool.log" | tail -1)" | tee -a "$out/sanitize_summary.txt"
        [ $rc -eq 0 ] || status=1
      done ;;
    # racecheck alone, over a workload just long enough for a one-row decode pass, a verify pass and the
    # next pass's re-fold in each build (--tokens 3); it is orders of magnitude slower than the others.
    # SANITIZE_MODES picks the builds (default both), so each can have a device call of its own.
    racecheck) MEGAKERNEL_LINEINFO=1 timeout "${SANITIZE_TIMEOUT:-540}" compute-sanitizer --tool racecheck \
        --error-exitcode 1 --print-limit 50 python3 experiments/sanitize.py --tokens 3 --modes "${SANITIZE_MODES:-eager,megakernel}" \
        2>&1 | tee "$out/sanitize_racecheck.log" ;;
    norm-order) python3 experiments/norm_order.py --out "$out" 2>&1 | tee "$out/norm_order.log" ;;
    stress) python3 experiments/stress.py --out "$out" 2>&1 | tee "$out/stress.log" ;;
    soak) python3 experiments/soak.py --out "$out" 2>&1 | tee "$out/soak.log" ;;
    bench-tiling) python3 experiments/bench_tiling.py --out "$out" 2>&1 | tee "$out/bench_tiling.log" ;;
    bench-gemv) python3 experiments/bench_gemv.py --out "$out" 2>&1 | tee "$out/bench_gemv.log" ;;
    # Hardware counters of one fp8 GEMV launch (in_proj shape, M = 1); clocks left alone (METHOD.md).
    profile-gemv) ncu --clock-control none -k regex:gemv_fp8_slices --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
        --section SchedulerStats --section LaunchStats \
        python3 experiments/bench_gemv.py --out /tmp/profile --shapes in_proj --iters 2 --no-sweep \
        2>&1 | tee "$out/profile_gemv.txt" ;;
    *) echo "unknown step $step"; status=2 ;;
  esac
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
echo "=== done ($(date -u +%H:%M:%S)) status $status"
exit $status
