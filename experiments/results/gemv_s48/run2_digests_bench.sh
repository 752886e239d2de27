#!/bin/bash
# Issue 18 (s48), call 2 (prepared, not run): the same bits where a lever promises them (arena digests of b, nr, np
# and op at M = 1 and 8 with speculative passes: nr, np and op must equal b; pf's discrete build is b's SASS, and
# call 4 checks its megakernel; or changes out_proj's k-slices, so its
# bits differ by design and call 3 checks it against the interpreter instead), then the GEMV bench of b and op on
# the split-K shapes whose operand op changes (down; out_proj, the bench's one shape for o_proj too: the M = 8 / M = 1
# target). Trees as call 1.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
mkdir -p $OUT/ad
for t in b nr np op; do
  (cd build/v/$t && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
    --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1)
done
python3 - <<'PY'
import json, os
d = {t: json.load(open(os.path.join(os.environ["OUT"], "ad", f"arena_digest_{t}.json")))["passes"] for t in ("b", "nr", "np", "op")}
for t in ("nr", "np", "op"):
    print(t, "digests equal to b:", d[t] == d["b"], [(x["rows"], x["digests"] == y["digests"]) for x, y in zip(d["b"], d[t])])
PY
for t in b op b op; do
  (cd build/v/$t && GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") PYTHONPATH=$PWD:/tmp/site \
    timeout 100 python3 experiments/bench_gemv.py --out $OUT/bench_$t --no-sweep --iters 40 --shapes down,out_proj 2>&1 \
    | grep -E "M=|read bandwidth")
  echo "-- $t"
done
