import ast
import hashlib
import json
import mmap
import os
import pathlib
import shutil
import struct

import ml_dtypes
import numpy as np
import pytest

from checkpoint_tools import edit_json, micro_config, rewrite_shard, shard_of
from megakernel.model.checkpoint import INDEX_FILE, SafetensorsFile, load_checkpoint
from megakernel.model.checkpoint_writer import save_checkpoint, write_synthetic_checkpoint
from megakernel.model.config import load_config, preset
from megakernel.errors import CheckpointError, ConfigError
from megakernel.model.synthetic import synthetic_weights
from megakernel.model.tensors import BF16, F8, layer_prefix, tensor_specs
from megakernel.model.tokenizer import load_tokenizer

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


def test_hf_cache_with_relative_symlinks_loads_the_same_tensors(tmp_path, good_dir, micro_weights):
    """The real cache layout: snapshots/<rev>/<file> -> ../../blobs/<sha256>, config.json included."""
    repo = tmp_path / "models--Qwen--micro"
    blobs, revision = repo / "blobs", "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / revision
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    names = sorted(os.listdir(good_dir))
    for name in names:
        data = pathlib.Path(good_dir, name).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        (blobs / sha).write_bytes(data)
        os.symlink(f"../../blobs/{sha}", snapshot / name)
    assert "config.json" in names and sum(n.endswith(".safetensors") for n in names) > 1
    assert all(os.readlink(snapshot / n).startswith("../../blobs/") for n in names)
    assert_same_tensors(load_checkpoint(str(snapshot)), micro_weights)
    assert_same_tensors(load_checkpoint(snapshot), load_checkpoint(good_dir))


def test_paths_with_shell_metacharacters_are_only_paths(tmp_path, good_dir, micro_weights):
    odd = tmp_path / "a b;$(touch pwned)`touch pwned2`'\"*"
    shutil.copytree(good_dir, odd)
    assert_same_tensors(load_checkpoint(str(odd)), micro_weights)
    assert sorted(os.listdir(tmp_path)) == [odd.name] and not os.path.exists("pwned")


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


