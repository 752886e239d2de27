"""experiments/prompt_gemm_probe.py's operands and float64 expectation (the kernel itself runs on the H200)."""

import numpy as np
from experiment_tools import load_experiment

from isa.operand_layout import SLAB_BYTES, X_BYTES, slabs, step_order
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


def _steps_from_layouts(probe, units: np.ndarray, prepared: np.ndarray, row_strip: int, tile: int, block: int):
    """What prompt_gemm_ws.cu multiplies for one 16-row strip, one 128-token tile and one k-block, read from the two
    layouts as its lanes and descriptors read them: (A [8 steps, 16 rows, 16 slots], B [8 steps, 16 slots, 128
    tokens]) as float64."""
    blocks = prepared.shape[1]
    unit = units.reshape(-1)[(row_strip * blocks + block) * 2048:][:2048].view(fp8.E4M3).astype(np.float64)
    a = np.zeros((8, 16, 16))
    for g in range(8):
        for t in range(4):
            for i in range(4):
                v = unit[512 * i + 16 * (4 * g + t):][:16]
                for h in range(2):
                    for r in range(2):  # the word of step 2 i + h, row g + 8 r: slots 2t, 2t + 1, 2t + 8, 2t + 9
                        word = v[4 * (2 * h + r):][:4]
                        for e in range(4):
                            a[2 * i + h, g + 8 * r, 2 * t + e % 2 + 8 * (e // 2)] = word[e]
    return a, _operand_steps(probe, prepared, tile, block)


def _operand_steps(probe, prepared: np.ndarray, tile: int, block: int) -> np.ndarray:
    """B [8 steps, 16 slots, 128 tokens] (float64) of one prepared (tile, k-block), as the descriptors read it."""
    tiles = prepared[tile, block, :X_BYTES].view(np.float16).astype(np.float64)
    return tiles.reshape(16, 8, 2, 8, 8).transpose(1, 2, 4, 0, 3).reshape(8, 16, 128)  # [s, c, j, G, n] -> [s, slot, n]


def test_the_units_and_the_prepared_operand_meet_in_the_same_k_order():
    """prompt_gemm_ws.cu's A (the arena's units) and B (prepare's core matrices) put the same k in every step's
    slot, so the eight steps sum the true products; the unscales follow the tile's tokens."""
    from megakernel.runtime.weight_layout import to_units

    probe = load_experiment("prompt_gemm_probe")
    w, scale, x, unscale = probe.operands(32, 256, 256, seed=5)
    units, prepared = to_units(w), slabs(x, unscale)
    assert prepared.shape == (2, 2, SLAB_BYTES)
    assert sorted(step_order().reshape(-1)) == list(range(128))
    wf, xf = w.view(fp8.E4M3).astype(np.float64), x.astype(np.float64)
    for strip, tile, block in [(0, 0, 0), (1, 1, 1), (1, 0, 1)]:
        a, b = _steps_from_layouts(probe, units, prepared, strip, tile, block)
        got = np.einsum("srj,sjn->rn", a, b)
        want = wf[16 * strip:16 * strip + 16, 128 * block:128 * block + 128] @ \
            xf[128 * tile:128 * tile + 128, 128 * block:128 * block + 128].T
        assert np.allclose(got, want, rtol=1e-12, atol=0)
        u = prepared[tile, block, X_BYTES:].view(np.float32)
        assert np.array_equal(u, unscale[128 * tile:128 * tile + 128, block])
    # the control: the natural k order in place of step_order does not meet the units
    natural = x.reshape(2, 16, 8, 2, 8, 2, 8).transpose(0, 3, 4, 1, 5, 2, 6)
    wrong = prepared.copy()
    wrong[:, :, :X_BYTES] = np.ascontiguousarray(natural).reshape(2, 2, -1).view(np.uint8)
    a, b = _steps_from_layouts(probe, units, wrong, 0, 0, 0)
    assert not np.allclose(np.einsum("srj,sjn->rn", a, b), wf[:16, :128] @ xf[:128, :128].T, rtol=1e-6)


def test_the_prepare_kernels_expectation_is_the_reference_f16_operand():
    """prepared_from_bf16 (what prompt_prepare must write) holds ops.f16_operand's x' in step order and its 2^-P;
    the activations reach f16's subnormal grid, so the check covers the rounding NUMERICS.md describes."""
    from megakernel.reference import ops

    probe = load_experiment("prompt_gemm_probe")
    x = probe.bf16_activations(256, 256, seed=1)
    prepared = probe.prepared_from_bf16(x)
    x16, unscale = ops.f16_operand(x)
    x16, unscale = x16.reshape(x.shape), unscale.reshape(256, 2)
    assert np.any((np.abs(x16) < 2.0 ** -14) & (x16 != 0))
    order = step_order().reshape(8, 16)
    for tile, block in [(0, 0), (1, 1), (0, 1)]:
        b = _operand_steps(probe, prepared, tile, block)
        tokens = x16[128 * tile:128 * tile + 128, 128 * block:128 * block + 128]
        assert np.array_equal(b, tokens[:, order].transpose(1, 2, 0))
        assert np.array_equal(prepared[tile, block, X_BYTES:].view(np.float32),
                              unscale[128 * tile:128 * tile + 128, block])


def test_every_kernel_the_probe_names_is_defined_in_its_source():
    from pathlib import Path

    probe = load_experiment("prompt_gemm_probe")
    for label, (source, function, layout, threads, shared) in probe.KERNELS.items():
        text = (Path(probe.HERE) / source).read_text()
        assert f"PROMPT_GEMM({function}," in text or f"{function}(" in text, label
        assert layout in ("row-major", "prepared") and shared <= 227 * 1024, label
    assert probe.PERSISTENT <= set(probe.KERNELS)
