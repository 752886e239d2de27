# Call 11 (HEAD = base, the working tree): a primed fp8 GEMV tile asks L2 for the next 64 / 128 KB of its
# first pass past its ring once its inputs are ready (after its wait, before its input rows: a64, a128).
# The whole step at 1k, three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 230 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree a64=build/v/a64 --tree a128=build/v/a128 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -6
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
