set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export PYTHONPATH=$root:/tmp/site
(cd build/v/pair && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_pair.log | tail -3)
timeout 150 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree pair=build/v/pair --reps 2 --rows 1,8 2>&1 | tail -8
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
(cd build/v/pair && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out $OUT/sp_pair 2>&1 | tail -2)
(cd build/v/base && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out $OUT/sp_base 2>&1 | tail -2)
(cd $OUT && tar czf sp.tgz sp_pair sp_base && rm -rf sp_pair sp_base)
ls $OUT
