# Call 3 (HEAD f856bc5): attention words alone (layers 3, 7, 11) at 32k and 1k, M = 1 and 8: base; keep (call
# 2's); stats (keep + ATTN_PV's partition statistics all loaded before they are combined: the working
# tree). Arena digests at 1k and 8k for stats (base's from call 1).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
for t in base keep stats base stats; do
  for ctx in 32768 1024; do
    (cd $([ $t = stats ] && echo . || echo build/v/$t) && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --tag ${t}_${ctx}_$(date +%s) --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"\|Error' | sed 's/.*"rows": \([0-9]\), "word": "\([a-z]*\)".*"mean_us": \([0-9.]*\).*/\2 M\1 \3/' | tr '\n' ' '; echo " <- $t $ctx")
  done
done; date
for ctx in 1024 8192; do (PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --context $ctx --tag stats_$ctx 2>&1 | tail -2 | sed "s/^/stats $ctx /"); done; date
tar czf $OUT/tw.tgz -C /tmp/o tw dg
