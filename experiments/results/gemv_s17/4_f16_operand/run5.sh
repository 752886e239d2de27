set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
(cd build/v/f16op && PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest -q -x tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_f16op.log | tail -3)
(cd build/v/f16op && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/tile_phases.py --out $OUT/tp_f16op > /dev/null 2>&1; echo tp rc=$?)
export PYTHONPATH=$root:/tmp/site
timeout 280 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree f16op=build/v/f16op --tree bal2=build/v/bal2 --reps 2 --rows 1,8 2>&1 | tail -7
cd $OUT && tar czf ct.tgz ct && rm -rf ct
