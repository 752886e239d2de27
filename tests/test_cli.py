import json
import os
import subprocess
import sys

import pytest

from megakernel.cli import main
from megakernel.checkpoint_writer import save_checkpoint
from megakernel.synthetic import synthetic_weights
from checkpoint_tools import micro_config


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_module_entry_point_and_help():
    for argv in (["--help"], ["info", "--help"], ["make-checkpoint", "--help"], ["tokenize", "--help"],
                 ["detokenize", "--help"]):
        r = subprocess.run([sys.executable, "-m", "megakernel", *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "usage: megakernel" in r.stdout, (argv, r.stderr)


def test_info_27b_json_is_instant_and_matches_spec(capsys):
    code, out, _ = run(capsys, "info", "--model", "synthetic:qwen3.5-27b", "--json")
    info = json.loads(out)
    assert code == 0
    assert (info["layers"], info["gdn_layers"], info["attention_layers"]) == (64, 48, 16)
    assert (info["vocab_size"], info["defined_vocab"]) == (248320, 248077)
    assert info["weight_bytes_per_token"] == 26_925_216_768
    assert info["kv_bytes_per_token"] == 65_536
    assert info["gdn_state_bytes"] == 150_994_944 + 2_949_120
    assert info["mtp_draft_bytes"] == 3_020_006_784


def test_info_default_is_tiny_and_human_readable(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0 and "synthetic:tiny" in out and "weight_bytes_per_token" in out


def test_info_reads_a_checkpoint_directory(capsys, tmp_path):
    out_dir = str(tmp_path / "micro")
    save_checkpoint(synthetic_weights(micro_config()), out_dir, shard_bytes=1 << 20)
    code, out, _ = run(capsys, "info", "--model", out_dir, "--json")
    assert code == 0 and json.loads(out)["vocab_size"] == 2048


def test_make_checkpoint_writes_a_loadable_directory(capsys, tmp_path):
    out_dir = str(tmp_path / "tiny")
    code, out, _ = run(capsys, "make-checkpoint", "--preset", "tiny", "--seed", "2", "--out", out_dir,
                       "--pow2-scales", "--shard-size", "200MB")
    assert code == 0 and "wrote" in out
    with open(os.path.join(out_dir, "config.json")) as f:
        assert json.load(f)["megakernel_synthetic"] == {
            "generator": "megakernel.synthetic.v1", "preset": "tiny", "seed": 2, "pow2_scales": True}
    from megakernel.checkpoint import load_checkpoint
    loaded = load_checkpoint(out_dir)
    expected = synthetic_weights(loaded.config, seed=2, pow2_scales=True)
    assert all(loaded[n].tobytes() == t.tobytes() for n, t in expected.tensors.items())
    code, _, err = run(capsys, "make-checkpoint", "--preset", "tiny", "--out", out_dir)
    assert code == 2 and "refusing to overwrite" in err


def test_tokenize_detokenize_round_trip(capsys):
    text = "Hello, 世界! <|im_end|>"
    code, out, _ = run(capsys, "tokenize", text)
    ids = [int(x) for x in out.split()]
    assert code == 0 and ids[-1] == 248046
    code, out, _ = run(capsys, "detokenize", *map(str, ids))
    assert code == 0 and out == text + "\n"
    code, out, _ = run(capsys, "tokenize", "<|im_end|>", "--no-special", "--json")
    assert 248046 not in json.loads(out)["ids"]


@pytest.mark.parametrize("argv, message", [
    (["info", "--model", "/no/such/dir"], "neither a checkpoint directory"),
    (["info", "--model", "synthetic:qwen9"], "unknown preset"),
    (["info", "--model", "synthetic:tiny:x"], "seed must be"),
    (["detokenize", "248077"], "248077"),
    (["detokenize", "--", "-1"], "-1"),
    (["generate", "--prompt", "hi", "--draft-vocab", "working"], "--draft-vocab working needs --spec-k"),
])
def test_user_errors_are_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("megakernel: error:")


def test_argument_errors_exit_2():
    r = subprocess.run([sys.executable, "-m", "megakernel", "make-checkpoint", "--preset", "tiny", "--out", "x",
                        "--shard-size", "lots"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "bad size" in r.stderr


@pytest.mark.parametrize("command", ["trace", "bench"])
def test_the_gpu_commands_without_a_gpu_say_so(command, capsys):
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is present: the command would run")
    except ImportError:
        pass
    assert main([command, "--out", "unused.json"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err
