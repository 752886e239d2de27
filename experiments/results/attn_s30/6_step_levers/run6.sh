# Call 6: why the megakernel got slower at 32k with 15968c0 (call 5), lever by lever. Trees: base (f856bc5),
# landed (15968c0), smem (f856bc5 + smem.patch: pv's probabilities only for the queries, the partition
# statistics copied into shared memory by every thread before one thread a query combines them (little code,
# where 15968c0 unrolled 32 partitions), merge's 32 partitions loaded before the first add), smemnm (smem
# without the merge change). compare_trees at 32k and at 1k (2 rounds, M = 1 and 8); attention words alone
# at 32k (landed, smem, smemnm); arena digests for smem and smemnm at 1k and 8k (base's from call 1).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
for ctx in 32768 1024; do
PYTHONPATH=$root:/tmp/site timeout 240 python3 experiments/compare_trees.py --out /tmp/o/ct_$ctx --tree base=build/v/base --tree landed=build/v/landed --tree smem=build/v/smem --tree smemnm=build/v/smemnm --reps 2 --rows 1,8 --context $ctx 2>&1 | tail -4
cp /tmp/o/ct_$ctx/compare_trees.json $OUT/compare_trees_$ctx.json; date
done
for t in landed smem smemnm; do
  (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 32768 --tag ${t}_32768 --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"\|Error' | sed 's/.*"rows": \([0-9]\), "word": "\([a-z]*\)".*"mean_us": \([0-9.]*\).*/\2 M\1 \3/' | tr '\n' ' '; echo " <- $t 32768")
done; date
for t in smem smemnm; do for ctx in 1024 8192; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --context $ctx --tag ${t}_$ctx 2>&1 | tail -2 | sed "s/^/$t $ctx /"); done; done; date
tar czf $OUT/tw.tgz -C /tmp/o tw dg
