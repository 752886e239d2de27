import math

import ml_dtypes
import numpy as np
import pytest

from megakernel.model import fp8, synthetic
from megakernel.model.config import preset
from megakernel.errors import ConfigError
from megakernel.model.synthetic import normalish, parse_synthetic, random_words, synthesize, tensor_key
from megakernel.model.tensors import INIT_CONV, INIT_LINEAR, INIT_NORM_1P, INIT_NORM_PLAIN, scale_name, tensor_specs

MASK64 = (1 << 64) - 1


def philox4x64_10(counter: int, key: int) -> list[int]:
    """Random123 Philox4x64-10 in plain Python: the algorithm a GPU port of the generator implements."""
    x = [counter & MASK64, 0, 0, 0]
    k0, k1 = key & MASK64, key >> 64
    for _ in range(10):
        p0, p1 = 0xD2E7470EE14C6C93 * x[0], 0xCA5A826395121157 * x[2]
        x = [(p1 >> 64) ^ x[1] ^ k0, p1 & MASK64, (p0 >> 64) ^ x[3] ^ k1, p0 & MASK64]
        k0, k1 = (k0 + 0x9E3779B97F4A7C15) & MASK64, (k1 + 0xBB67AE8584CAA73B) & MASK64
    return x


@pytest.mark.parametrize("start", [0, 1, 3, 4, 1001, 123_456_789])
def test_random_words_follow_the_documented_philox_contract(start):
    key = tensor_key(7, "model.language_model.layers.0.mlp.up_proj.weight")
    words = random_words(key, start, 9)
    expected = [philox4x64_10(i // 4 + 1, key)[i % 4] for i in range(start, start + 9)]
    assert [int(w) for w in words] == expected


def test_normalish_is_the_documented_integer_sum():
    words = np.array([0x0001_0002_0003_0004, 0xFFFF_FFFF_FFFF_FFFF, 0], dtype=np.uint64)
    c = np.float32(0.02 / synthetic.IRWIN_HALL_STD)
    expected = np.array([10 - 131070, 4 * 65535 - 131070, -131070], dtype=np.float32) * c
    assert np.array_equal(normalish(words, 0.0, 0.02), expected)


def test_elements_do_not_depend_on_chunking(monkeypatch):
    c = preset("tiny")
    specs = {s.name: s for s in tensor_specs(c)}
    names = ["model.language_model.layers.0.linear_attn.in_proj_qkv.weight", "model.language_model.norm.weight",
             "model.language_model.layers.0.linear_attn.conv1d.weight"]
    whole = {n: synthesize(specs[n], 3) for n in names}
    monkeypatch.setattr(synthetic, "CHUNK_ELEMENTS", 1000)
    for n in names:
        chunked = synthesize(specs[n], 3)
        assert whole[n].keys() == chunked.keys()
        for k in chunked:
            assert whole[n][k].tobytes() == chunked[k].tobytes(), k


def test_seed_and_name_change_the_bytes():
    c = preset("tiny")
    spec = next(s for s in tensor_specs(c) if s.name.endswith("layers.1.mlp.down_proj.weight"))
    a, b, other_seed = synthesize(spec, 0), synthesize(spec, 0), synthesize(spec, 1)
    assert a[spec.name].tobytes() == b[spec.name].tobytes()
    assert a[spec.name].tobytes() != other_seed[spec.name].tobytes()
    assert tensor_key(0, "a") != tensor_key(0, "b") and tensor_key(0, "a") != tensor_key(1, "a")


def test_statistics_are_reasonable(tiny_weights):
    c = tiny_weights.config
    for spec in tensor_specs(c):
        if spec.is_scale:
            continue
        t = tiny_weights[spec.name]
        v = fp8.dequantize(*tiny_weights.fp8(spec.name)) if spec.is_fp8 else t.astype(np.float32)
        if spec.init in (INIT_LINEAR, INIT_CONV, INIT_NORM_1P, INIT_NORM_PLAIN) and v.size >= 4096:
            mean, std = synthetic.NORMAL_INIT[spec.init]
            assert abs(v.mean() - mean) < 0.05 * std + 1e-3, spec.name
            assert abs(v.std() / std - 1) < 0.05, spec.name
        if spec.name.endswith("A_log"):
            assert np.all((v >= 0) & (v <= math.log(16) + 0.02))
        if spec.name.endswith("dt_bias"):
            dt = np.log1p(np.exp(v))  # softplus
            assert np.all((dt > 0.9e-3) & (dt < 0.11))


def test_fp8_weights_are_block_quantised_to_amax(tiny_weights):
    name = "model.language_model.layers.3.self_attn.q_proj.weight"
    q, s = tiny_weights.fp8(name)
    assert q.dtype == ml_dtypes.float8_e4m3fn and s.dtype == ml_dtypes.bfloat16
    assert s.shape == (q.shape[0] // 128, q.shape[1] // 128)
    spec = next(x for x in tensor_specs(tiny_weights.config) if x.name == name)
    raw = synthetic._float_values(spec, 0, 0, spec.numel).reshape(spec.shape)
    amax = np.abs(raw.reshape(s.shape[0], 128, s.shape[1], 128)).max(axis=(1, 3))
    assert np.array_equal(s, (amax / np.float32(448)).astype(ml_dtypes.bfloat16))
    qf = q.astype(np.float32)
    assert np.abs(qf).max() <= 448 and np.abs(qf).max() >= 400
    deq = fp8.dequantize(q, s)
    big = np.abs(raw) > 16 * np.repeat(np.repeat(s.astype(np.float32), 128, 0), 128, 1)  # normal e4m3 range
    rel = np.abs(deq - raw)[big] / np.abs(raw)[big]
    assert rel.max() <= 2.0**-4 + 2.0**-8  # 3 mantissa bits (+ bf16 scale rounding)


def test_pow2_scales_make_bf16_dequantisation_exact():
    c = preset("tiny")
    spec = next(s for s in tensor_specs(c) if s.name.endswith("layers.0.mlp.gate_proj.weight"))
    out = synthesize(spec, 0, pow2_scales=True)
    q, s = out[spec.name], out[scale_name(spec.name)]
    sf = s.astype(np.float32)
    assert np.all(np.frexp(sf)[0] == 0.5)  # powers of two
    deq = fp8.dequantize(q, s)
    assert np.array_equal(deq.astype(ml_dtypes.bfloat16).astype(np.float32), deq)
    default = synthesize(spec, 0)[scale_name(spec.name)].astype(np.float32)
    assert np.all(sf >= default) and np.all(sf < 2 * default * 1.01)


def test_quantize_saturates_instead_of_nan():
    w = np.full((128, 128), 0.01, dtype=np.float32)
    w[0, 0] = 1.0 + 2.0**-9  # amax/448 rounds down in bf16, so w/scale would exceed 448
    q, s = fp8.quantize(w)
    assert np.isfinite(q.astype(np.float32)).all() and q.astype(np.float32).max() == 448


def test_parse_synthetic():
    assert parse_synthetic("some/dir") is None
    config, seed = parse_synthetic("synthetic:tiny:5")
    assert config.name == "tiny" and seed == 5
    assert parse_synthetic("synthetic:qwen3.5-27b")[1] == 0
    for bad in ["synthetic:", "synthetic:tiny:x", "synthetic:tiny:1:2", "synthetic:huge"]:
        with pytest.raises(ConfigError):
            parse_synthetic(bad)
