set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
(cd build/v/base && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/tile_phases.py --step --out $OUT/sp_base 2>&1 | tail -25; echo sp base rc=$?)
(cd build/v/l2 && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/tile_phases.py --step --out $OUT/sp_l2 2>&1 | tail -8; echo sp l2 rc=$?)
export PYTHONPATH=$root:/tmp/site
timeout 150 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree l2=build/v/l2 --tree norm=build/v/norm --reps 2 --rows 1,8 2>&1 | tail -8
for t in l2 norm; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 130 python3 -m pytest -q -x tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee $OUT/gpu_tests_$t.log | tail -3); done
cd $OUT && tar czf ct.tgz ct && rm -rf ct; tar czf sp.tgz sp_* && rm -rf sp_*; ls
