import json
import subprocess
import sys
import types

import numpy as np
import pytest

from megakernel.errors import InputError, MegakernelError, ModelOutputError
from megakernel.generation.generate import CONTEXT_FULL, INTERRUPTED, LENGTH, STOP, ProgramBackend, generate
from megakernel.model.sampling import SamplingParams
from megakernel.model.tokenizer import IM_END_ID, load_tokenizer


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


class NoRunBackend(ScriptedBackend):
    def start(self, prompt_ids):
        raise AssertionError("a prompt that fills the session must not be run")


def test_length_and_context_full(tok):
    assert generate(ScriptedBackend(range(10, 30)), tok, [1], 3).stop_reason == LENGTH
    result = generate(ScriptedBackend(range(10, 30), capacity=5), tok, [1, 2], 10)
    assert result.stop_reason == CONTEXT_FULL and len(result.tokens) == 3  # 2 prompt + 3 generated = 5
    result = generate(ScriptedBackend(range(10, 30), capacity=3), tok, [1, 2], 10)
    assert result.stop_reason == CONTEXT_FULL and result.tokens == [10]  # one free row: one token


@pytest.mark.parametrize("prompt_len, capacity", [(2, 2), (3, 2), (64, 8)])
def test_a_prompt_that_fills_the_session_is_context_full_with_no_tokens(tok, prompt_len, capacity):
    for spec_k in (0, 3):
        result = generate(NoRunBackend([1], capacity=capacity), tok, list(range(1, prompt_len + 1)), 5,
                          spec_k=spec_k)
        assert (result.tokens, result.text, result.stop_reason) == ([], "", CONTEXT_FULL)
        assert result.prompt_ids == list(range(1, prompt_len + 1))
        assert result.as_dict()["stop_reason"] == "context_full"
        assert result.drafts_accepted == ([] if spec_k else None)


class InterruptedBackend(ScriptedBackend):
    """Ctrl-C arrives while step `at` runs (0: in the prompt, before any token)."""

    def __init__(self, script, at):
        super().__init__(script)
        self.at = at

    def start(self, prompt_ids):
        if self.at == 0:
            raise KeyboardInterrupt
        return super().start(prompt_ids)

    def step(self, token):
        if len(self.steps) + 1 == self.at:
            raise KeyboardInterrupt
        return super().step(token)


class NonFiniteBackend(ScriptedBackend):
    """The logits of generated token `at` + 1 are `bad` everywhere (NaN or inf: degenerate weights)."""

    def __init__(self, script, at, bad):
        super().__init__(script)
        self.at, self.bad = at, bad

    def _logits(self):
        row = super()._logits()
        return np.full_like(row, self.bad) if len(self.steps) == self.at else row


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_non_finite_logits_stop_generation_with_one_line_naming_the_position(tok, bad, temperature):
    backend = NonFiniteBackend(range(10, 30), 2, bad)
    with pytest.raises(ModelOutputError, match=r"^generation stopped at position 5 \(generated token 3\): the "
                                               r"logits (contain NaN|have maximum)") as e:
        generate(backend, tok, [1, 2, 3], 10, SamplingParams(temperature=temperature, seed=1))
    assert "\n" not in str(e.value) and isinstance(e.value, MegakernelError)
    assert len(generate(NonFiniteBackend(range(10, 30), 5, bad), tok, [1], 4).tokens) == 4  # not reached: fine


@pytest.mark.parametrize("at", [0, 1, 3])
def test_an_interrupt_returns_the_tokens_so_far(tok, at):
    pieces = []
    result = generate(InterruptedBackend(range(10, 30), at), tok, [1, 2], 10, on_text=pieces.append)
    assert result.stop_reason == INTERRUPTED and result.tokens == list(range(10, 10 + at))
    assert "".join(pieces) == result.text and result.ms_per_token >= 0.0 and result.prompt_ms >= 0.0


def test_streamed_text_equals_the_final_text(tok):
    ids = tok.encode("naïve café 東京 🎉 done")
    pieces = []
    result = generate(ScriptedBackend(ids + [IM_END_ID]), tok, [1], 50, on_text=pieces.append)
    assert "".join(pieces) == result.text == "naïve café 東京 🎉 done"
    assert all("\ufffd" not in p for p in pieces)  # only complete characters were streamed


