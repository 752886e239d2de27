# Call 8. Two attention levers on 4fcb32c, alone and together (discrete build, words alone): a3p = ATTN_PV's
# probabilities two elements at a time (unroll 2); a3s = ATTN_SCORES's epilogue without a branch around each
# element (stored and counted under a predicate). time_words at 32k and 1k, M = 1 and 8; landed first and last.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o7 && mkdir -p /tmp/o7/tw
for tree in landed a3p a3s a3ps landedb; do
  dir=build/v/${tree%b}
  for ctx in 32768 1024; do
    (cd $dir && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o7/tw --context $ctx --tag ${tree}_$ctx --words scores,pv --layers 3,7,11 2>&1 | grep '"mean_us"')
  done
done
tar czf /tmp/o7/tw.tgz -C /tmp/o7 tw
cp /tmp/o7/tw.tgz $OUT/
