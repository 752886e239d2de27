set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
(cd build/v/both && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --raw --out $OUT/sp_both 2>&1 | tail -2)
(cd $OUT && tar czf sp.tgz sp_both && rm -rf sp_both)
export PYTHONPATH=$root:/tmp/site
timeout 200 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree norm=build/v/norm --tree span=build/v/span --tree both=build/v/both --reps 2 --rows 1,8 2>&1 | tail -9
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
(cd build/v/both && PYTHONPATH=$PWD:/tmp/site timeout 280 python3 -m pytest -q tests/gpu 2>&1 | tee $OUT/gpu_tests_both.log | tail -3)
ls $OUT
