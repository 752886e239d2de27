# Call 6 (5466ca7, the landed GDN tile): the JSON of record, megakernel bench at 1k and 32k, three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
cd build/v/cur
date
PYTHONPATH=$PWD:/tmp/site timeout 240 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png 2>&1 | tail -12
date
