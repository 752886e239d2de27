# Call 2 (as run). Meant: arena digests and time_words for base / gdn2, then the GPU suite on gdn2. The
# first two loops ran without the tree on PYTHONPATH and failed at import (no output; call 3 repeats them);
# the suite ran: 145 passed in 213 s on gdn2 (the call's output tail; no files came back).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
R=$PWD; mkdir -p $OUT/dig $OUT/tw
for t in base gdn2; do (cd build/v/$t && timeout 150 python3 experiments/arena_digest.py --out $OUT/dig --tag $t --rows 1,8 --speculative 2>&1 | tail -4); done
for r in 1 2; do for t in base gdn2; do (cd build/v/$t && timeout 100 python3 experiments/time_words.py --out $OUT/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
cd build/v/gdn2 && MEGAKERNEL_REQUIRE_GPU=1 timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/gpu 2>&1 | tail -15
