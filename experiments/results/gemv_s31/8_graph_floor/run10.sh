# Call 10 (HEAD): experiments/graph_floor.py at 1k, M = 1 and M = 8: the step's bytes through one bare
# streaming launch a word, overlapped and serial, and through one launch.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 experiments/graph_floor.py --out $OUT/m1 --context 1024 --rows 1 2>&1 | tail -4
timeout 150 python3 experiments/graph_floor.py --out $OUT/m8 --context 1024 --rows 8 2>&1 | tail -4
timeout 100 python3 experiments/graph_floor.py --out $OUT/m1_b2 --context 1024 --rows 1 --blocks-per-sm 2 2>&1 | tail -4
date
