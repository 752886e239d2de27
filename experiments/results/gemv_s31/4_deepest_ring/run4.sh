# Call 4 (HEAD 143e371): gp (call 3) against gpd (gp + every GEMV word given the deepest ring: more primed
# before the wait). The whole step at 1k, three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree gp=build/v/gp --tree gpd=build/v/gpd --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
