"""The GPU generator (megakernel/runtime/gpu_synthetic.py + cuda/synthetic.cu) makes the CPU generator's bytes.

GPU arrays hold raw bits (uint16 for bf16, uint8 for e4m3); the CPU arrays are ml_dtypes, so the
comparisons are of raw bytes, which also pins the dtype widths and shapes.
"""

import time

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from megakernel.model import fp8, synthetic
from megakernel.runtime import gpu_synthetic  # noqa: E402
from megakernel.model.config import preset  # noqa: E402
from megakernel.runtime.gpu_synthetic import bf16_range_gpu, synthesize_gpu, synthetic_tensors_gpu  # noqa: E402
from megakernel.model.tensors import EMBED, LM_HEAD, scale_name, tensor_specs  # noqa: E402

BIG = "qwen3.5-27b"


def assert_same_bytes(gpu, cpu: np.ndarray, what: str) -> None:
    assert isinstance(gpu, cupy.ndarray), what
    assert gpu.dtype == gpu_synthetic.RAW_DTYPES.get(cpu.dtype, cpu.dtype), (what, gpu.dtype, cpu.dtype)
    assert gpu.shape == cpu.shape, (what, gpu.shape, cpu.shape)
    got = cupy.asnumpy(gpu)
    if got.tobytes() != np.ascontiguousarray(cpu).tobytes():
        flat_got, flat_cpu = got.reshape(-1), np.ascontiguousarray(cpu).reshape(-1).view(got.dtype)
        bad = np.flatnonzero(flat_got != flat_cpu)
        pytest.fail(f"{what}: {bad.size} of {flat_got.size} elements differ, first at {bad[:8].tolist()}: "
                    f"gpu {flat_got[bad[:8]].tolist()} cpu {flat_cpu[bad[:8]].tolist()}")


def specs_by_name(preset_name: str):
    return {s.name: s for s in tensor_specs(preset(preset_name))}


@pytest.mark.parametrize("seed,pow2", [(0, False), (0, True), (5, False)])
def test_tiny_preset_is_byte_identical_to_the_cpu_generator(seed, pow2):
    config = preset("tiny")
    cpu = list(synthetic.synthetic_tensors(config, seed, pow2))
    gpu = list(synthetic_tensors_gpu(config, seed, pow2))
    assert [name for name, _ in gpu] == [name for name, _ in cpu]  # names and manifest order
    for (name, g), (_, c) in zip(gpu, cpu):
        assert_same_bytes(g, c, name)


@pytest.mark.slow
@pytest.mark.parametrize("name,pow2", [
    ("model.language_model.layers.0.linear_attn.in_proj_qkv.weight", False),
    ("model.language_model.layers.3.self_attn.q_proj.weight", False),
    ("model.language_model.layers.0.mlp.down_proj.weight", False),
    ("model.language_model.layers.0.mlp.down_proj.weight", True),
    ("mtp.fc.weight", False),
    ("model.language_model.layers.0.linear_attn.in_proj_a.weight", False),
    ("model.language_model.layers.0.linear_attn.conv1d.weight", False),
    ("model.language_model.layers.0.linear_attn.norm.weight", False),
    ("model.language_model.layers.0.linear_attn.A_log", False),
    ("model.language_model.norm.weight", False),
])
def test_27b_tensors_are_byte_identical_to_the_cpu_generator(name, pow2):
    spec = specs_by_name(BIG)[name]
    cpu = synthetic.synthesize(spec, 0, pow2)
    gpu = synthesize_gpu(spec, 0, pow2)
    assert gpu.keys() == cpu.keys()
    for k in cpu:
        assert_same_bytes(gpu[k], cpu[k], k)


def _cpu_bf16_range(spec, seed, start, count):
    mean, std = synthetic.NORMAL_INIT[spec.init]
    words = synthetic.random_words(synthetic.tensor_key(seed, spec.name), start, count)
    return synthetic.normalish(words, mean, std).astype(fp8.BF16)


