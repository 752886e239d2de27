import json
import subprocess
import sys
import time

import numpy as np
import pytest

from megakernel.errors import InputError
from megakernel.generate import CONTEXT_FULL, LENGTH, STOP, generate
from megakernel.sampling import SamplingParams
from megakernel.tokenizer import IM_END_ID, load_tokenizer


class ScriptedBackend:
    """Logits that make greedy decoding emit a fixed script of ids."""

    defined_vocab = 248077

    def __init__(self, script, capacity=100):
        self.script, self.capacity, self.steps = list(script), capacity, []

    def _logits(self):
        row = np.zeros(248320, np.float32)
        row[self.script[len(self.steps)]] = 1.0
        return row

    def start(self, prompt_ids):
        return self._logits()

    def step(self, token):
        self.steps.append(token)
        return self._logits()


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_stop_id_ends_generation_and_is_not_in_the_text(tok):
    hello = tok.encode("Hello world")
    result = generate(ScriptedBackend(hello + [IM_END_ID, 5]), tok, [1, 2], 10)
    assert result.tokens == hello + [IM_END_ID] and result.text == "Hello world" and result.stop_reason == STOP


def test_length_and_context_full(tok):
    assert generate(ScriptedBackend(range(10, 30)), tok, [1], 3).stop_reason == LENGTH
    result = generate(ScriptedBackend(range(10, 30), capacity=5), tok, [1, 2], 10)
    assert result.stop_reason == CONTEXT_FULL and len(result.tokens) == 3  # 2 prompt + 3 generated = 5
    with pytest.raises(InputError, match="context_full"):
        generate(ScriptedBackend([1], capacity=2), tok, [1, 2], 5)


def test_streamed_text_equals_the_final_text(tok):
    ids = tok.encode("naïve café 東京 🎉 done")
    pieces = []
    result = generate(ScriptedBackend(ids + [IM_END_ID]), tok, [1], 50, on_text=pieces.append)
    assert "".join(pieces) == result.text == "naïve café 東京 🎉 done"
    assert all("\ufffd" not in p for p in pieces)  # only complete characters were streamed


def test_bad_requests(tok):
    with pytest.raises(InputError, match="empty"):
        generate(ScriptedBackend([1]), tok, [], 5)
    with pytest.raises(InputError, match="max-new-tokens"):
        generate(ScriptedBackend([1]), tok, [1], 0)


def test_sampled_generation_is_reproducible(tok, tiny_weights):
    from megakernel.generate import ReferenceBackend
    from megakernel.reference import ReferenceModel

    model = ReferenceModel(tiny_weights)
    params = SamplingParams(temperature=0.9, top_k=50, top_p=0.9, seed=7)
    runs = [generate(ReferenceBackend(model, 64), tok, [9707, 11], 6, params).tokens for _ in range(2)]
    assert runs[0] == runs[1]
    greedy = generate(ReferenceBackend(model, 64), tok, [9707, 11], 6).tokens
    assert greedy != runs[0]


def test_cli_generate_on_tiny_end_to_end_under_30_s():
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "megakernel", "generate", "--prompt", "Write a haiku about GPUs.",
                        "--chat", "--max-new-tokens", "16", "--json"], capture_output=True, text=True, timeout=120)
    elapsed = time.time() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"prompt_ids", "tokens", "text", "stop_reason", "ms_per_token"}
    assert out["prompt_ids"][-2:] == [248068, 198]  # ...<think>\n
    assert len(out["tokens"]) == 16 and out["stop_reason"] == "length"
    assert all(0 <= t < 248077 for t in out["tokens"])
    assert elapsed < 30, elapsed


def test_cli_generate_streams_text_and_reports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "megakernel", "generate", "--prompt", "Hello", "--max-new-tokens", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "4 tokens, length" in r.stderr and r.stdout.endswith("\n")


@pytest.mark.parametrize("argv, message", [
    (["--prompt", ""], "empty"),
    (["--prompt", "x", "--max-new-tokens", "0"], "max-new-tokens"),
    (["--prompt", "x", "--top-k", "5"], "temperature"),
    (["--prompt", "x", "--temperature", "-1"], "temperature"),
    (["--prompt", "x", "--spec-k", "3"], "compiled Programs"),
    (["--prompt", "x", "--backend", "interpreter", "--spec-k", "8"], "1..7"),
])
def test_cli_generate_errors(argv, message):
    from megakernel.cli import main
    import io
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["generate", *argv])
    assert code == 2 and message in err.getvalue()
