# Call 8 (HEAD 277f7c7, the final attention change): the whole GPU suite at the commit, then the attention words
# alone at 32k (layers 3, 7, 11, M = 1 and 8).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/tw
PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 215 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests.log 2>&1; tail -3 /tmp/o/gpu_tests.log; date
cp /tmp/o/gpu_tests.log $OUT/
PYTHONPATH=$PWD:/tmp/site timeout 40 python3 experiments/time_words.py --out /tmp/o/tw --context 32768 --tag final_32768 --words scores,pv,merge --layers 3,7,11 2>&1 | grep '"mean_us"' | sed 's/.*"rows": \([0-9]\), "word": "\([a-z]*\)".*"mean_us": \([0-9.]*\).*/\2 M\1 \3/' | tr '\n' ' '
cp /tmp/o/tw/*.json $OUT/ 2>/dev/null; date
