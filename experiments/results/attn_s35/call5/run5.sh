# Session s35 call 5 (HEAD ef1d7bb): base; sp2 = + scores_warps2.patch (call 4's sp with the copies' addresses
# stepped, not recomputed). The attention words alone at 1k and 32k (M = 1, 8; one round), then the whole step
# (compare_trees) at 1k (3 rounds) and 32k (2 rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw
date
for ctx in 1024 32768; do for t in base sp2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --rows 1,8 --tag ${t}_${ctx} --words scores,pv 2>&1 | grep '"mean_us"\|Error\|error' | tail -6); done; done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ct1k --tree base=build/v/base --tree sp2=build/v/sp2 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ct32k --tree base=build/v/base --tree sp2=build/v/sp2 --reps 2 --rows 1,8 --context 32768 2>&1 | tail -4
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
