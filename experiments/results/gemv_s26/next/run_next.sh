# Prepared for the next session (not run: this session's device time was spent). Trees by
# experiments/make_tree.py from the landed commit:
#   build/v/base   no patch;
#   build/v/fill1  + ../9_rolled_code/fill_rolled.patch (the weight ring's first fill as a rolled loop, both
#                  builds; call 9 read graph -0.5 %, megakernel -0.8 % with overlapping runs).
# What decides: fill1 against base over four alternated rounds at M = 1 and 8; if both builds gain beyond
# the runs' spread, the whole GPU suite in fill1 (bit identity; the fill orders no arithmetic) and then
# `megakernel bench` for the JSON of record, in the next call.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/on && mkdir -p /tmp/on
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/on/ct --tree base=build/v/base --tree fill1=build/v/fill1 --reps 4 --rows 1,8 2>&1 | tail -5
cp -r /tmp/on/* $OUT/