def test_bad_requests(tok):
    with pytest.raises(InputError, match="empty"):
        generate(ScriptedBackend([1]), tok, [], 5)
    with pytest.raises(InputError, match="empty"):
        generate(ScriptedBackend([1]), tok, np.array([], np.int64), 5)
    with pytest.raises(InputError, match="max-new-tokens"):
        generate(ScriptedBackend([1]), tok, [1], 0)
    with pytest.raises(InputError, match="max-new-tokens"):
        generate(ScriptedBackend([1]), tok, [1], -3)
    with pytest.raises(InputError, match="1..7"):
        generate(ScriptedBackend([1]), tok, [1], 2, spec_k=8)


@pytest.mark.parametrize("ids, named", [
    ([1, 248077], "248077 at position 1"),  # the first padding row of the embedding table
    ([248319, 5], "248319 at position 0"),  # the last padding row
    ([248320], "248320 at position 0"),
    ([-1, 2], "-1 at position 0"),
    ([1, True], "True at position 1"),
    ([1.0], "1.0 at position 0"),
    (["7"], "'7' at position 0"),
    ([3, -2, 248077, 2**40], "-2 at position 1, 248077 at position 2, 1099511627776 at position 3"),
    (list(range(-8, 0)), "-4 at position 4 and 3 more"),
])
def test_token_ids_outside_the_defined_vocabulary_are_refused(tok, ids, named):
    with pytest.raises(InputError, match=r"must be integers in \[0, 248077\): got ") as caught:
        generate(NoRunBackend([1]), tok, ids, 5)
    assert str(caught.value).endswith(named) and "\n" not in str(caught.value)


def test_numpy_ids_are_accepted_and_returned_as_ints(tok):
    result = generate(ScriptedBackend([7, 8]), tok, np.array([1, 248076], np.int64), 2)
    assert result.prompt_ids == [1, 248076] and all(type(t) is int for t in result.prompt_ids)
    assert result.tokens == [7, 8]


def test_the_interpreter_session_refuses_ids_outside_its_bound(tiny_weights):
    from compiler import lower
    from compiler.interpreter import Interpreter

    interp = Interpreter(lower(tiny_weights.config, rows=2, sms=4, capacity=8), tiny_weights)
    vocab = tiny_weights.config.vocab_size
    interp.set_tokens([0, vocab - 1])  # the embedding table's rows: the default bound
    for bad, bound in (([-1, 5], None), ([5, vocab], None), ([5, 248077], 248077)):
        with pytest.raises(InputError, match=r"token ids \[\S+\] outside the vocabulary"):
            interp.set_tokens(bad, bound)
    with pytest.raises(ValueError, match="2 tokens per pass"):
        interp.set_tokens([5])
    assert issubclass(InputError, MegakernelError)


def test_the_device_session_errors_are_one_line_user_errors_and_still_value_errors():
    from megakernel.runtime.device import SessionInputError

    assert issubclass(SessionInputError, InputError) and issubclass(SessionInputError, ValueError)


