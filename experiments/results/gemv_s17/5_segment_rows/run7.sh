set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
(cd build/v/segpar && PYTHONPATH=$PWD:/tmp/site timeout 130 python3 -m pytest -q -x tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_segpar.log | tail -2)
for t in base segpar; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 50 python3 experiments/tile_phases.py --out $OUT/tp_$t > /dev/null 2>&1; echo tp $t rc=$?); done
export PYTHONPATH=$root:/tmp/site
timeout 120 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree segpar=build/v/segpar --reps 2 --rows 1,8 2>&1 | tail -5
cd $OUT && tar czf ct.tgz ct && rm -rf ct
