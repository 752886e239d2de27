# call 8 (warm): the speculative and 27B per-word GPU files in the x_pad tree
cd build/v/xpad && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 140 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee $OUT/gpu_tests_xpad_spec_27b.log | tail -3
