set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o/ab /tmp/o/bench
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ab/ct --tree base=build/v/base --tree scales=build/v/scales --reps 3 --rows 1,8 2>&1 | tail -4
tar czf $OUT/run2.tgz -C /tmp/o .
(cd build/v/scales && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py tests/gpu/test_no_alloc_gpu.py tests/gpu/test_session_pool_gpu.py tests/gpu/test_synthetic_gpu.py 2>&1 | tee /tmp/o/ab/gpu_tests_rest.log | tail -2)
tar czf $OUT/run2.tgz -C /tmp/o .
PYTHONPATH=$root:/tmp/site timeout 170 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/bench/ab_bench.json --plot /tmp/o/bench/ab_per_token.png 2>&1 | tee /tmp/o/bench/ab_bench.log | tail -4
tar czf $OUT/run2.tgz -C /tmp/o .
PYTHONPATH=$root:/tmp/site timeout 90 python3 experiments/bench_gemv.py --out /tmp/o/bench --no-sweep 2>&1 | tee /tmp/o/bench/bench_gemv.log | grep -E "M=|fit" | head -30
tar czf $OUT/run2.tgz -C /tmp/o .
