# Call 2. Attention tiles rewritten (attn1): ATTN_SCORES on all 16 warps (two half-dim chains an n-tile,
# exchanged), ATTN_PV's scores staged with the values and its probabilities one chunk ahead. time_words of
# the attention words at 32k and 1k, M = 1 and 8, base then attn1 then base again; then the whole GPU suite in attn1.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o2 && mkdir -p /tmp/o2/tw
for tree in base attn1 base2; do
  dir=build/v/${tree%2}
  for ctx in 32768 1024; do
    (cd $dir && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o2/tw --context $ctx --tag ${tree}_$ctx --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"')
  done
done
cd build/v/attn1
PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o2/gpu_tests_attn1.log 2>&1; echo "gpu tests rc=$?"; tail -5 /tmp/o2/gpu_tests_attn1.log
cd $root
tar czf /tmp/o2/tw.tgz -C /tmp/o2 tw
cp /tmp/o2/tw.tgz /tmp/o2/gpu_tests_attn1.log $OUT/
