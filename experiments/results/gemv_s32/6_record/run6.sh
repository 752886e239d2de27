# Call 6 (25abceb): graph_trace.py --megakernel (M = 1 and 8) and the JSON of record (megakernel bench at 1k
# and 32k, three rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 200 python3 experiments/graph_trace.py --out $OUT/gt --rows 1,8 --megakernel 2>&1 | grep -v "^[A-Z_]* *[0-9]" ; date
timeout 350 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png 2>&1 | tail -12; date
