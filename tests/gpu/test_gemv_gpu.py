"""The tensor-core GEMV device function (megakernel/runtime/cuda/gemv.cuh) on the GPU: the engine's sums within
fp32 rounding of the NumPy engine GEMV, every input row independent of the others, run to run the same."""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from discrete.kernels import gemv_slices  # noqa: E402
from megakernel.model import fp8, plan  # noqa: E402
from megakernel.reference import ops  # noqa: E402
from megakernel.reference.numerics import bf16  # noqa: E402

def bits(a: np.ndarray, dtype) -> np.ndarray:
    return np.ascontiguousarray(a.astype(dtype)).view(np.uint16 if dtype == fp8.BF16 else np.uint8)


def case(n, k, m, is_fp8=True, seed=0):
    """Random weights and rows from a generator of this case's own (no state shared between tests)."""
    rng = np.random.default_rng([n, k, m, seed])
    w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
    x = bf16(rng.standard_normal((m, k)).astype(np.float32))
    if is_fp8:
        q, s = fp8.quantize(w)
        return q, s, x
    return w.astype(fp8.BF16), None, x


def numpy_slices(q, s, x, slices):
    n, k = q.shape
    w3 = q.astype(np.float32).reshape(n, -1, plan.K_BLOCK)
    scale = None if s is None else np.repeat(s.astype(np.float32), plan.ROW_BLOCK, axis=0)[:n]
    out = np.empty((slices, x.shape[0], n), np.float32)
    bound = np.empty_like(out)
    for m, row in enumerate(x):
        for sl in range(slices):
            b0, b1 = plan.slice_blocks(k, slices, sl)
            sc = None if scale is None else scale[:, b0:b1]
            part = row[b0 * plan.K_BLOCK:b1 * plan.K_BLOCK]
            out[sl, m] = ops.engine_slice_sum(w3[:, b0:b1], part, sc)
            operand, unscale = (part, None) if sc is None else ops.f16_operand(part)
            magnitude = np.einsum("nbk,bk->nb", np.abs(w3[:, b0:b1]), np.abs(operand).reshape(-1, plan.K_BLOCK))
            bound[sl, m] = ops.slice_sum(magnitude, None if sc is None else np.abs(sc), unscale)
    return out, bound


def run(q, s, x, slices, tile_rows=plan.ROW_BLOCK, paired=False):
    """The kernel's slices into an output filled with NaN first: a launch that writes nothing cannot
    match anything (CuPy's pool would otherwise hand back a block still holding an earlier result)."""
    wq = cupy.asarray(bits(q, fp8.E4M3) if s is not None else bits(q, fp8.BF16))
    sc = None if s is None else cupy.asarray(bits(s, fp8.BF16))
    out = cupy.full((slices, x.shape[0], q.shape[0]), np.nan, dtype=cupy.float32)
    gemv_slices(wq, sc, cupy.asarray(bits(x, fp8.BF16)), slices, out=out, tile_rows=tile_rows, paired=paired)
    got = cupy.asnumpy(out)
    assert np.isfinite(got).all(), "the kernel left outputs unwritten"
    return got


@pytest.mark.parametrize("is_fp8", [True, False])
@pytest.mark.parametrize("n, k, m, slices", [(256, 1024, 1, 1), (384, 2048, 8, 4), (128, 768, 5, 3)])
def test_gemv_matches_the_engine_sum_within_fp32_rounding(n, k, m, slices, is_fp8):
    q, s, x = case(n, k, m, is_fp8)
    got = run(q, s, x, slices)
    want, magnitude = numpy_slices(q, s, x, slices)
    err = np.abs(got - want) / np.maximum(magnitude, 1e-30)
    assert err.max() < 1e-6, err.max()  # fp32 accumulation of 128-term blocks: ~2^-24 x sqrt(terms)


@pytest.mark.parametrize("is_fp8, tile_rows", [(True, 16), (True, 32), (True, 64), (False, 16), (False, 48),
                                                (False, 96)])
def test_fewer_rows_per_block_deal_the_k_blocks_to_more_warps_and_still_sum_right(is_fp8, tile_rows):
    """A block of fewer than 128 rows shares each 16-row strip's k-blocks among 16 / strips warps (gemv.cuh
    WarpRole; 16 for one strip, 5 for three): every row's sum stays within fp32 rounding of the engine sum,
    and an input row's bits do not depend on the other rows."""
    q, s, x = case(384, 5120, 8, is_fp8)
    got = run(q, s, x, 2, tile_rows)
    want, magnitude = numpy_slices(q, s, x, 2)
    assert (np.abs(got - want) / np.maximum(magnitude, 1e-30)).max() < 1e-6
    assert np.array_equal(run(q, s, x[5:6], 2, tile_rows)[:, 0], got[:, 5])


@pytest.mark.parametrize("tile_rows", [144, 256])
def test_fp8_row_groups_past_a_scale_block_are_cut_into_passes_and_sum_right(tile_rows):
    """fp8 row groups longer than a scale block (gate_up's 144 rows, qkv's 256-row heads), the last one short
    where they do not divide n: passes cut where a 128-row scale block ends, as the engine's tiles cut them;
    every row within fp32 rounding of the engine sum, an input row's bits independent of the other rows."""
    q, s, x = case(384, 2048, 8, True)
    got = run(q, s, x, 2, tile_rows)
    want, magnitude = numpy_slices(q, s, x, 2)
    assert (np.abs(got - want) / np.maximum(magnitude, 1e-30)).max() < 1e-6
    assert np.array_equal(run(q, s, x[3:4], 2, tile_rows)[:, 0], got[:, 3])


