# Call 6. The JSON of record at 4fcb32c (the attention tiles landed): megakernel bench at 1k and 32k, three
# rounds, one process; then the attention words alone at 32k and 1k (time_words).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o6 && mkdir -p /tmp/o6/tw
cd build/v/landed
PYTHONPATH=$PWD:/tmp/site timeout 300 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o6/ab_bench.json --plot /tmp/o6/ab_per_token.png 2>&1 | tail -8
for ctx in 32768 1024; do
  PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o6/tw --context $ctx --tag landed_$ctx --words scores,pv,merge 2>&1 | grep '"mean_us"'
done
cp /tmp/o6/ab_bench.json /tmp/o6/ab_per_token.png /tmp/o6/tw/* $OUT/
