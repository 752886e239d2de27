# Call 1 (HEAD 318798a): L2 bulk prefetch of a primed GEMV tile's next weights past its ring, 64/128/256/512 KB a tile.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o; mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 560 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree pf64=build/v/pf64 --tree pf128=build/v/pf128 --tree pf256=build/v/pf256 --tree pf512=build/v/pf512 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -12
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
