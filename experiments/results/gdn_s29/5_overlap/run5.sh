# Call 5 (HEAD 81cbbbf): GDN_CORE alone for cand, ov (the conv's inputs asked for before the state, the state
# its own copy group waited for before the rows) and ovn (ov + the state sent to global memory after the
# gated norm in the norm's warps, meanwhile in the others); digests (all three must agree: same
# arithmetic); the GPU suite in the faster of ov and ovn.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/dg
for t in cand ov ovn; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r1 --words gdn_core 2>&1 | grep '"mean_us"\|Error' | tail -3); done; date
for t in ov ovn cand; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/dg --rows 1,8 --speculative --tag $t 2>&1 | tail -2); done; date
best=$(python3 - <<'PY'
import json, glob
t = {}
for f in glob.glob('/tmp/o/tw/*.json'):
    d = json.load(open(f)); tag = d.get('tag', f).rsplit('_r', 1)[0]
    for p in d['passes']:
        us = [k['us'] for k in p['kernels'] if k['name'].endswith('gdn_core')]
        t[tag] = t.get(tag, 0) + sum(us) / len(us)
print(min((v, k) for k, v in t.items() if k != 'cand')[1] if t else 'ovn')
PY
)
echo "suite in $best"
tar czf /tmp/o/tw.tgz -C /tmp/o tw dg
cp /tmp/o/tw.tgz $OUT/
(cd build/v/$best && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 215 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests_$best.log 2>&1; tail -4 /tmp/o/gpu_tests_$best.log)
cp /tmp/o/gpu_tests_*.log $OUT/
