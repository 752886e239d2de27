# Call 2 (HEAD c9732d0): GDN_CORE's phases by the stamp probe (layer 0, M = 1 and 8) in base and gdn2.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/base /tmp/o/gdn2
for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 experiments/tile_phases.py --out /tmp/o/$t --rows 1,8 --layers 0 --gdn 2>&1 | tail -2); done
python3 - <<'PY'
import json
for t in ('base', 'gdn2'):
    d = json.load(open(f'/tmp/o/{t}/tile_phases.json'))
    for w in d['words']:
        if w['op'] == 'GDN_CORE':
            print(t, w['rows'], w['us'], {k: v['median'] if isinstance(v, dict) else v for k, v in w.items() if k.endswith('_us')}, flush=True)
            print(t, w['rows'], 'max', {k: v['max'] for k, v in w.items() if k.endswith('_us') and isinstance(v, dict)}, flush=True)
PY
(cd /tmp/o && tar czf $OUT/out.tgz .)
