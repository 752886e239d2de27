set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
for t in rec nc norm; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/tile_phases.py --step --out $OUT/sp_$t 2>&1 | tail -3; echo sp $t rc=$?); done
export PYTHONPATH=$root:/tmp/site
timeout 200 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree rec=build/v/rec --tree nc=build/v/nc --tree both=build/v/both --reps 2 --rows 1,8 2>&1 | tail -9
cd $OUT && tar czf ct.tgz ct && rm -rf ct; tar czf sp.tgz sp_* && rm -rf sp_*; ls
