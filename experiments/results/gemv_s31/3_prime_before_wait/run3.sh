# Call 3 (HEAD 143e371): r1o (tile_gemv at one block per SM, 82-106 registers, every GEMV launch overlapped)
# against gp (r1o + every fp8 GEMV tile of the graph primes its first pass's ring before griddepcontrol.wait,
# as the megakernel's tiles do before their counters' wait). The whole step at 1k, three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree r1o=build/v/r1o --tree gp=build/v/gp --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd /tmp/o && tar czf $OUT/ct.tgz ct)
date
