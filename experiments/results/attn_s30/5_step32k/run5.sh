# Call 5 (HEAD 15968c0): the whole step at 32k, f856bc5 (base) against 15968c0 (landed), trees alternated,
# two rounds, M = 1 and 8, graph and megakernel in one process per run.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 500 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base@f856bc5 --tree landed=.@15968c0 --reps 2 --rows 1,8 --context 32768 2>&1 | tail -8
cp /tmp/o/ct/compare_trees.json $OUT/; date
