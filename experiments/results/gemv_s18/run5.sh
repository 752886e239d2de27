set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
(cd build/v/lead && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --raw --out $OUT/sp_lead 2>&1 | tail -2)
(cd $OUT && tar czf sp.tgz sp_lead && rm -rf sp_lead)
export PYTHONPATH=$root:/tmp/site
timeout 120 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree lead=build/v/lead --reps 2 --rows 1,8 2>&1 | tail -5
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
