"""Each reference op against a direct float64 transcription of docs/SPEC-qwen35.md section 3, on random inputs."""

import ml_dtypes
import numpy as np
import pytest

from megakernel.model import fp8
from megakernel.reference import gdn, ops
from megakernel.reference.numerics import Mode, bf16



@pytest.fixture
def rng():
    """A generator per test: a test's inputs do not depend on which tests ran before it."""
    return np.random.default_rng(0)


def rand_bf16(rng, *shape, scale=1.0):
    return bf16(rng.standard_normal(shape).astype(np.float32) * scale)


def bf16_ulp(x):
    """Spacing of bf16 numbers at |x| (8 significant bits)."""
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(x), 1e-30))) - 7)


def assert_within_ulps(actual, exact, ulps=1, max_fraction=1.0):
    err = np.abs(actual.astype(np.float64) - exact) / bf16_ulp(exact)
    assert err.max() <= ulps, err.max()
    assert (err > 0.5).mean() <= max_fraction  # beyond plain rounding of the exact value


def test_rms_norm_1p(rng):
    x, w = rand_bf16(rng, 5, 256, scale=3), rand_bf16(rng, 256, scale=0.1)
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * (1 + w.astype(np.float64))
    out = ops.rms_norm_1p(x, w, 1e-6)
    assert_within_ulps(out, exact, ulps=1, max_fraction=0.01)
    # (1 + w), not w: a zero weight is the identity norm
    assert np.allclose(ops.rms_norm_1p(x, np.zeros(256, np.float32), 1e-6),
                       x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6), rtol=2 ** -8)


def test_gated_rms_norm_plain_weight_and_silu_gate(rng):
    o, z, w = rand_bf16(rng, 6, 128), rand_bf16(rng, 6, 128, scale=2), rand_bf16(rng, 128, scale=0.1) + 1
    o64, z64 = o.astype(np.float64), z.astype(np.float64)
    # HF rounds to bf16 after the normalisation and after the weight product (docs/SPEC-qwen35.md 3.4), then once more
    xn = bf16(o64 / np.sqrt((o64 ** 2).mean(-1, keepdims=True) + 1e-6)).astype(np.float64)
    t = bf16(xn * w).astype(np.float64)
    exact = t * (z64 / (1 + np.exp(-z64)))
    assert_within_ulps(ops.gated_rms_norm(o, z, w, 1e-6), exact, ulps=1, max_fraction=0.02)


@pytest.mark.parametrize("mode", [Mode.ORACLE, Mode.ENGINE])
def test_fp8_linear_modes(mode, rng):
    w = rng.standard_normal((256, 384)).astype(np.float32) * 0.02
    q, s = fp8.quantize(w)
    x = rand_bf16(rng, 3, 384)
    lin = ops.Linear(q, s, mode)
    deq = q.astype(np.float64) * np.repeat(np.repeat(s.astype(np.float64), 128, 0), 128, 1)
    if mode == Mode.ORACLE:  # HF multiplies bf16-dequantised weights
        deq = deq.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    exact = x.astype(np.float64) @ deq.T
    assert_within_ulps(lin(x), exact, ulps=1, max_fraction=0.01)


def test_engine_and_oracle_linears_differ_only_by_weight_rounding(rng):
    w = rng.standard_normal((256, 256)).astype(np.float32) * 0.02
    q, s = fp8.quantize(w, pow2=True)  # bf16(fp8 x scale) is exact: both modes compute the same sum
    x = rand_bf16(rng, 2, 256)
    a, b = ops.Linear(q, s, Mode.ORACLE).accumulate(x), ops.Linear(q, s, Mode.ENGINE).accumulate(x)
    assert np.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_linear_rows_do_not_depend_on_the_other_rows(rng):
    lin = ops.Linear(rand_bf16(rng, 512, 256), None, Mode.ORACLE)
    x = rand_bf16(rng, 8, 256)
    together = lin(x)
    assert all(np.array_equal(together[m], lin(x[m:m + 1])[0]) for m in range(8))


