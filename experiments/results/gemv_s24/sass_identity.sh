# The SASS check of D49 (run on the CPU machine): each source file compiled for sm_90a in two trees, the
# SASS dumped (cuobjdump from the PyPI wheel nvidia-cuda-cuobjdump) without addresses, and compared.
# Usage: bash sass_identity.sh TREE_A TREE_B CUOBJDUMP   (trees from experiments/make_tree.py)
set -eu
a=$1 b=$2 dump=$3
for f in discrete/kernels.cu megakernel/runtime/cuda/megakernel.cu megakernel/runtime/cuda/synthetic.cu; do
    for t in "$a" "$b"; do
        nvcc -arch=sm_90a -std=c++17 -I"$t/megakernel/runtime/cuda" -cubin -o /tmp/sass_id.cubin "$t/$f" 2>/dev/null
        "$dump" -sass /tmp/sass_id.cubin | sed -E 's@/\*[0-9a-f]+\*/@@; s/ +/ /g' | grep -v "code for sm_90a\|\.target\|^ *$" > "/tmp/sass_id_$(basename "$t").sass"
    done
    if cmp -s "/tmp/sass_id_$(basename "$a").sass" "/tmp/sass_id_$(basename "$b").sass"; then echo "same SASS: $f"
    else echo "SASS differs: $f"; fi
done
