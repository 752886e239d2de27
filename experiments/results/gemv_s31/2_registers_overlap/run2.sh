# Call 2 (HEAD 143e371): tile_gemv compiled for one block per SM (106 registers instead of 64): r1; r1 with
# every GEMV launch overlapped (r1o); r1 with the deepest ring for every GEMV word (r1d). The whole step at
# 1k, three rounds alternated; then r1's GEMV words inside the step (tile_phases --step).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
PYTHONPATH=$root:/tmp/site timeout 420 python3 experiments/compare_trees.py --out $OUT/ct --tree base=$root@$(cat build/commit) --tree r1=build/v/r1 --tree r1o=build/v/r1o --tree r1d=build/v/r1d --reps 3 --rows 1,8 --context 1024 2>&1 | tail -16
date
(cd build/v/r1 && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/tile_phases.py --step --out $OUT/sp_r1 2>&1 | tail -2)
date
