# Call 3 (99794a6 = 1ddb6bd + the probe's bulk modes): the GDN state-traffic probe with bulk copies; GDN_CORE
# alone for cand (1ddb6bd's tile), lin (a lane's dk pieces i and i + 16, shared memory unswizzled: new bits),
# tma (lin + the state read by bulk copies on an mbarrier, off the cp.async wait) and tmas (tma + the state
# written by bulk copies), two rounds alternated; digests of lin, tma, tmas (tma and tmas must equal lin);
# the GPU suite in the fastest of the three.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
(cd build/v/cand && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/gdn_floor.py --out /tmp/o --iters 20 2>&1 | grep -E "blocks chain 0|bandwidth" )
for r in 1 2; do for t in cand lin tma tmas; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"\|Error\|error' | tail -3); done; done
for t in lin tma tmas; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --tag $t 2>&1 | tail -3); done
best=$(python3 - <<'PY'
import json, glob
t = {}
for f in glob.glob('/tmp/o/tw/*.json'):
    d = json.load(open(f)); tag = d.get('tag', f).rsplit('_r', 1)[0]
    for p in d['passes']:
        us = [k['us'] for k in p['kernels'] if k['name'].endswith('gdn_core')]
        t[tag] = t.get(tag, 0) + sum(us) / len(us)
print(min((v, k) for k, v in t.items() if k != 'cand')[1] if t else 'tma')
PY
)
echo "suite in $best"
(cd build/v/$best && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 250 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests_$best.log 2>&1; tail -4 /tmp/o/gpu_tests_$best.log)
tar czf /tmp/o/tw.tgz -C /tmp/o tw dg
cp /tmp/o/tw.tgz /tmp/o/gpu_tests_*.log /tmp/o/gdn_floor.json $OUT/
