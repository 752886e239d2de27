#!/bin/bash
# Issue 18 (s47), call 5 (prepared, not run: no machine): norm_rows's last round of pieces shared by row groups
# (tree nr), and on top of it the rows two at a time (tree np), against the landed merge split (tree mg2): the
# arena digests of the three trees (same bits, M = 1 and 8 with speculative passes), then the 27B step at 1k
# (compare_trees, M = 1 and 8, three rounds). The trees, from the repository root:
#   P=experiments/results/gemv_s47; python3 experiments/make_tree.py build/v/mg2 --commit c7d1071
#   python3 experiments/make_tree.py build/v/nr --commit c7d1071 --patch $P/norm_rest.patch
#   python3 experiments/make_tree.py build/v/np --commit c7d1071 --patch $P/norm_rest.patch --patch $P/norm_two_rows.patch
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
mkdir -p $OUT/ad
for t in mg2 nr np; do
  (cd build/v/$t && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
    --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1)
done
python3 - <<'PY'
import json, os
d = {t: json.load(open(os.path.join(os.environ["OUT"], "ad", f"arena_digest_{t}.json")))["passes"] for t in ("mg2", "nr", "np")}
for t in ("nr", "np"):
    print(t, "digests equal to mg2:", d[t] == d["mg2"], [(x["rows"], x["digests"] == y["digests"]) for x, y in zip(d["mg2"], d[t])])
PY
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree mg2=build/v/mg2 --tree nr=build/v/nr --tree np=build/v/np --reps 3 --rows 1,8 2>&1 | tail -8
