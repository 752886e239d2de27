# Call 3. attn2 = attn1 + each attention tile's ring after its own fixed part (ATTN_SCORES key-only slots):
# five ring slots each where attn1 had four. time_words at 32k and 1k (attn1, attn2, attn1 again), then the
# whole step at 1k: compare_trees base / attn1 / attn2, two rounds, M = 1 and 8.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o3 && mkdir -p /tmp/o3/tw
for tree in attn1 attn2 attn1b; do
  dir=build/v/${tree%b}
  for ctx in 32768 1024; do
    (cd $dir && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o3/tw --context $ctx --tag ${tree}_$ctx --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"')
  done
done
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o3/ct --tree base=build/v/base --tree attn1=build/v/attn1 --tree attn2=build/v/attn2 --reps 2 --rows 1,8 2>&1 | tail -7
tar czf /tmp/o3/tw.tgz -C /tmp/o3 tw
cp /tmp/o3/tw.tgz /tmp/o3/ct/compare_trees.json $OUT/
