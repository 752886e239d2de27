# Session s35 call 6 (HEAD ef1d7bb): the graph's step traced block by block at 32k (M = 1, 8) in base and sp2
# (call 5's trees): where sp2's 8-row step lost what its scores word gained alone.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
date
for t in base sp2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 experiments/graph_trace.py --out /tmp/o/gt_$t --rows 1,8 --context 32768 2>&1 | tail -3); done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
