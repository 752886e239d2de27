# Call 8 (160723b = base, the working tree; alone as in call 7): the whole step at 1k, five rounds (call 7's
# three were within their noise), then graph_trace on each tree in turn (M = 1).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 400 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree alone=build/v/alone --reps 5 --rows 1,8 --context 1024 2>&1 | tail -4
for t in base alone; do
  d=$root; [ $t = alone ] && d=$root/build/v/alone
  (cd $d && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 100 python3 experiments/graph_trace.py --out /tmp/o/gt_$t --rows 1 2>&1 | grep -E "^M =|ATTN_MERGE|GEMV_RES|EMBED|ARGMAX|HANDOFF")
done
(cd /tmp/o && tar czf $OUT/out.tgz ct gt_base gt_alone)
date
