# Call 2 (HEAD 318798a + working tree: the graph trace): graph_trace.py --megakernel at 1k, M = 1 and 8.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o; mkdir -p /tmp/o
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 500 python3 experiments/graph_trace.py --out /tmp/o/gt --rows 1,8 --megakernel 2>&1 | tail -40
(cd /tmp/o && tar czf $OUT/gt.tgz gt)
date
