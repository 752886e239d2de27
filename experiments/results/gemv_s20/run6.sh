set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export GIT_COMMIT=$(cat build/commit)
(cd build/v/xpad && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 130 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_xpad.log | tail -2)
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree xpad=build/v/xpad --reps 2 --rows 1,8 2>&1 | tail -4
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
for t in base xpad; do (cd build/v/$t/experiments && PYTHONPATH=$root/build/v/$t:/tmp/site timeout 50 python3 bench_gemv.py --out $OUT/bench_$t --no-sweep --shapes in_proj,out_proj,gate_up,down,qkv > $OUT/bench_gemv_$t.log 2>&1; grep -E "M=8|fit" $OUT/bench_gemv_$t.log | grep -E "fit|in_proj|gate_up|qkv|k_sweep_5120"); done
