#!/bin/bash
# Issue 18 (s50), call 2: the working tree with pf and op applied (poll_first.patch, operand_pairs.patch on HEAD,
# whose GPU code is 9e8925e's): arena digests against base b (same bits expected: neither changes arithmetic),
# then the GPU tests of both builds (the MTP word tests whose setup moved into per_word.mtp_history among them).
mkdir -p build/v && cp -r build/bt build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
mkdir -p $OUT/ad
(cd build/v/b && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
  --rows 1,8 --speculative --context 1024 --tag b 2>&1 | tail -1)
PYTHONPATH=$ROOT:$ROOT/experiments:/tmp/site timeout 90 python3 experiments/arena_digest.py --out $OUT/ad \
  --rows 1,8 --speculative --context 1024 --tag pfop 2>&1 | tail -1
python3 - <<'PY'
import json, os
d = {t: json.load(open(os.path.join(os.environ["OUT"], "ad", f"arena_digest_{t}.json")))["passes"] for t in ("b", "pfop")}
print("pfop digests equal to b:", d["pfop"] == d["b"], [(x["rows"], x["digests"] == y["digests"]) for x, y in zip(d["b"], d["pfop"])])
PY
MEGAKERNEL_REQUIRE_GPU=1 GIT_COMMIT=$(cat build/commit)+pfop PYTHONPATH=$ROOT:/tmp/site timeout 330 python3 -m pytest -q -x \
  -p no:cacheprovider tests/gpu/test_megakernel_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py \
  tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py > $OUT/gpu_tests.log 2>&1
tail -4 $OUT/gpu_tests.log