# --- a shard that is not a well-formed safetensors file ----------------------------------------------------
def safetensors_bytes(header, data=b"", length=None):
    """A hand-made .safetensors file: 8-byte little-endian header length, header, data. `header` may be a
    dict (JSON-encoded) or raw bytes; `length` overrides the header length field."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def f32(shape, begin, end):
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


def write_bytes(data):
    return lambda path: pathlib.Path(path).write_bytes(data)


GOOD = {"a": f32([2], 0, 8)}
BAD_FILE_CASES = {
    "header length larger than the file": (write_bytes(safetensors_bytes(GOOD, bytes(8), length=1000)),
                                           r"header length field says 1000 bytes, the file has \d+ after it"),
    "header length 2**62": (write_bytes(safetensors_bytes(GOOD, bytes(8), length=2**62)),
                            f"header length field says {2**62} bytes"),
    "header not JSON": (write_bytes(safetensors_bytes(b'{"a": {"dtype": "F32",')), "header is not valid JSON"),
    "header JSON not an object": (write_bytes(safetensors_bytes(b"[1, 2, 3]")),
                                  "header is a JSON list, expected an object"),
    "header not UTF-8": (write_bytes(safetensors_bytes(b'{"\xff\xfe": {}}')), r"header is not UTF-8 \(byte 2"),
    "header entry not a tensor": (write_bytes(safetensors_bytes({"a": 5})),
                                  "tensor 'a' is not an object with dtype, shape and data_offsets"),
    "tensor name twice": (write_bytes(safetensors_bytes(b'{"a": {}, "a": {}}')), "header names 'a' twice"),
    "data_offsets past the end": (write_bytes(safetensors_bytes({"a": f32([4], 0, 16)}, bytes(8))),
                                  r"tensor 'a': data_offsets \[0, 16\] point past the end of the file"),
    "data_offsets disagree with dtype x shape": (write_bytes(safetensors_bytes({"a": f32([3], 0, 8)}, bytes(8))),
                                                 r"tensor 'a': F32 \[3\] takes 12 bytes but data_offsets "
                                                 r"\[0, 8\] span 8"),
    "overlapping tensors": (write_bytes(safetensors_bytes({"a": f32([2], 0, 8), "b": f32([2], 4, 12)}, bytes(12))),
                            r"tensors 'a' and 'b' overlap \(bytes 4..8\)"),
    "bytes that belong to no tensor": (write_bytes(safetensors_bytes(GOOD, bytes(12))),
                                       "data bytes 8..12 belong to no tensor"),
    "empty file": (write_bytes(b""), "0 bytes, shorter than the 8-byte header length"),
    "a directory": (os.mkdir, "is a directory, expected a safetensors file"),
    "a dangling symlink": (lambda path: os.symlink("../blobs/never-downloaded", path),
                           r"dangling symlink \(its target \.\./blobs/never-downloaded does not exist\)"),
}


@pytest.mark.parametrize("layout", ["sharded", "single file"])
@pytest.mark.parametrize("case", sorted(BAD_FILE_CASES))
def test_malformed_safetensors_file_is_refused_in_one_clear_line(tmp_path, broken, case, layout):
    make, message = BAD_FILE_CASES[case]
    if layout == "sharded":
        checkpoint, shard = broken, shard_of(broken, QKV)  # the other shards are intact
        os.remove(shard)
    else:
        checkpoint = str(tmp_path / "single")
        os.mkdir(checkpoint)
        shutil.copy(os.path.join(broken, "config.json"), checkpoint)
        shard = os.path.join(checkpoint, "model.safetensors")
    make(shard)
    with pytest.raises(CheckpointError, match=message) as e:
        load_checkpoint(checkpoint)
    text = str(e.value)
    assert text.startswith(shard + ": ") and "\n" not in text, text
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)  # no chain


def test_hand_made_safetensors_helper_makes_a_valid_file(tmp_path):
    """The bad-file cases above differ from this valid file in one defect each."""
    path = tmp_path / "ok.safetensors"
    path.write_bytes(safetensors_bytes({"__metadata__": {"format": "pt"}, **GOOD}, np.arange(2, dtype="<f4").tobytes()))
    f = SafetensorsFile(str(path))
    assert list(f.entries) == ["a"] and f.array("a").tolist() == [0.0, 1.0]


@pytest.mark.parametrize("make", [os.mkdir, lambda p: os.symlink("missing.json", p)], ids=["directory", "dangling"])
def test_unreadable_index_is_refused(broken, make):
    index = os.path.join(broken, INDEX_FILE)
    os.remove(index)
    make(index)
    with pytest.raises(CheckpointError, match=f"^{index}: (is a directory|dangling symlink)"):
        load_checkpoint(broken)


@pytest.mark.parametrize("content", [b'{"model": ', b"{}", b"[1, 2]", b"\xff\xfe", b""],
                         ids=["truncated", "no model", "a list", "not UTF-8", "empty"])
def test_malformed_tokenizer_json_is_refused_in_one_clear_line(tmp_path, content):
    (tmp_path / "tokenizer.json").write_bytes(content)
    with pytest.raises(CheckpointError, match="not a valid tokenizer.json") as e:
        load_tokenizer(tmp_path)
    path = str((tmp_path / "tokenizer.json").resolve())
    assert str(e.value).startswith(path + ": ") and "\n" not in str(e.value)


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
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(broken)
    with open(os.path.join(broken, INDEX_FILE), "w") as f:
        f.write('{"weights": {}}')
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
    assert len(fp8) == 48 * 6 + 16 * 7 + 7 == 407  # docs/SPEC-qwen35.md 2.5
    assert all(any(t.name == s.name + "_scale_inv" and t.dtype == BF16 for t in specs) for s in fp8)
    assert len([s for s in specs if s.name.startswith("mtp.")]) == 22
    per_layer = [sum(s.name.startswith(layer_prefix(i)) for s in specs) for i in (0, 3)]
    assert per_layer == [20, 18]


# --- no pickle, no code execution, no shell ----------------------------------------------------------------
PACKAGES = ("megakernel", "compiler", "isa", "discrete", "experiments")  # experiments: they read .npz files
UNSAFE_MODULES = {"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "joblib", "marshal", "shelve"}
UNSAFE_CALLS = {"eval", "exec", "os.system", "os.popen", "torch.load", "yaml.load", "yaml.unsafe_load"}
NUMPY_LOADS = {"np.load", "numpy.load"}


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def unsafe_uses(source, filename):
    """'file:line: what' for each use of pickle-like modules, eval/exec, os.system/popen, torch.load,
    allow_pickle=True, np.load without allow_pickle=False, and shell=True (comments and strings ignored)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in UNSAFE_MODULES:
                found.append(f"{where}: from {module} import")
            found += [f"{where}: from {module} import {a.name}" for a in node.names
                      if f"{module}.{a.name}" in UNSAFE_CALLS or a.name in UNSAFE_MODULES]
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in UNSAFE_CALLS or (name or "").split(".")[0] in UNSAFE_MODULES:
                found.append(f"{where}: {name}(...)")
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            flag = {k: v.value if isinstance(v, ast.Constant) else v for k, v in keywords.items()}
            if "shell" in flag and flag["shell"] is not False:
                found.append(f"{where}: shell=")
            if "allow_pickle" in flag and flag["allow_pickle"] is not False:
                found.append(f"{where}: allow_pickle=")
            elif name in NUMPY_LOADS and "allow_pickle" not in flag:
                found.append(f"{where}: {name} without allow_pickle=False")
    return found


