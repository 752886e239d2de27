set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site
export GIT_COMMIT=$(cat build/commit)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
python3 experiments/access_pattern.py --out $OUT/ap 2>&1 | tee $OUT/ap.log
