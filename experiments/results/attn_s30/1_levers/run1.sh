# Call 1 (HEAD f856bc5): attention words alone (scores, pv, merge; layers 3, 7, 11) at 32k and 1k, M = 1 and 8,
# in base and four trees: stage (KvStream's copy addresses once a chunk; pv's probabilities only for real
# queries), merge (all partitions loaded before the first add), hoist (scores' fragments all loaded before
# the first mma), all (the three). Then arena digests at 1k and 8k for base and all (same bits expected).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
for t in base stage merge hoist all base; do
  for ctx in 32768 1024; do
    (cd $( [ $t = all ] && echo . || echo build/v/$t ) && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --tag ${t}_${ctx}_$(date +%s) --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"\|Error' | tr -s ' ' | tr '\n' ' '; echo " <- $t $ctx")
  done
done; date
for t in base all; do for ctx in 1024 8192; do (cd $( [ $t = all ] && echo . || echo build/v/$t ) && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --context $ctx --tag ${t}_$ctx 2>&1 | tail -2); done; done; date
tar czf $OUT/tw.tgz -C /tmp/o tw dg
