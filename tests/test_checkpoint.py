import json
import mmap
import os
import shutil

import ml_dtypes
import numpy as np
import pytest

from checkpoint_tools import edit_json, micro_config, rewrite_shard, shard_of
from megakernel.checkpoint import INDEX_FILE, load_checkpoint
from megakernel.checkpoint_writer import save_checkpoint, write_synthetic_checkpoint
from megakernel.config import load_config, preset
from megakernel.errors import CheckpointError, ConfigError
from megakernel.synthetic import synthetic_weights
from megakernel.tensors import BF16, F8, layer_prefix, tensor_specs

NORM = layer_prefix(0) + "input_layernorm.weight"
QKV = layer_prefix(0) + "linear_attn.in_proj_qkv.weight"
A_LOG = layer_prefix(0) + "linear_attn.A_log"


def assert_same_tensors(loaded, expected):
    assert loaded.tensors.keys() == expected.tensors.keys()
    for name, t in expected.tensors.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape, name
        assert loaded[name].tobytes() == t.tobytes(), name


@pytest.fixture(scope="module")
def micro_weights():
    return synthetic_weights(micro_config(), seed=11)


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory, micro_weights):
    out = str(tmp_path_factory.mktemp("ckpt") / "micro")
    save_checkpoint(micro_weights, out, shard_bytes=1 << 20)  # several shards + index
    return out


@pytest.fixture
def broken(tmp_path, good_dir):
    """A fresh copy of the good micro checkpoint, to break in one test."""
    path = str(tmp_path / "broken")
    shutil.copytree(good_dir, path)
    return path


def test_tiny_make_then_load_round_trip(tmp_path, tiny_weights):
    out = str(tmp_path / "tiny")
    write_synthetic_checkpoint(out, preset("tiny"), seed=0, shard_bytes=96 << 20)
    files = sorted(os.listdir(out))
    assert INDEX_FILE in files and "config.json" in files and "tokenizer.json" in files
    assert sum(f.endswith(".safetensors") for f in files) == 4  # embed | layers | lm_head | mtp
    with open(os.path.join(out, INDEX_FILE)) as f:
        assert json.load(f)["metadata"]["total_size"] == sum(s.nbytes for s in tensor_specs(preset("tiny")))
    loaded = load_checkpoint(out)
    assert loaded.config.eos_token_ids == (248046, 248044)
    assert_same_tensors(loaded, tiny_weights)


def test_loaded_tensors_are_read_only_memory_maps(good_dir):
    w = load_checkpoint(good_dir)
    t = w[QKV]
    assert not t.flags.writeable
    base = t
    while getattr(base, "base", None) is not None:
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)


def test_single_file_and_config_round_trip(tmp_path, micro_weights):
    out = str(tmp_path / "single")
    save_checkpoint(micro_weights, out)
    assert "model.safetensors" in os.listdir(out) and INDEX_FILE not in os.listdir(out)
    assert load_config(out).hidden_size == micro_weights.config.hidden_size
    assert_same_tensors(load_checkpoint(out), micro_weights)


def test_flat_text_naming_loads_to_canonical_names(tmp_path, micro_weights):
    out = str(tmp_path / "flat")
    save_checkpoint(micro_weights, out, shard_bytes=1 << 20,
                    rename=lambda n: n.replace("model.language_model.", "model."))
    with open(os.path.join(out, INDEX_FILE)) as f:
        assert "model.layers.0.input_layernorm.weight" in json.load(f)["weight_map"]
    assert_same_tensors(load_checkpoint(out), micro_weights)


def test_vision_tensors_are_ignored(broken):
    rewrite_shard(shard_of(broken, NORM), lambda t: t.update({"model.visual.blocks.0.w": np.zeros(4, np.float32)}))
    edit_json(os.path.join(broken, INDEX_FILE),
              lambda j: j["weight_map"].update({"model.visual.blocks.0.w": os.path.basename(shard_of(broken, NORM))}))
    assert NORM in load_checkpoint(broken).tensors


def test_hf_cache_symlinked_shards_load(tmp_path, good_dir):
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for i, name in enumerate(sorted(os.listdir(good_dir))):
        shutil.copy(os.path.join(good_dir, name), blobs / f"blob{i}")
        os.symlink(blobs / f"blob{i}", snapshot / name)
    assert load_checkpoint(str(snapshot))[NORM].shape == (256,)


def test_fp32_scales_and_fp32_A_log_are_accepted(broken):
    scale = QKV + "_scale_inv"
    def widen(t):
        t[scale] = t[scale].astype(np.float32)
    rewrite_shard(shard_of(broken, scale), widen)
    rewrite_shard(shard_of(broken, A_LOG), lambda t: t.update({A_LOG: t[A_LOG].astype(np.float32)}))
    w = load_checkpoint(broken)
    assert w[scale].dtype == np.float32 and w[A_LOG].dtype == np.float32


# --- bad input: each case must give one CheckpointError naming what is wrong --------------------------
def set_value(name, index, value):
    def mutate(t):
        a = t[name].astype(np.float32)
        a[index] = value
        t[name] = a.astype(t[name].dtype)
    return mutate