def test_package_never_unpickles_evaluates_or_uses_a_shell():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]
    assert len(files) >= 20 and {p.relative_to(root).parts[0] for p in files} == set(PACKAGES)
    found = [hit for p in files for hit in unsafe_uses(p.read_text(encoding="utf-8"), str(p.relative_to(root)))]
    assert found == []


@pytest.mark.parametrize("planted", [
    "import pickle", "import pickle as p", "from pickle import loads", "import dill", "import marshal",
    "from os import system", "x = eval('1')", "exec('x = 1')", "os.system('ls ' + path)", "os.popen(cmd)",
    "torch.load(path)", "torch.load(path, weights_only=True)", "np.load(path, allow_pickle=True)", "np.load(path)",
    "numpy.load(path, allow_pickle=flag)", "subprocess.run(cmd, shell=True)", "subprocess.run(cmd, shell=flag)",
    "pickle.loads(data)", "yaml.load(text)",
])
def test_unsafe_use_scanner_finds_a_planted_use(tmp_path, planted):
    path = tmp_path / "planted.py"
    path.write_text(f'"""Docstrings may say pickle, eval( and shell=True."""\nimport os\n\n\ndef f():\n    {planted}\n')
    assert [hit.split(": ")[0] for hit in unsafe_uses(path.read_text(), "planted.py")] == ["planted.py:6"]


def test_unsafe_use_scanner_accepts_safe_uses():
    safe = ("np.load(path, allow_pickle=False)\nsubprocess.run(['git', 'rev-parse'], shell=False)\n"
            "model.eval()\nre.compile(r'x')\n# import pickle\ns = 'os.system(x)'\n")
    assert unsafe_uses(safe, "safe.py") == []


def test_an_interrupt_just_after_the_partial_folder_is_made_leaves_nothing(tmp_path, monkeypatch):
    """The writer's partial folder is made inside its cleanup's reach: an exception raised the moment
    the folder exists (as cli.py raises SIGTERM) removes it (it once came between mkdtemp's mkdir and the
    try, and the folder stayed)."""
    from megakernel.model import checkpoint_writer

    real_mkdir = os.mkdir

    def mkdir_then_interrupt(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)
        if os.path.basename(path).startswith(".partial-"):
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_writer.os, "mkdir", mkdir_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_synthetic_checkpoint(str(tmp_path / "out"), micro_config(), seed=1)
    assert os.listdir(tmp_path) == []
