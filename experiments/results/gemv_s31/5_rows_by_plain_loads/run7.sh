# Call 7 (HEAD 5f3815e + results): ld = the GEMV prologue's input rows and norm weight loaded by plain loads
# (four in flight a thread) instead of async copies + cp.async.wait_group 0, so that a tile's rows need not
# wait for its own primed ring. (The megakernel spills 128 bytes in ld: its figures are not the lever's.)
# The whole step at 1k, three rounds, against the working tree.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree ld=build/v/ld --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