def test_split_query_gate_is_per_head_interleaved():
    heads, d = 3, 4
    qg = np.arange(heads * 2 * d, dtype=np.float32)[None, :]
    q, gate = ops.split_query_gate(qg, heads, d)
    assert q[0, 1].tolist() == [8, 9, 10, 11]  # head 1 query = rows 8..11 of the 24
    assert gate[0, :4].tolist() == [4, 5, 6, 7] and gate[0, 4:8].tolist() == [12, 13, 14, 15]


def test_rope_pairs_and_theta(rng):
    rot, theta = 64, 1e7
    x = rand_bf16(rng, 3, 2, 256)
    positions = np.array([0, 5, 1000])

    def rope(x, theta):
        return ops.apply_rope(x, *ops.rope_tables(positions, rot, theta))

    out = rope(x, theta)
    assert np.array_equal(out[0], x[0])  # position 0 rotates by nothing
    assert np.array_equal(out[:, :, rot:], x[:, :, rot:])  # dims 64.. untouched
    angle = positions[:, None, None] * theta ** (-np.arange(rot // 2) / (rot // 2))
    cos, sin = np.cos(angle), np.sin(angle)
    lo, hi = np.split(x[..., :rot].astype(np.float64), 2, axis=-1)  # pairs (i, i + 32)
    exact = np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin], -1)
    # Per element, to first order in bf16's unit roundoff u = 2^-8: cos/sin rounded to bf16 and each
    # product rounded, 2u|x cos| + 2u|y sin|; their sum rounded, u|exact|; the angles computed in fp32 (a
    # few roundings of up to `position` radians), position * 2^-22 * (|x| + |y|).
    u = 2.0 ** -8
    products = np.concatenate([np.abs(lo * cos) + np.abs(hi * sin), np.abs(hi * cos) + np.abs(lo * sin)], -1)
    angles = positions[:, None, None] * 2.0 ** -22 * np.tile(np.abs(lo) + np.abs(hi), 2)
    bound = u * (2 * products + np.abs(exact)) + angles

    def within_bound(rotated):
        return bool((np.abs(rotated[..., :rot] - exact) <= bound).all())

    assert within_bound(out)  # measured: the worst element at 0.58 of its bound (0.014 absolute)
    assert not within_bound(rope(x, 1e6))  # the wrong theta
    interleaved = np.r_[0:rot:2, 1:rot:2]  # the wrong pairs (2i, 2i + 1): rotate them as (i, i + 32)
    paired = rope(np.concatenate([x[..., interleaved], x[..., rot:]], -1), theta)
    wrong_pairs = out.copy()
    wrong_pairs[..., interleaved] = paired[..., :rot]
    assert not within_bound(wrong_pairs)


