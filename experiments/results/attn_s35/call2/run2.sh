# Session s35 call 2 (HEAD ef1d7bb): base; sw = + scores_warps.patch (ATTN_SCORES per-warp key tiles; the
# long-range attention tests; attn_partial's tolerance as softmax_stats'); bt = base + the long-range tests with
# the old tolerance (is ATTN_PV's 1.4e-4 at M = 8 the base code's too?). The attention words alone at 32k
# and 1k (M = 1, 8; two rounds), then the long-range tests in bt and sw.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw
date
for ctx in 32768 1024; do for r in 1 2; do for t in base sw; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --rows 1,8 --tag ${t}_${ctx}_r$r --words scores,pv,merge 2>&1 | grep '"mean_us"\|Error\|error' | tail -6); done; done; done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
for t in bt sw; do (cd build/v/$t && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_attention_long_gpu.py > /tmp/o/gpu_tests_long_$t.log 2>&1; grep "Error\|passed\|failed" /tmp/o/gpu_tests_long_$t.log | tail -6); done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