@pytest.mark.slow
def test_last_rows_of_the_27b_lm_head():
    """The whole 2.5 GB table on the GPU (element indices past 2^30); its last 320 rows on the CPU."""
    spec = specs_by_name(BIG)[LM_HEAD]
    rows, cols = spec.shape
    gpu = synthesize_gpu(spec, 0)[LM_HEAD]
    r0 = rows - 320
    assert_same_bytes(gpu[r0:], _cpu_bf16_range(spec, 0, r0 * cols, 320 * cols).reshape(320, cols), "lm_head tail")
    assert_same_bytes(gpu[:2], _cpu_bf16_range(spec, 0, 0, 2 * cols).reshape(2, cols), "lm_head head")
    del gpu


@pytest.mark.parametrize("start", [0, 1, 2, 3, 4, 5, 1001, 248000 * 5120 + 3])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 4099])
def test_element_ranges_at_every_alignment(start, count):
    spec = specs_by_name(BIG)[EMBED]
    assert_same_bytes(bf16_range_gpu(spec, 3, start, count), _cpu_bf16_range(spec, 3, start, count),
                      f"embed[{start}:{start + count}]")


def test_seed_and_name_change_the_bytes_and_repeats_do_not():
    specs = specs_by_name("tiny")
    name = next(n for n in specs if n.endswith("layers.1.mlp.down_proj.weight"))
    a, b, other = synthesize_gpu(specs[name], 0), synthesize_gpu(specs[name], 0), synthesize_gpu(specs[name], 1)
    assert cupy.array_equal(a[name], b[name]) and cupy.array_equal(a[scale_name(name)], b[scale_name(name)])
    assert not cupy.array_equal(a[name], other[name])
    up = name.replace("down_proj", "up_proj")
    assert specs[up].shape[::-1] == specs[name].shape  # the transpose: compare the same byte count
    assert cupy.asnumpy(synthesize_gpu(specs[up], 0)[up]).tobytes() != cupy.asnumpy(a[name]).tobytes()


@pytest.mark.slow
def test_every_27b_tensor_generates_on_the_gpu(capsys):
    """Every 27B tensor once, each checksummed and freed (about 30 GB in all); prints the GB/s, asserts no time."""
    pool = cupy.get_default_memory_pool()
    config = preset(BIG)
    synthesize_gpu(tensor_specs(config)[1], 0)  # compile (and warm up) outside the timed region
    cupy.cuda.Device().synchronize()
    total_bytes, checksum, count = 0, 0, 0
    t0 = time.perf_counter()
    for _, array in synthetic_tensors_gpu(config, 0):
        total_bytes += array.nbytes
        checksum ^= int(array.view(cupy.uint8).sum(dtype=cupy.uint64))  # also syncs: the work is done
        count += 1
        del array
    seconds = time.perf_counter() - t0
    pool.free_all_blocks()
    with capsys.disabled():
        print(f"\n27B synthetic weights on the GPU: {count} tensors, {total_bytes / 1e9:.2f} GB in "
              f"{seconds:.2f} s = {total_bytes / 1e9 / seconds:.1f} GB/s (checksum {checksum:#x})")
    assert total_bytes > 29e9


def test_the_three_way_with_weights_made_on_the_gpu_is_the_same_bit_for_bit():
    """exact_distance.py --weights-on-gpu (the 27B three-way's layers made by this generator and brought to the
    host: gpu_synthetic.synthesize_on_host, rows_on_host) gives the figures of the CPU generator's weights, on
    both scale rules."""
    from checkpoint_tools import micro_config
    from experiment_tools import load_experiment

    ed = load_experiment("exact_distance")
    c, prompts = micro_config(), [[5, 1707, 9, 77], [12, 3]]
    for pow2 in (False, True):
        cpu = ed.streamed_trajectories(c, 3, pow2, prompts, workers=2, at_once=True)
        gpu = ed.streamed_trajectories(c, 3, pow2, prompts, workers=2, at_once=True, on_gpu=True)
        assert ed.score(c, *gpu, None) == ed.score(c, *cpu, None)
        for mode in ed.MODES:
            for (logits, layers), (g_logits, g_layers) in zip(cpu[0][mode], gpu[0][mode]):
                assert np.array_equal(logits, g_logits) and all(map(np.array_equal, layers, g_layers)), (pow2, mode)