def test_attention_gqa_mapping_and_math(rng):
    heads, kv_heads, d, T = 12, 2, 256, 7
    q, keys, values = rand_bf16(rng, heads, d), rand_bf16(rng, T, kv_heads, d), rand_bf16(rng, T, kv_heads, d)
    out = ops.attend(q, keys, values, d ** -0.5)
    group = heads // kv_heads
    for h in range(heads):
        s = keys[:, h // group].astype(np.float64) @ q[h] / 16
        p = np.exp(s - s.max())
        p /= p.sum()
        exact = p @ values[:, h // group]
        assert np.abs(out[h] - exact).max() < 0.02 * np.abs(exact).max() + 0.02
    keys2 = keys.copy()
    keys2[:, 1] = rand_bf16(rng, T, d)  # kv head 1 serves query heads 6..11 only
    out2 = ops.attend(q, keys2, values, d ** -0.5)
    assert np.array_equal(out2[:6], out[:6]) and not np.array_equal(out2[6:], out[6:])


def test_output_gate_is_sigmoid(rng):
    o, g = rand_bf16(rng, 10), rand_bf16(rng, 10)
    exact = o.astype(np.float64) / (1 + np.exp(-g.astype(np.float64)))
    assert_within_ulps(ops.output_gate(o, g), exact, ulps=2)


def test_conv_step_is_a_causal_depthwise_conv(rng):
    C, K, T = 40, 4, 9
    w = rand_bf16(rng, C, 1, K, scale=0.3)
    xs = rand_bf16(rng, T, C)
    state = np.zeros((K - 1, C), np.float32)
    outs = []
    for t in range(T):
        y, state = gdn.conv_step(xs[t], state, w)
        outs.append(y)
    padded = np.concatenate([np.zeros((K - 1, C)), xs.astype(np.float64)])
    conv = np.stack([(padded[t:t + K] * w[:, 0, :].T).sum(0) for t in range(T)])  # tap K-1 = current
    exact = conv / (1 + np.exp(-conv))
    assert np.abs(np.stack(outs) - exact).max() <= 4 * bf16_ulp(np.abs(exact).max())
    assert np.array_equal(state, xs[-(K - 1):])  # raw pre-conv inputs, oldest first


def test_gates(rng):
    b, a = rand_bf16(rng, 6), rand_bf16(rng, 6)
    a_log, dt = np.log(np.linspace(1, 16, 6)).astype(np.float32), rand_bf16(rng, 6)
    beta, g = gdn.gates(b, a, a_log, dt)
    assert_within_ulps(beta, 1 / (1 + np.exp(-b.astype(np.float64))), ulps=1)
    exact_g = -np.exp(a_log.astype(np.float64)) * np.log1p(np.exp(a.astype(np.float64) + dt))
    assert np.allclose(g, exact_g, rtol=1e-5)


def delta_rule_f64(S, q, k, v, g, beta):
    S = S.copy()
    outs = []
    for t in range(len(q)):
        S *= np.exp(g[t])[:, None, None]
        m = np.einsum("hkv,hk->hv", S, k[t])
        S += np.einsum("hk,hv->hkv", k[t], (v[t] - m) * beta[t][:, None])
        outs.append(np.einsum("hkv,hk->hv", S, q[t]))
    return np.stack(outs), S


def random_gdn_inputs(rng, T, Hk=2, Hv=6, d=128):
    q, k = gdn.prepare_qk(rand_bf16(rng, T, Hk, d), rand_bf16(rng, T, Hk, d), Hv)
    v = rand_bf16(rng, T, Hv, d)
    g = -rng.uniform(0.001, 1.5, (T, Hv)).astype(np.float32)
    beta = bf16(rng.uniform(0, 1, (T, Hv)))
    return q, k, v, g, beta


def test_prepare_qk_maps_value_head_j_to_key_head_j_div_3(rng):
    q = rand_bf16(rng, 2, 128)
    k = rand_bf16(rng, 2, 128)
    qh, kh = gdn.prepare_qk(q, k, 6)
    x = q.astype(np.float64)
    expected = x / np.sqrt((x ** 2).sum(-1, keepdims=True) + 1e-6) / np.sqrt(128)
    assert np.allclose(qh, np.repeat(expected, 3, axis=0), rtol=1e-6)  # heads 0,1,2 <- key head 0
    assert np.allclose((kh.astype(np.float64) ** 2).sum(-1), 1, atol=1e-4)


def test_recurrent_step_matches_float64_delta_rule(rng):
    T, Hv, d = 20, 6, 128
    q, k, v, g, beta = random_gdn_inputs(rng, T)
    S = np.zeros((Hv, d, d), np.float32)
    outs = []
    for t in range(T):
        o, S = gdn.recurrent_step(S, q[t], k[t], v[t], g[t], beta[t])
        outs.append(o)
    exact_o, exact_S = delta_rule_f64(np.zeros((Hv, d, d)), q.astype(np.float64), k.astype(np.float64),
                                      v.astype(np.float64), g.astype(np.float64), beta.astype(np.float64))
    assert np.abs(S - exact_S).max() < 1e-5 * np.abs(exact_S).max()
    assert_within_ulps(np.stack(outs), exact_o, ulps=1, max_fraction=0.01)


@pytest.mark.parametrize("first_position, T", [(0, 150), (10, 100), (63, 2)])
def test_chunked_matches_sequential(first_position, T, rng):
    q, k, v, g, beta = random_gdn_inputs(rng, T)
    S0 = rng.standard_normal((6, 128, 128)).astype(np.float32) * 0.1
    o_chunk, S_chunk = gdn.chunked(S0, q, k, v, g, beta, first_position)
    S = S0
    seq = []
    for t in range(T):
        o, S = gdn.recurrent_step(S, q[t], k[t], v[t], g[t], beta[t])
        seq.append(o)
    seq = np.stack(seq)
    # fp32 in both forms; the chunked form reassociates sums and products (NUMERICS.md states the bound)
    assert np.abs(S_chunk - S).max() <= 1e-4 * np.abs(S).max()
    assert np.abs(o_chunk - seq).max() <= 2 * bf16_ulp(np.abs(seq).max())


def test_engine_gemv_pieces_do_not_depend_on_how_the_work_is_cut(rng):
    """What a tile computes (a row range, a block range) equals the same rows/blocks of the whole."""
    w = rng.standard_normal((384, 768)).astype(np.float32) * 0.02
    q, s = fp8.quantize(w)
    x = rand_bf16(rng, 768)
    w3 = q.astype(np.float32).reshape(384, 6, 128)
    whole = ops.block_partials(w3, x)
    assert np.array_equal(ops.block_partials(w3[128:256, 2:5], x[256:640]), whole[128:256, 2:5])
    scale = np.repeat(s.astype(np.float32), 128, axis=0)
    lin = ops.Linear(q, s, Mode.ENGINE, slices=3)
    by_slices = ops.combine_slices([ops.slice_sum(whole[:, 2 * i:2 * i + 2], scale[:, 2 * i:2 * i + 2])
                                    for i in range(3)])
    assert np.array_equal(lin.accumulate(x)[0], by_slices)
    assert not np.array_equal(ops.Linear(q, s, Mode.ENGINE, slices=1).accumulate(x)[0], by_slices)


def test_f16_operand_is_exact_within_2_to_the_32_of_the_block_top_and_rounds_below(rng):
    x = rand_bf16(rng, 384)
    x[128:256] = 0.0  # an all-zero block stays zero
    x[256] = bf16(np.float32(65000.0))  # already at f16's top binade: P = 0
    x16, unscale = ops.f16_operand(x)
    assert np.array_equal(x16 * np.repeat(unscale, 128), x)
    assert unscale[2] == 1.0 and not x16[128:256].any()
    assert np.abs(x16[:128]).max() >= 2.0 ** 15 and np.abs(x16).max() < 65504
    # negative control: a value 2^34 below its block's top loses bits to f16's subnormal grid
    y = x.copy()
    y[1] = np.float32(2.0 ** (np.floor(np.log2(np.abs(x[:128]).max())) - 34) * 1.9921875)  # 8 bits set
    y16, u = ops.f16_operand(y)
    assert y16[1] * u[0] != y[1]


def test_engine_sum_over_the_f16_operand_is_the_bf16_sum_when_the_operand_is_exact(rng):
    """Powers of two commute with fp32 rounding: an exact operand gives the plain engine sum bit for bit."""
    w = rng.standard_normal((256, 512)).astype(np.float32) * 0.02
    q, s = fp8.quantize(w)
    x = rand_bf16(rng, 512)
    w3 = q.astype(np.float32).reshape(256, 4, 128)
    scale = np.repeat(s.astype(np.float32), 128, axis=0)
    assert np.array_equal(ops.engine_slice_sum(w3, x, scale), ops.slice_sum(ops.block_partials(w3, x), scale))


def test_partitioned_attention_matches_attend_closely_and_handles_short_rows(rng):
    heads, kv_heads, d = 12, 2, 256
    for T in (1, 5, 31, 200):  # fewer keys than partitions leaves some partitions empty
        q, keys, values = rand_bf16(rng, heads, d), rand_bf16(rng, T, kv_heads, d), rand_bf16(rng, T, kv_heads, d)
        a = ops.attend(q, keys, values, d ** -0.5)
        b = ops.attend_partitioned(q, keys, values, d ** -0.5)
        assert np.isfinite(b).all()
        assert np.abs(a - b).max() <= 2 * bf16_ulp(np.abs(a).max()), T


def test_tiled_attention_is_the_one_partition_form_when_one_tile_covers_the_row(rng):
    heads, kv_heads, d = 12, 2, 256
    for T in (1, 40, 64):
        q, keys, values = rand_bf16(rng, heads, d), rand_bf16(rng, T, kv_heads, d), rand_bf16(rng, T, kv_heads, d)
        one = ops.attend_partitioned(q, keys, values, d ** -0.5, partitions=1)
        assert np.array_equal(ops.attend_tiled(q, keys, values, d ** -0.5, tile=64), one), T


def test_tiled_attention_folds_its_tiles_in_key_order_close_to_attend(rng):
    heads, kv_heads, d = 12, 2, 256
    q, keys, values = rand_bf16(rng, heads, d), rand_bf16(rng, 200, kv_heads, d, scale=4.0), rand_bf16(rng, 200, kv_heads, d)
    a = ops.attend(q, keys, values, d ** -0.5)
    b = ops.attend_tiled(q, keys, values, d ** -0.5)
    assert np.abs(a - b).max() <= 2 * bf16_ulp(np.abs(a).max())
    scores = ops.attention_scores(q[:6], keys[:, 0, :], d ** -0.5)
    m, total = ops.online_stats(scores, 64)
    assert np.array_equal(m, scores.max(axis=1))
    exact = np.exp(scores.astype(np.float64) - m[:, None]).sum(axis=1)
    assert np.abs(total - exact).max() <= 1e-5 * exact.max()
    # the fold is an order of its own: the tile size shows in the sums' last bits
    sums = [ops.online_stats(scores, t)[1] for t in (8, 64, 200)]
    assert not (np.array_equal(sums[0], sums[1]) and np.array_equal(sums[1], sums[2]))


def _correctly_rounded_f32(y: np.float32, exact) -> bool:
    """y is the fp32 value nearest `exact` (a Fraction), ties to the even significand."""
    from fractions import Fraction

    here = abs(Fraction(float(y)) - exact)
    for other in (np.nextafter(y, np.float32(-np.inf)), np.nextafter(y, np.float32(np.inf))):
        there = abs(Fraction(float(other)) - exact)
        if there < here or (there == here and np.float32(y).view(np.uint32) & 1):
            return False
    return True


def test_fma32_rounds_once_as_the_device_fma_does(rng):
    """ops.fma32 against the exact a x b + c (Fractions) on random operands, on operands whose sum needs many
    binades and on results in fp32's subnormal range."""
    from fractions import Fraction

    a = rng.standard_normal(2000).astype(np.float32)
    b = (rng.standard_normal(2000) * 2.0 ** rng.integers(-40, 40, 2000)).astype(np.float32)
    c = (rng.standard_normal(2000) * 2.0 ** rng.integers(-40, 40, 2000)).astype(np.float32)
    tiny = (rng.standard_normal(200) * 2.0 ** -140).astype(np.float32)  # subnormal results
    a, b, c = np.concatenate([a, a[:200]]), np.concatenate([b, np.full(200, 2.0 ** -10, np.float32)]), \
        np.concatenate([c, tiny])
    y = ops.fma32(a, b, c)
    assert y.dtype == np.float32
    for i in range(len(y)):
        assert _correctly_rounded_f32(y[i], Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))), i