BAD_TENSOR_CASES = {
    "wrong dtype (bf16 tensor stored as f32)": (NORM, lambda t: t.update({NORM: t[NORM].astype(np.float32)}),
                                                 "dtype F32, expected BF16"),
    "wrong dtype (fp8 weight stored as bf16)": (QKV, lambda t: t.update({QKV: t[QKV].astype(ml_dtypes.bfloat16)}),
                                                 "dtype BF16, expected F8_E4M3"),
    "wrong shape": (NORM, lambda t: t.update({NORM: t[NORM][:128]}), r"shape \[128\], expected \[256\]"),
    "NaN scale": (QKV + "_scale_inv", set_value(QKV + "_scale_inv", (1, 0), np.nan), r"block scale nan at block \[1, 0\]"),
    "zero scale": (QKV + "_scale_inv", set_value(QKV + "_scale_inv", (0, 1), 0.0), "finite and positive"),
    "negative scale": (QKV + "_scale_inv", set_value(QKV + "_scale_inv", (2, 1), -0.5), "block scale -0.5"),
    "infinite scale": (QKV + "_scale_inv", set_value(QKV + "_scale_inv", (0, 0), np.inf), "block scale inf"),
    "NaN in a bf16 norm": (NORM, set_value(NORM, 7, np.nan), r"non-finite value at \[7\]"),
    "NaN in an fp8 payload": (QKV, set_value(QKV, (5, 9), np.nan), r"non-finite value at \[5, 9\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_TENSOR_CASES))
def test_bad_tensor_is_refused_with_its_name_and_file(broken, case):
    name, mutate, message = BAD_TENSOR_CASES[case]
    shard = shard_of(broken, name)
    rewrite_shard(shard, mutate)
    with pytest.raises(CheckpointError, match=message) as e:
        load_checkpoint(broken)
    assert name in str(e.value) and os.path.basename(shard) in str(e.value)


def test_missing_tensor(broken):
    rewrite_shard(shard_of(broken, NORM), lambda t: t.pop(NORM))
    edit_json(os.path.join(broken, INDEX_FILE), lambda j: j["weight_map"].pop(NORM))
    with pytest.raises(CheckpointError, match=f"missing tensor '{NORM}'"):
        load_checkpoint(broken)


def test_tensor_listed_in_index_but_absent_from_shard(broken):
    rewrite_shard(shard_of(broken, NORM), lambda t: t.pop(NORM))
    with pytest.raises(CheckpointError, match="the index lists it but the file does not contain it"):
        load_checkpoint(broken)


def test_missing_shard(broken):
    shard = shard_of(broken, QKV)
    os.remove(shard)
    with pytest.raises(CheckpointError, match=f"{os.path.basename(shard)}: file not found"):
        load_checkpoint(broken)


@pytest.mark.parametrize("keep", [0.5, 0.999, 4])
def test_truncated_shard(broken, keep):
    shard = shard_of(broken, QKV)
    size = os.path.getsize(shard)
    with open(shard, "r+b") as f:
        f.truncate(int(size * keep) if keep < 1 else keep)
    with pytest.raises(CheckpointError, match=f"{os.path.basename(shard)}: not a valid safetensors file"):
        load_checkpoint(broken)


def test_tensor_the_config_does_not_know(broken):
    extra = layer_prefix(8) + "input_layernorm.weight"  # micro has 8 layers: 0..7
    rewrite_shard(shard_of(broken, NORM), lambda t: t.update({extra: t[NORM].copy()}))
    edit_json(os.path.join(broken, INDEX_FILE),
              lambda j: j["weight_map"].update({extra: os.path.basename(shard_of(broken, NORM))}))
    with pytest.raises(CheckpointError, match="not part of the model that config.json describes"):
        load_checkpoint(broken)


def test_config_that_does_not_match_the_tensors(broken):
    edit_json(os.path.join(broken, "config.json"), lambda j: j["text_config"].update(intermediate_size=768))
    with pytest.raises(CheckpointError, match=r"shape \[768, 256\], expected|shape \[512, 256\], expected \[768"):
        load_checkpoint(broken)


def test_missing_config_field(broken):
    edit_json(os.path.join(broken, "config.json"), lambda j: j["text_config"].pop("linear_conv_kernel_dim"))
    with pytest.raises(ConfigError, match="linear_conv_kernel_dim"):
        load_checkpoint(broken)


def test_index_may_not_point_outside_the_directory(broken):
    edit_json(os.path.join(broken, INDEX_FILE), lambda j: j["weight_map"].update({NORM: "../elsewhere.safetensors"}))
    with pytest.raises(CheckpointError, match="not a plain file name"):
        load_checkpoint(broken)


def test_malformed_index(broken):
    with open(os.path.join(broken, INDEX_FILE), "w") as f:
        f.write('{"weight_map": ')
    with pytest.raises(CheckpointError, match="malformed index"):
        load_checkpoint(broken)


def test_no_weights_at_all(tmp_path, good_dir):
    shutil.copy(os.path.join(good_dir, "config.json"), tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="no model.safetensors or model.safetensors.index.json"):
        load_checkpoint(str(tmp_path))


def test_writer_refuses_a_non_empty_directory_and_leaves_nothing_on_failure(tmp_path, micro_weights):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("precious")
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        save_checkpoint(micro_weights, str(occupied))
    assert os.listdir(occupied) == ["keep.txt"]

    partial = dict(micro_weights.tensors)
    del partial[QKV]  # the writer fails half way through
    broken_set = type(micro_weights)(micro_weights.config, partial, "test")
    with pytest.raises(KeyError):
        save_checkpoint(broken_set, str(tmp_path / "never"), shard_bytes=1 << 20)
    assert sorted(os.listdir(tmp_path)) == ["occupied"]


def test_manifest_dtypes_match_the_fp8_release():
    specs = tensor_specs(preset("qwen3.5-27b"))
    fp8 = [s for s in specs if s.dtype == F8]
    assert len(fp8) == 48 * 6 + 16 * 7 + 7 == 407  # SPEC 2.5
    assert all(any(t.name == s.name + "_scale_inv" and t.dtype == BF16 for t in specs) for s in fp8)
    assert len([s for s in specs if s.name.startswith("mtp.")]) == 22
    per_layer = [sum(s.name.startswith(layer_prefix(i)) for s in specs) for i in (0, 3)]
    assert per_layer == [20, 18]
