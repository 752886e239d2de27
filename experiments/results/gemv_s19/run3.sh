set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site
(cd build/v/clamp && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_clamp.log | tail -2)
timeout 200 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree clamp=build/v/clamp --tree nobranch=build/v/nobranch --tree own_loops=build/v/pair3 --reps 2 --rows 1,8 2>&1 | tail -6
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
(cd build/v/clamp && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out $OUT/sp_clamp 2>&1 | tail -2)
(cd build/v/pair3 && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out $OUT/sp_own_loops 2>&1 | tail -2)
(cd build/v/nobranch && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py 2>&1 | tee $OUT/gpu_tests_nobranch.log | tail -2)
(cd build/v/base && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out $OUT/sp_base 2>&1 | tail -2)
(cd $OUT && tar czf sp.tgz sp_* && rm -rf sp_clamp sp_own_loops sp_base)
ls $OUT