def test_fma32_has_no_double_rounding_where_float64_then_float32_has():
    """Negative control: a x b + c just below an fp32 half-way point whose float64 sum lands on it."""
    a = np.float32(1 + 2.0 ** -23)
    b = np.float32((1 - 2.0 ** -23) * 2.0 ** -24)  # a x b = 2^-24 - 2^-70
    c = np.float32(1 + 2.0 ** -23)  # odd significand: the tie goes up
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == np.float32(1 + 2.0 ** -22)  # twice rounded
    assert ops.fma32(a, b, c) == c  # the exact value is below the half-way point


def test_fused_slice_sum_is_one_fma_a_block_and_differs_from_three_roundings(rng):
    partials = (rng.standard_normal((256, 6)) * 100).astype(np.float32)
    scale = (rng.random((256, 6)) * 1e-3).astype(np.float32)
    unscale = np.ldexp(np.float32(1), -rng.integers(0, 20, 6)).astype(np.float32)
    acc = np.zeros(256, np.float32)
    for b in range(6):
        acc = ops.fma32(partials[:, b], scale[:, b] * unscale[b], acc)
    fused = ops.slice_sum(partials, scale, unscale, fused=True)
    assert np.array_equal(fused, acc)
    assert not np.array_equal(fused, ops.slice_sum(partials, scale, unscale))