def test_each_input_row_is_bit_identical_whatever_the_other_rows():
    q, s, x = case(512, 2048, 8)
    together = run(q, s, x, 4)
    for m in range(8):
        alone = run(q, s, x[m:m + 1], 4)
        assert np.array_equal(alone[:, 0], together[:, m])
    assert np.array_equal(run(q, s, x[:3], 4), together[:, :3])


def test_run_to_run_bit_identical():
    q, s, x = case(1024, 5120, 8)
    first = run(q, s, x, 2)
    assert np.array_equal(first, run(q, s, x, 2))
    # negative control: other inputs give other bits (the comparison can fail)
    assert not np.array_equal(first, run(q, s, case(1024, 5120, 8, seed=1)[2], 2))


def test_subnormal_sums_are_kept_not_flushed():
    """CuPy builds with -ftz=true; the reference keeps fp32 subnormals, so the kernel must too. Every
    block partial is 128 x 2^-60 = 2^-53, times the scale 2^-75 is 2^-128 (subnormal); two blocks: 2^-127."""
    n, k = 128, 256
    q = np.full((n, k), 1.0, np.float32).astype(fp8.E4M3)
    s = np.full((n // 128, k // 128), 2.0 ** -75, np.float32).astype(fp8.BF16)
    x = np.full((1, k), 2.0 ** -60, np.float32).astype(fp8.BF16)
    got = run(q, s, x.astype(np.float32), 1)
    want, _ = numpy_slices(q, s, x.astype(np.float32), 1)
    assert (want == np.float32(2.0 ** -127)).all()
    assert np.array_equal(got, want)


def test_the_f16_operand_rounds_what_the_reference_rounds():
    """A block whose small inputs lie 2^34 below its largest: f16 holds them only to its subnormal grid. The
    kernel matches the engine model that rounds them (ops.f16_operand) and not the sum of the bf16 values
    (the negative control: the rounding is visible, ~5e-4 relative on the H200, 500x the tolerance)."""
    n, k = 128, 256
    rng = np.random.default_rng(7)
    q = np.ones((n, k), np.float32)
    q[:, 0] = 0.0  # the large input's weight: the sum is all small inputs
    q = q.astype(fp8.E4M3)
    s = np.ones((1, 2), np.float32).astype(fp8.BF16)
    x = bf16((2.0 ** -14 * (1 + rng.random((1, k)))).astype(np.float32))
    x[0, 0] = 2.0 ** 20
    got = run(q, s, x, 1)
    want, magnitude = numpy_slices(q, s, x, 1)
    assert (np.abs(got - want) / magnitude).max() < 1e-6
    plain = ops.slice_sum(ops.block_partials(q.astype(np.float32).reshape(n, 2, 128), x[0]), np.ones((n, 2), np.float32))
    assert (np.abs(got[0, 0] - plain) / np.abs(plain)).max() > 1e-4


def test_given_out_buffer_gets_the_same_bits_and_is_checked():
    q, s, x = case(256, 1024, 3)
    wq, sc, xb = (cupy.asarray(bits(q, fp8.E4M3)), cupy.asarray(bits(s, fp8.BF16)), cupy.asarray(bits(x, fp8.BF16)))
    out = cupy.full((2, 3, 256), np.nan, dtype=cupy.float32)
    assert gemv_slices(wq, sc, xb, 2, out=out) is out
    assert np.array_equal(cupy.asnumpy(out), run(q, s, x, 2))
    with pytest.raises(ValueError, match="out must be"):
        gemv_slices(wq, sc, xb, 2, out=cupy.empty((2, 3, 128), dtype=cupy.float32))


def test_a_launch_that_writes_nothing_cannot_pass(monkeypatch):
    """Negative control of run(): with the kernel replaced by one that writes nothing, the NaN-filled output
    is caught instead of an earlier result left in a reused pool block."""
    q, s, x = case(1024, 5120, 8)
    run(q, s, x, 2)  # a real result, freed to CuPy's pool
    monkeypatch.setitem(globals(), "gemv_slices", lambda *args, out=None, **kwargs: out)
    with pytest.raises(AssertionError, match="left outputs unwritten"):
        run(q, s, x, 2)


@pytest.mark.parametrize("m", [1, 8])
def test_paired_halves_sum_as_the_unpaired_rows_do(m):
    """`paired` (the bench's gate_up, tiled as the engine's NORM_GATE_UP tiles: a 144-row group over the
    same rows of both halves, cut into passes where a scale block ends) computes each half as the
    unpaired kernel computes that half alone with the same groups, bit for bit (a row's sum order follows
    its pass's strips), and within fp32 rounding of the engine sum."""
    q, s, x = case(1024, 1024, m)
    got = run(q, s, x, 1, 144, paired=True)
    halves = [run(q[h * 512:(h + 1) * 512], s[h * 4:(h + 1) * 4], x, 1, 144) for h in (0, 1)]
    assert np.array_equal(got, np.concatenate(halves, axis=2))
    want, magnitude = numpy_slices(q, s, x, 1)
    assert (np.abs(got - want) / np.maximum(magnitude, 1e-30)).max() < 1e-6
