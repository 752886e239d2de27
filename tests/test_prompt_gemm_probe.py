"""experiments/prompt_gemm_probe.py's operands and float64 expectation (the kernel itself runs on the H200)."""

import numpy as np
from experiment_tools import load_experiment

from megakernel.model import fp8


def test_the_expectation_is_the_block_scaled_sum_term_by_term():
    probe = load_experiment("prompt_gemm_probe")
    w, scale, x, unscale = probe.operands(256, 384, 128, seed=3)
    assert not np.isnan(w.view(fp8.E4M3).astype(np.float32)).any()
    assert np.all(np.log2(unscale) == np.round(np.log2(unscale)))  # powers of two, as ops.f16_operand's 2^-P
    rows, tokens = np.array([0, 130, 255]), np.array([1, 127])
    want, magnitude = probe.expected(w[rows], scale[rows // 128], x[tokens], unscale[tokens])
    wf, xf = w.view(fp8.E4M3).astype(np.float64), x.astype(np.float64)
    for ti, t in enumerate(tokens):
        for ri, r in enumerate(rows):
            terms = [scale[r // 128, b] * unscale[t, b] * (wf[r, 128 * b:128 * b + 128] @ xf[t, 128 * b:128 * b + 128])
                     for b in range(3)]
            assert np.isclose(want[ti, ri], sum(terms), rtol=1e-12, atol=0)
    assert np.all(magnitude >= np.abs(want)) and np.all(magnitude > 0)
