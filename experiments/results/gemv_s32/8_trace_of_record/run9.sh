# Call 9 (160723b): graph_trace.py --megakernel (M = 1 and 8): the trace of record.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 200 python3 experiments/graph_trace.py --out $OUT/gt --rows 1,8 --megakernel 2>&1 | grep -E "^M =|megakernel traced"
date
