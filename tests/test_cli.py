import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from megakernel.cli import main
from megakernel.model.checkpoint_writer import save_checkpoint
from megakernel.model.synthetic import synthetic_weights
from checkpoint_tools import edit_json, micro_config


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """`megakernel make-checkpoint --preset tiny ...`, written once for the module; read-only for tests."""
    out_dir = str(tmp_path_factory.mktemp("ckpt") / "tiny")
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        assert main(["make-checkpoint", "--preset", "tiny", "--seed", "2", "--out", out_dir, "--pow2-scales",
                     "--shard-size", "200MB"]) == 0
    assert "wrote" in report.getvalue()
    return out_dir


def variant_of(checkpoint, tmp_path, edit_config):
    """A copy of `checkpoint` (its tensor shards hard-linked where possible) whose config.json
    edit_config(text_config) has changed."""
    out = tmp_path / "variant"
    out.mkdir()
    for name in os.listdir(checkpoint):
        src, dst = os.path.join(checkpoint, name), out / name
        if name == "config.json":
            shutil.copy(src, dst)
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy(src, dst)
    edit_json(out / "config.json", lambda j: edit_config(j["text_config"]))
    return str(out)


def test_module_entry_point_and_help():
    for argv in (["--help"], ["info", "--help"], ["make-checkpoint", "--help"], ["tokenize", "--help"],
                 ["detokenize", "--help"], ["generate", "--help"]):
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


def test_make_checkpoint_writes_a_loadable_directory(capsys, tiny_checkpoint):
    out_dir = tiny_checkpoint  # written by the fixture: make-checkpoint --preset tiny --seed 2 --pow2-scales
    with open(os.path.join(out_dir, "config.json")) as f:
        assert json.load(f)["megakernel_synthetic"] == {
            "generator": "megakernel.synthetic.v1", "preset": "tiny", "seed": 2, "pow2_scales": True}
    from megakernel.model.checkpoint import load_checkpoint
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
    # requests: all refused before any weights are built
    (["generate", "--prompt", ""], "the prompt is empty"),
    (["generate", "--prompt-ids", ""], "the prompt is empty"),
    (["generate", "--prompt-ids", " , "], "the prompt is empty"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "-5"], "--max-new-tokens must be at least 1"),
    (["generate", "--prompt", "hi", "--context", "0"], "--context must be at least 1"),
    (["generate", "--prompt-ids", "9707,248077"], "[0, 248077): got 248077 at position 1"),
    (["generate", "--prompt-ids", "248319"], "got 248319 at position 0"),  # a padding row of the table
    (["generate", "--prompt-ids", "9707 248320 11"], "got 248320 at position 1"),
    (["generate", "--prompt-ids=-1,9707"], "got -1 at position 0"),
    # conflicting flags
    (["generate", "--prompt", "hi", "--top-k", "5"], "--top-k / --top-p need --temperature > 0"),
    (["generate", "--prompt", "hi", "--top-p", "0.9"], "--top-k / --top-p need --temperature > 0"),
    (["generate", "--prompt", "hi", "--temperature", "-1"], "--temperature / temperature must be a finite number"),
    (["generate", "--prompt", "hi", "--temperature", "1", "--top-p", "0"], "--top-p / top_p must be a number in (0, 1]"),
    (["generate", "--prompt", "hi", "--temperature", "1", "--top-k", "-2"], "--top-k / top_k must be an integer >= 0"),
    (["generate", "--prompt", "hi", "--seed", "-1"], "--seed / seed must be an integer >= 0"),
    (["generate", "--prompt", "hi", "--backend", "interpreter", "--spec-k", "8"], "--spec-k / k must be 1..7"),
    (["generate", "--prompt", "hi", "--spec-k", "2"], "--spec-k needs a backend that runs the compiled Programs"),
    (["generate", "--prompt", "hi", "--backend", "reference", "--spec-k", "2"], "--spec-k needs a backend"),
    (["generate", "--prompt", "hi", "--backend", "interpreter", "--spec-k", "9"], "--spec-k / k must be 1..7"),
    (["generate", "--prompt", "hi", "--backend", "interpreter", "--numerics", "oracle"], "use --numerics engine"),
    (["generate", "--prompt", "hi", "--backend", "megakernel", "--numerics", "oracle"], "use --numerics engine"),
    (["generate", "--prompt-ids", "1,2", "--chat"], "--chat wraps --prompt text"),
    (["generate", "--prompt", "hi", "--context", "3000000000"], "--context must be at most 2,147,483,639 tokens"),
    (["compile", "--rows", "9"], "--rows must be 1..8 for the target program, got 9"),
    (["compile", "--rows", "0"], "--rows must be 1..8 for the target program, got 0"),
    (["generate", "--prompt", "hi", "--backend", "reference", "--prompt-path", "program"],
     "--prompt-path program is the engine's prompt arithmetic: use --numerics engine"),
    (["compile", "--program", "prompt", "--rows", "2049"], "--rows must be 1..2048 for the prompt program, got 2049"),
    (["compile", "--program", "prompt", "--debug-logits"], "--debug-logits: the prompt program has no head"),
    (["compile", "--sms", "0"], "--sms must be at least 1, got 0"),
    (["compile", "--sms", "-1"], "--sms must be at least 1, got -1"),
    (["compile", "--context", "0"], "--context must be at least 1 token, got 0"),
    (["compile", "--context", "3000000000"], "--context must be at most"),
    (["compile", "--out", "/nonexistent-folder/program.bin"], "--out /nonexistent-folder/program.bin: no such folder"),
    (["compile", "--out", "/"], "--out / is a folder"),
    (["info", "--context", "1024"], "--context needs --device"),
    (["info", "--device", "--context", "0"], "--context must be at least 1"),
    # argparse's own errors: one line too
    (["generate", "--prompt", "hi", "--prompt-ids", "1"], "generate: argument --prompt-ids: not allowed with argument --prompt"),
    (["generate", "--max-new-tokens", "3"], "generate: one of the arguments --prompt --prompt-file --prompt-ids is required"),
    (["generate", "--prompt-ids", "1,x"], "generate: argument --prompt-ids: bad token ids '1,x'"),
    (["generate", "--prompt", "hi", "--backend", "cuda"], "generate: argument --backend: invalid choice: 'cuda'"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "many"], "invalid int value: 'many'"),
    (["info", "--nonsense"], "unrecognized arguments: --nonsense"),
    (["frobnicate"], "argument command: invalid choice: 'frobnicate'"),
    ([], "the following arguments are required: command"),
])
def test_user_errors_are_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("megakernel: error:"), err
    assert out == ""


