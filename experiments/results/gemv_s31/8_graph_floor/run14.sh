# Call 14 (HEAD): experiments/graph_floor.py --engine at 1k, M = 1 and M = 8 (calls 11-13 stopped at an
# illegal address: garbage tokens from a partly replaced step; every replay now sets its tokens).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 experiments/graph_floor.py --out $OUT/m1 --context 1024 --rows 1 --engine > /tmp/l1 2>&1; grep -v "^Error in sys\|^Original exc\|^$" /tmp/l1 | head -12
timeout 150 python3 experiments/graph_floor.py --out $OUT/m8 --context 1024 --rows 8 --engine > /tmp/l8 2>&1; grep -v "^Error in sys\|^Original exc\|^$" /tmp/l8 | head -12
date
