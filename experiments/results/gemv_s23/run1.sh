# Prepared for the next session (not run): D47's open steps in one device call, from the repository root at
# the landed code (build/commit holding its commit; trees by experiments/make_tree.py: build/v/before at
# 79ea222, build/v/after at the landed commit). First the two 27B per-word checks the call that measured
# D47 did not reach, then the JSON of record (gemv_bench.json, ab_bench.json), then where the step's gain
# beyond the head's comes from (tile_phases.py --step in both trees).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/o/bench /tmp/o/phases
MEGAKERNEL_REQUIRE_GPU=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee /tmp/o/gpu_tests_per_word_27b.log | tail -2
tar czf $OUT/first.tgz -C /tmp/o .
timeout 90 python3 experiments/bench_gemv.py --out /tmp/o/bench --no-sweep 2>&1 | tee /tmp/o/bench/bench_gemv.log | grep -E "M=|fit"
timeout 170 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/bench/ab_bench.json --plot /tmp/o/bench/ab_per_token.png 2>&1 | tee /tmp/o/bench/ab_bench.log | tail -3
tar czf $OUT/first.tgz -C /tmp/o .
for t in before after; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out /tmp/o/phases/sp_$t 2>&1 | tail -1); done
tar czf $OUT/first.tgz -C /tmp/o .