def test_argument_errors_exit_2():
    r = subprocess.run([sys.executable, "-m", "megakernel", "make-checkpoint", "--preset", "tiny", "--out", "x",
                        "--shard-size", "lots"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == ("megakernel: error: make-checkpoint: argument --shard-size: bad size "
                                              "'lots' (examples: 4GB, 500MB, 1048576)\n") and r.stdout == ""


def test_help_and_version_still_exit_0(capsys):
    assert main(["generate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: megakernel generate" in out and "--prompt-ids" in out
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("megakernel ")


@pytest.mark.parametrize("argv", [["trace", "--out", "unused.json"], ["bench", "--out", "unused.json"],
                                  ["info", "--device"], ["info", "--device", "--context", "128", "--json"],
                                  ["generate", "--prompt", "hi", "--backend", "graph"],
                                  ["generate", "--prompt", "hi", "--backend", "megakernel", "--spec-k", "3"]])
def test_the_gpu_commands_without_a_gpu_say_so(argv, capsys):
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is present: the command would run")
    except ImportError:
        pass
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs an NVIDIA GPU" in err and err.count("\n") == 1


def test_a_prompt_longer_than_the_session_is_context_full_not_an_error(capsys):
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707 11 13 17", "--context", "4", "--json")
    assert code == 0 and err == ""
    result = json.loads(out)
    assert (result["prompt_ids"], result["tokens"], result["stop_reason"]) == ([9707, 11, 13, 17], [], "context_full")
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707,11", "--context", "4", "--max-new-tokens", "9")
    assert code == 0 and "[2 tokens, context_full," in err  # 2 prompt + 2 generated fill the 4 rows


def test_a_checkpoint_whose_config_does_not_match_its_tensors_is_one_line_exit_2(capsys, tiny_checkpoint, tmp_path):
    broken = variant_of(tiny_checkpoint, tmp_path, lambda t: t.update(intermediate_size=768))
    code, out, err = run(capsys, "generate", "--model", broken, "--prompt", "hi", "--max-new-tokens", "1")
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("megakernel: error:")
    assert "shape [512, 256], expected [768, 256] from config.json" in err, err


class FakeOutOfMemory(Exception):
    pass


def fake_cupy(free, total, name=b"NVIDIA H200"):
    """What `info --device` and the out-of-memory message read of CuPy."""
    runtime = types.SimpleNamespace(memGetInfo=lambda: (free, total), getDeviceProperties=lambda i: {"name": name},
                                    getDeviceCount=lambda: 1)
    cuda = types.SimpleNamespace(runtime=runtime, Device=lambda: types.SimpleNamespace(id=0),
                                 memory=types.SimpleNamespace(OutOfMemoryError=FakeOutOfMemory))
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: types.SimpleNamespace(
        free_all_blocks=lambda: None))


def test_info_device_reports_the_sessions_that_fit(capsys, monkeypatch):
    from megakernel.measurement.budgets import DEVICE_RESERVE_BYTES, session_plan
    from megakernel.model.config import preset

    plan = session_plan(preset("tiny"), 256)
    need = plan["weight_arena_bytes"] + plan["weight_staging_bytes"] + DEVICE_RESERVE_BYTES
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(need + 5 * plan["session_bytes"] + 1, 150 * 10**9))
    code, out, _ = run(capsys, "info", "--device", "--context", "256", "--json")
    info = json.loads(out)
    assert code == 0 and info["device"] == "NVIDIA H200" and info["device_total_bytes"] == 150 * 10**9
    assert {k: info[k] for k in plan} == plan and info["context"] == 256
    assert info["reserve_bytes"] == DEVICE_RESERVE_BYTES and info["sessions_that_fit"] == 5
    assert info["layers"] == 8  # the configuration and budgets as without --device
    code, out, _ = run(capsys, "info", "--device", "--context", "256")
    assert code == 0 and "sessions_that_fit" in out and "sessions of 256 tokens" in out and "GB" in out
    code, out, _ = run(capsys, "info", "--device", "--json")  # default context: generate's
    assert code == 0 and json.loads(out)["context"] == 4096
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(need - 1, 150 * 10**9))
    code, out, _ = run(capsys, "info", "--device", "--context", "256", "--json")
    assert code == 0 and json.loads(out)["sessions_that_fit"] == 0


def test_info_device_reads_no_weights_of_a_checkpoint(capsys, monkeypatch, tiny_checkpoint, tmp_path):
    ckpt = variant_of(tiny_checkpoint, tmp_path, lambda t: None)
    for name in os.listdir(ckpt):
        if name.endswith(".safetensors"):
            os.remove(os.path.join(ckpt, name))
            with open(os.path.join(ckpt, name), "wb") as f:
                f.write(b"not weights")
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(200 * 10**9, 200 * 10**9))
    code, out, err = run(capsys, "info", "--model", ckpt, "--device", "--context", "64", "--json")
    assert code == 0, err
    assert json.loads(out)["sessions_that_fit"] > 1000