class CountingProgramBackend(ProgramBackend):
    """A ProgramBackend over a toy model (the next id is NEXT(id); the MTP head's drafts are right for
    most ids, wrong for some), with no engine: each pass checks that it writes no row past the
    session's capacity, on the target's lane and on the MTP head's."""

    VOCAB = 97

    def __init__(self, capacity: int):
        super().__init__(8)
        self.capacity, self.defined_vocab = capacity, self.VOCAB
        self.config = types.SimpleNamespace(defined_vocab=self.VOCAB, vocab_size=self.VOCAB)
        self._runners, self.passes, self.pos, self.mtp_pos, self.last_draft = {}, 0, 0, 0, None

    @classmethod
    def next_id(cls, t):
        return (7 * t + 3) % cls.VOCAB

    @classmethod
    def draft(cls, t):
        return cls.next_id(t) if t % 3 else (cls.next_id(t) + 1) % cls.VOCAB

    def _get(self, key, rows):
        return self._runners.setdefault(key, types.SimpleNamespace(program=types.SimpleNamespace(rows=rows), outs=[]))

    def _runner(self, rows):
        return self._get(rows, rows)

    def _mtp_runner(self, rows, chained=False):
        return self._get(("mtp", rows, chained), rows)

    def _run(self, runner, tokens, pending, speculative):
        assert len(tokens) == runner.program.rows and all(0 <= t < self.VOCAB for t in tokens)
        assert self.pos + len(tokens) <= self.capacity, (self.pos, len(tokens), self.capacity)
        self.pos += len(tokens)
        self.passes += 1
        runner.outs = [self.next_id(t) for t in tokens]

    def _logits(self, runner, rows, name="logits"):
        return 30.0 * np.eye(self.VOCAB, dtype=np.float32)[runner.outs[:rows]]

    def _tokens_out(self, runner, rows):
        return runner.outs[:rows]

    def _reset_session(self):
        self.pos = self.mtp_pos = 0

    @property
    def position(self):
        return self.pos

    def _set_position(self, position):
        self.pos = position

    def _set_mtp_position(self, runner, position):
        self.mtp_pos = position

    def _move_hidden(self, src, dst, rows):
        pass

    def _run_mtp(self, runner, tokens):
        tokens = [self.last_draft] if tokens is None else tokens
        assert len(tokens) == runner.program.rows
        assert self.mtp_pos + len(tokens) <= self.capacity, (self.mtp_pos, len(tokens), self.capacity)
        self.mtp_pos += len(tokens)
        self.passes += 1
        runner.outs = [self.draft(t) for t in tokens]
        self.last_draft = runner.outs[-1]
        return runner.outs


def test_speculative_decoding_never_runs_past_the_session_capacity(tok):
    """mtp_batches (greedy) with every draft count, prompt length and a small capacity: no pass writes a
    row past the capacity on either lane, the tokens are plain decoding's, and the generation ends with
    context_full at exactly the capacity (or, for a prompt that fills it, runs nothing)."""
    for capacity in range(1, 14):
        for prompt_len in range(1, capacity + 2):
            prompt = [(3 * i + 2) % CountingProgramBackend.VOCAB for i in range(prompt_len)]
            plain = generate(CountingProgramBackend(capacity), tok, prompt, 100)
            for k in range(1, 8):
                backend = CountingProgramBackend(capacity)
                out = generate(backend, tok, prompt, 100, spec_k=k)
                assert out.tokens == plain.tokens and out.stop_reason == CONTEXT_FULL, (capacity, prompt_len, k)
                assert len(prompt) + len(out.tokens) == max(capacity, len(prompt))
                assert backend.passes > 0 if prompt_len < capacity else backend.passes == 0


@pytest.mark.parametrize("k", [1, 3, 7])
def test_sampled_speculation_never_runs_past_the_session_capacity(tok, k):
    for capacity in range(2, 14):
        backend = CountingProgramBackend(capacity)
        out = generate(backend, tok, [1, 2], 100, SamplingParams(temperature=0.8, seed=capacity), spec_k=k)
        assert out.stop_reason == CONTEXT_FULL and 2 + len(out.tokens) == capacity


def test_sampled_generation_is_reproducible(tok, tiny_weights):
    from megakernel.generation.generate import ReferenceBackend
    from megakernel.reference import ReferenceModel

    model = ReferenceModel(tiny_weights)
    params = SamplingParams(temperature=0.9, top_k=50, top_p=0.9, seed=7)
    runs = [generate(ReferenceBackend(model, 64), tok, [9707, 11], 6, params).tokens for _ in range(2)]
    assert runs[0] == runs[1]
    greedy = generate(ReferenceBackend(model, 64), tok, [9707, 11], 6).tokens
    assert greedy != runs[0]


def test_cli_generate_on_tiny_end_to_end():
    r = subprocess.run([sys.executable, "-m", "megakernel", "generate", "--prompt", "Write a haiku about GPUs.",
                        "--chat", "--max-new-tokens", "16", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"prompt_ids", "tokens", "text", "stop_reason", "ms_per_token"}
    assert out["prompt_ids"][-2:] == [248068, 198]  # ...<think>\n
    assert len(out["tokens"]) == 16 and out["stop_reason"] == "length"
    assert all(0 <= t < 248077 for t in out["tokens"])


def test_cli_generate_streams_text_and_reports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "megakernel", "generate", "--prompt", "Hello", "--max-new-tokens", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "4 tokens, length" in r.stderr and r.stdout.endswith("\n")


