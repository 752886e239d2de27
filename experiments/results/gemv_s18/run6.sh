set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export PYTHONPATH=$root:/tmp/site
timeout 90 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree qkv=build/v/qkv --reps 2 --rows 1,8 2>&1 | tail -5
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
(cd build/v/qkv && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 -m pytest -q -x tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_qkv.log | tail -3)
(cd build/v/qkv && PYTHONPATH=$PWD:/tmp/site timeout 40 python3 experiments/tile_phases.py --step --out $OUT/sp_qkv 2>&1 | tail -2; cd $OUT && tar czf sp.tgz sp_qkv && rm -rf sp_qkv)
ls $OUT
