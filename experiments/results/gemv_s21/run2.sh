set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export GIT_COMMIT=$(cat build/commit)
(cd build/v/prime && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_prime.log | tail -3)
for t in base prime; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/access_pattern.py --out $OUT/ap_$t --sweep 2>&1 | grep -E "fit|gemv_as" | tee $OUT/ap_$t.log); done
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree prime=build/v/prime --reps 2 --rows 1,8 2>&1 | tail -6
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
