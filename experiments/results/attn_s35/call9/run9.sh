# Session s35 call 9 (HEAD c5794ae, the landed code): experiments/check_engine.py on the H200 (issue 23's GPU
# run: the engine against the four oracle goldens with the calibrated checker and its negative controls, and
# tiny's exact verdict).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
timeout 420 python3 experiments/check_engine.py --out $OUT > $OUT/check_engine.log 2>&1; echo "rc=$?"
date
grep -i "verdict\|PASS\|FAIL\|wrote\|exact" $OUT/check_engine.log | tail -30
