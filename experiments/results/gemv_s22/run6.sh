set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o
for t in scales lines2; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 40 python3 bench_gemv.py --out /tmp/o/${t} --no-sweep --shapes lm_head,mtp_fc 2>&1 | grep -E "lm_head|mtp_fc" | sed "s/^/$t /"); done
tar czf $OUT/run6.tgz -C /tmp/o .
(cd build/v/lines2 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee /tmp/o/gpu_tests_lines2.log | tail -2)
tar czf $OUT/run6.tgz -C /tmp/o .
PYTHONPATH=$root:/tmp/site timeout 70 python3 experiments/compare_trees.py --out /tmp/o/ct --tree scales=build/v/scales --tree lines2=build/v/lines2 --reps 2 --rows 1,8 2>&1 | tail -4
tar czf $OUT/run6.tgz -C /tmp/o .
(cd build/v/lines2 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_no_alloc_gpu.py tests/gpu/test_session_pool_gpu.py tests/gpu/test_synthetic_gpu.py 2>&1 | tee /tmp/o/gpu_tests_lines2_rest.log | tail -2)
tar czf $OUT/run6.tgz -C /tmp/o .