def test_a_gpu_backend_out_of_memory_is_one_line_with_the_figures(capsys, monkeypatch):
    import discrete.backend

    class Exhausted:
        def __init__(self, *args, **kwargs):
            raise FakeOutOfMemory("out of memory allocating 1,000,000 bytes")

    monkeypatch.setattr(discrete.backend, "DiscreteBackend", Exhausted)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(10**9, 150 * 10**9))
    code, out, err = run(capsys, "generate", "--backend", "graph", "--prompt", "hi", "--context", "512")
    assert code == 2 and err.count("\n") == 1 and err.startswith("megakernel: error: out of device memory")
    assert "512-token session" in err and "(0 such sessions fit)" in err and "--context" in err


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`megakernel compile --json --full-json | head -1`: the rest of the output meets a closed pipe; the
    command stops with SIGPIPE's status (141) and writes nothing on stderr (no BrokenPipeError traceback)."""
    p = subprocess.Popen([sys.executable, "-m", "megakernel", "compile", "--json", "--full-json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"{\n"  # more than a pipe's buffer follows (the tiny Program: ~85 KB)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 141 and err == b"", err


def test_ctrl_c_is_one_line_and_status_130(capsys, monkeypatch):
    import megakernel.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_info", interrupted)
    assert main(["info"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err == "megakernel: interrupted\n"


def test_ctrl_c_during_generate_prints_the_stats_so_far(capsys, monkeypatch):
    """Ctrl-C after two generated tokens: the text so far on stdout, the stats line (stop reason
    "interrupted") as the only line on stderr, status 130; --json says it too."""
    from megakernel.generation.generate import ReferenceBackend

    real_step = ReferenceBackend.step

    def step(self, token):
        self.steps_taken = getattr(self, "steps_taken", 0) + 1
        if self.steps_taken == 2:
            raise KeyboardInterrupt
        return real_step(self, token)

    monkeypatch.setattr(ReferenceBackend, "step", step)
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707,11", "--max-new-tokens", "10")
    assert code == 130 and err.count("\n") == 1 and err.startswith("[2 tokens, interrupted,"), err
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707,11", "--max-new-tokens", "10", "--json")
    result = json.loads(out)
    assert code == 130 and err == "" and result["stop_reason"] == "interrupted" and len(result["tokens"]) == 2


@pytest.mark.parametrize("argv, message", [
    (["--context", "1000000000"], "--backend reference with --context 1,000,000,000 needs 12,288.3 GB of host memory "
                                  "(weights 0.3 GB, KV cache 12,288.0 GB), 8.0 GB are available"),
    (["--backend", "interpreter", "--context", "1000000000"], "--backend interpreter with --context 1,000,000,000 "
                                                              "needs 6,144.3 GB"),
    (["--model", "synthetic:qwen3.5-27b"], "holds the weights of synthetic:qwen3.5-27b in host memory, 29.9 GB; 8.0 GB "
                                           "are available: use a GPU backend"),
])
def test_a_cpu_session_too_large_for_the_host_is_one_line_before_anything_is_built(capsys, monkeypatch, argv,
                                                                                  message):
    """generate on the CPU backends checks the weights and the session against the host's available
    memory first (here 8 GB): one line with the figures, at once, not a MemoryError or minutes of
    synthesis (nothing is built: open_weights would fail the test)."""
    import megakernel.cli as cli
    import megakernel.model.models as models

    monkeypatch.setattr(cli, "host_available_bytes", lambda: 8 * 10**9)
    monkeypatch.setattr(models, "open_weights", lambda *a, **k: pytest.fail("weights were built"))
    code, out, err = run(capsys, "generate", "--prompt", "hi", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_a_cpu_session_that_fits_runs(capsys, monkeypatch):
    import megakernel.cli as cli

    monkeypatch.setattr(cli, "host_available_bytes", lambda: 8 * 10**9)
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707", "--max-new-tokens", "1", "--context", "64")
    assert code == 0 and "[1 tokens," in err


def test_sigterm_during_make_checkpoint_leaves_no_partial_folder(tmp_path):
    """SIGTERM while make-checkpoint writes: one line, status 143, and the partial folder is gone (the
    signal is raised where the command is, so the writer's cleanup runs). The tiny checkpoint takes about a
    second to write: an attempt whose writer finished before the signal landed (status 0, a whole folder)
    tested nothing and is made again, up to five times."""
    import shutil
    import signal
    import time

    for attempt in range(5):
        out = tmp_path / f"attempt{attempt}"
        out.mkdir()
        p = subprocess.Popen([sys.executable, "-m", "megakernel", "make-checkpoint", "--preset", "tiny", "--seed", "1",
                              "--out", str(out / "tiny")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not any(name.startswith(".partial-") for name in os.listdir(out)) and p.poll() is None:
            assert time.monotonic() < deadline, "no partial folder after 120 s"
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        err = p.stderr.read()
        code = p.wait(timeout=60)
        if code == 0 and os.listdir(out) == ["tiny"]:  # finished before the signal landed
            shutil.rmtree(out)
            continue
        assert code == 143 and err == b"megakernel: terminated\n", (code, err)
        assert os.listdir(out) == []
        return
    pytest.fail("make-checkpoint finished before SIGTERM landed in all five attempts")


class NoDevice(Exception):
    """What CuPy raises from getDeviceCount on a machine without a driver or device."""


def cupy_without_a_gpu():
    def count():
        raise NoDevice("cudaErrorNoDevice: no CUDA-capable device is detected")

    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=count)))


@pytest.mark.parametrize("argv", [["info", "--device"], ["bench", "--out", "unused.json"],
                                  ["trace", "--out", "unused.json"], ["generate", "--prompt", "hi", "--backend", "graph"]])
def test_cupy_without_a_usable_gpu_is_one_line(capsys, monkeypatch, argv):
    monkeypatch.setitem(sys.modules, "cupy", cupy_without_a_gpu())
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "needs an NVIDIA GPU: CuPy sees no usable GPU (cudaErrorNoDevice" in err


def test_auto_runs_the_megakernel_where_a_gpu_is_usable_and_says_which_backend_ran(capsys, monkeypatch):
    import megakernel.cli as cli

    chosen = []

    class Backend:  # stands in for DiscreteBackend: records the build auto chose, runs nothing
        def __init__(self, model, context, build, **options):
            chosen.append(build)
            raise cli.InputError("stopped here")

    import discrete.backend

    monkeypatch.setattr(discrete.backend, "DiscreteBackend", Backend)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(10**11, 10**11))
    assert run(capsys, "generate", "--prompt", "hi")[0] == 2 and chosen == ["megakernel"]
    monkeypatch.setitem(sys.modules, "cupy", cupy_without_a_gpu())  # no usable GPU: the reference
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707", "--max-new-tokens", "1", "--json")
    assert code == 0 and json.loads(out)["backend"] == "reference"
    code, out, err = run(capsys, "generate", "--prompt-ids", "9707", "--max-new-tokens", "1")
    assert code == 0 and "backend reference]" in err


def test_help_shows_the_defaults(capsys):
    assert main(["generate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: 32)", "(default: auto)", "(default: 4096)", "(default synthetic:tiny)"):
        assert shown in out, shown
    assert "(default: None)" not in out and "(default: False)" not in out


def test_the_prompt_from_a_file_or_standard_input_equals_the_same_text_given_inline(capsys, monkeypatch, tmp_path):
    text = "naïve café: Hello"
    (tmp_path / "prompt.txt").write_text(text, encoding="utf-8")
    common = ["--max-new-tokens", "2", "--json"]
    inline = json.loads(run(capsys, "generate", "--prompt", text, *common)[1])
    from_file = json.loads(run(capsys, "generate", "--prompt-file", str(tmp_path / "prompt.txt"), *common)[1])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    from_stdin = json.loads(run(capsys, "generate", "--prompt", "-", *common)[1])
    assert inline["prompt_ids"] == from_file["prompt_ids"] == from_stdin["prompt_ids"]
    assert inline["tokens"] == from_file["tokens"] == from_stdin["tokens"]


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.txt", "no such file"),
    (lambda d: d, "a folder"),
    (lambda d: (d / "fifo", os.mkfifo(d / "fifo"))[0], "not a regular file"),
    (lambda d: (d / "latin1.txt", (d / "latin1.txt").write_bytes(b"caf\xe9"))[0], "not UTF-8 text (byte 3)"),
])
def test_a_bad_prompt_file_is_one_line(capsys, tmp_path, make, message):
    path = make(tmp_path)
    code, out, err = run(capsys, "generate", "--prompt-file", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and f"--prompt-file {path}: {message}" in err, err



def test_compile_prints_a_validated_prompt_program(capsys):
    code, out, err = run(capsys, "compile", "--model", "synthetic:tiny", "--program", "prompt", "--rows", "64",
                         "--sms", "7", "--context", "256", "--validate")
    assert code == 0, err
    assert "83 words (PROMPT_EMBED 1, NORM_PREPARE 16, GEMM 8, PROMPT_CONV 6, GDN_CHUNK 6, GATED_PREPARE 6, " in out
    assert "validator: proved race- and deadlock-free" in out
    code, out, err = run(capsys, "compile", "--model", "synthetic:tiny", "--program", "mtp-prompt", "--rows", "64",
                         "--sms", "7", "--context", "256", "--validate")
    assert code == 0, err
    assert "13 words (MTP_PREPARE 1, GEMM 2, NORM_PREPARE 2, PROMPT_QKV 1, ATTN_CAUSAL 1, PREPARE 2" in out
