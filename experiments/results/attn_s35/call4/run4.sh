# Session s35 call 4 (the same script as call 3, sp rebuilt: spread items dealt round-robin)
# Session s35 call 3 (HEAD ef1d7bb): base; sp = + scores_spread.patch (ATTN_SCORES per-warp items; partitions
# of <= 8 key tiles spread an M-row pass's n-tiles over the warps). The attention words alone at 32k, 4k and
# 1k (M = 1, 8; two rounds at 32k and 1k), then GPU tests in sp (long-range attention, discrete, megakernel,
# speculative).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw
date
for ctx in 1024 32768 4096; do for r in 1 2; do [ $ctx = 4096 ] && [ $r = 2 ] && continue; for t in base sp; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/time_words.py --out /tmp/o/tw --context $ctx --rows 1,8 --tag ${t}_${ctx}_r$r --words scores 2>&1 | grep '"mean_us"\|Error\|error' | tail -6); done; done; done
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
(cd build/v/sp && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_attention_long_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_speculative_gpu.py --durations=6 > /tmp/o/gpu_tests_sp.log 2>&1; grep "Error\|passed\|failed" /tmp/o/gpu_tests_sp.log | tail -12)
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
