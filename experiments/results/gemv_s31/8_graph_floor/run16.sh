# Call 16 (HEAD, variants timed in turn over three rounds): experiments/graph_floor.py --engine --by-kind at 1k, M = 1 and M = 8: each kind of GEMV word
# alone by the graph build's own launches, the rest bare reads.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 experiments/graph_floor.py --out $OUT/m1 --context 1024 --rows 1 --engine --by-kind > /tmp/l1 2>&1; grep -v "^Error in sys\|^Original exc\|^$" /tmp/l1 | head -16
timeout 150 python3 experiments/graph_floor.py --out $OUT/m8 --context 1024 --rows 8 --engine --by-kind > /tmp/l8 2>&1; grep -v "^Error in sys\|^Original exc\|^$" /tmp/l8 | head -16
date
