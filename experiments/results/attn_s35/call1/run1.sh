# Session s35 call 1 (HEAD ef1d7bb): base; sw = + scores_warps.patch (ATTN_SCORES: each warp streams its own
# 16-key tiles, keys as the mma rows, queries as the columns; no block barrier in the loop). The attention
# words alone at 32k and 1k (M = 1, 8; two rounds), then GPU tests in sw (the new long-range attention file,
# discrete, megakernel).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw
date
for ctx in 32768 1024; do for r in 1 2; do for t in base sw; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --rows 1,8 --tag ${t}_${ctx}_r$r --words attn_scores,attn_pv,attn_merge 2>&1 | grep '"mean_us"\|Error\|error' | tail -6); done; done; done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
(cd build/v/sw && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 240 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_attention_long_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py --durations=6 > /tmp/o/gpu_tests_sw.log 2>&1; tail -12 /tmp/o/gpu_tests_sw.log)
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
