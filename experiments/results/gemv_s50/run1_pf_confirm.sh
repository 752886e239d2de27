#!/bin/bash
# Issue 18 (s50), call 1: confirm pf (the megakernel's warp 0 does not prime a GEMV tile's ring) against its base b
# with four rounds, run pf's megakernel GPU tests (the 27B's 256 greedy passes megakernel == graph among them), then
# op's own target: bench_gemv's down and out_proj in b and op, once each (M = 8 / M = 1). Trees from
# gemv_s48/carry_trees.sh's pack (carry [".whl", "build/commit", "build/bt", "build/ov"]).
mkdir -p build/v && for t in b pf op; do cp -r build/bt build/v/$t; [ -f build/ov/$t.tgz ] && tar xzf build/ov/$t.tgz -C build/v/$t; done
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree b=build/v/b --tree pf=build/v/pf --reps 4 --rows 1,8 2>&1 | tail -6
rm -f $OUT/ct/time_step_*.json
(cd build/v/pf && MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=9e8925e PYTHONPATH=$PWD:/tmp/site timeout 170 \
  python3 -m pytest -q -p no:cacheprovider --durations=3 tests/gpu/test_megakernel_gpu.py > $OUT/pf_tests.log 2>&1)
echo "-- pf tests"; tail -6 $OUT/pf_tests.log
for t in b op; do
  (cd build/v/$t && GIT_COMMIT=9e8925e PYTHONPATH=$PWD:/tmp/site \
    timeout 50 python3 experiments/bench_gemv.py --out $OUT/bench_$t --no-sweep --iters 40 --shapes down,out_proj 2>&1 \
    | grep -E "M=|read bandwidth")
  echo "-- $t"
done
