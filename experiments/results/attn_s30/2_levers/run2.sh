# Call 2 (HEAD f856bc5): attention words alone (scores, pv, merge; layers 3, 7, 11) at 32k and 1k, M = 1 and 8:
# base; keep (merge's partitions loaded before the first add + pv's probabilities only for real queries:
# the working tree); pu2 / pu3 (keep + the probabilities loop unrolled 2 / 3); mt2 (keep + scores' m-tiles
# two at a time). Arena digests at 8k for keep, pu2, pu3, mt2 (base's from call 1: same bits expected).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
for t in base keep pu2 pu3 mt2 keep; do
  for ctx in 32768 1024; do
    (cd $([ $t = keep ] && echo . || echo build/v/$t) && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --tag ${t}_${ctx}_$(date +%s) --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"\|Error' | sed 's/.*"rows": \([0-9]\), "word": "\([a-z]*\)".*"mean_us": \([0-9.]*\).*/\2 M\1 \3/' | tr '\n' ' '; echo " <- $t $ctx")
  done
done; date
for t in keep pu2 pu3 mt2; do (cd $([ $t = keep ] && echo . || echo build/v/$t) && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --context 8192 --tag ${t}_8192 2>&1 | tail -2 | sed "s/^/$t /"); done; date
tar czf $OUT/tw.tgz -C /tmp/o tw dg
