# Call 3 (HEAD 318798a + the graph trace in the working tree): the megakernel's wait polls without sleeping
# (spin) or sleeping at most 64 ns (s64) against 256 ns (base).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o; mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 560 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree spin=build/v/poll_spin --tree s64=build/v/poll_s64 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -8
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
