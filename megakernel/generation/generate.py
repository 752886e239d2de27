"""Generation loop over a backend: prompt ids in, tokens out, text streamed as it becomes complete."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from isa.opcodes import (
    CTRL_LANE,
    CTRL_PENDING,
    CTRL_POSITION,
    CTRL_SPECULATIVE,
)

from ..model.draft_vocab import DRAFT_CORE, WorkingVocab, draft_rows
from ..errors import InputError, ModelOutputError
from .passes import (MAX_PROMPT_ROWS, PROMPT_CHUNK, PROMPT_PATHS, prompt_chunks, prompt_path_chunks,
                     uses_prompt_program)
from ..model.sampling import SamplingParams, make_rng, sample
from .speculative import check_draft_count, mtp_batches
from ..model.tensors import LM_HEAD
from ..model.tokenizer import Tokenizer

if TYPE_CHECKING:
    from isa import Program

STOP = "stop"  # a stop id was produced
LENGTH = "length"  # max_new_tokens reached
CONTEXT_FULL = "context_full"  # the session's KV capacity is exhausted
INTERRUPTED = "interrupted"  # KeyboardInterrupt (Ctrl-C): the tokens so far are returned


@dataclass
class GenerationResult:
    prompt_ids: list[int]
    tokens: list[int]  # generated ids, the stop id included when one ended the generation
    text: str  # decoded generated text, stop id excluded
    stop_reason: str
    ms_per_token: float  # wall time per generated token after the first (decode steps only)
    prompt_ms: float  # time to first token: prompt processing plus the first choice
    drafts_accepted: list[int] | None = None  # speculative decoding: drafts kept by each verify pass

    def as_dict(self) -> dict:
        out = {"prompt_ids": self.prompt_ids, "tokens": self.tokens, "text": self.text,
               "stop_reason": self.stop_reason, "ms_per_token": round(self.ms_per_token, 3),
               "prompt_ms": round(self.prompt_ms, 3)}
        if self.drafts_accepted is not None:
            out["drafts_accepted"] = self.drafts_accepted
        return out


def check_prompt_path(prompt_path: str) -> str:
    if prompt_path not in PROMPT_PATHS:
        raise InputError(f"--prompt-path must be one of {', '.join(PROMPT_PATHS)}, got {prompt_path!r}")
    return prompt_path


class ReferenceBackend:
    """The NumPy reference model behind the generation loop (CPU). prompt_path "program" (or "auto" on a long
    prompt) in engine mode: the prompt in the prompt path's arithmetic (form="prompt") in the prompt program's
    chunks, its last token as a decode step."""

    def __init__(self, model, capacity: int, prompt_path: str = "passes", prompt_chunk: int = PROMPT_CHUNK):
        self.model = model
        self.capacity = capacity
        self.prompt_path, self.prompt_chunk = check_prompt_path(prompt_path), prompt_chunk
        self.session = None

    @property
    def defined_vocab(self) -> int:
        return self.model.config.defined_vocab

    def uses_prompt_program(self, prompt_tokens: int) -> bool:
        """The prompt path is the engine's arithmetic: an oracle-mode model takes the passes under "auto"."""
        from ..reference.numerics import Mode

        engine = self.model.mode == Mode.ENGINE
        return (engine or self.prompt_path == "program") and uses_prompt_program(self.prompt_path, prompt_tokens)

    def start(self, prompt_ids: list[int]) -> np.ndarray:
        self.session = self.model.new_session(self.capacity)
        if not self.uses_prompt_program(len(prompt_ids)):
            return self.model.forward(self.session, prompt_ids, last_logits_only=True).logits[-1]
        chunks, last = prompt_path_chunks(prompt_ids, self.prompt_chunk)
        for chunk in chunks:
            self.model.forward(self.session, chunk, form="prompt", last_logits_only=True)
        return self.step(last)

    def step(self, token: int) -> np.ndarray:
        return self.model.forward(self.session, [token]).logits[0]


def mtp_arena_bytes(config, capacity: int, sms: int = 132) -> int:
    """The arena the widest MTP draft pass needs (0 without an MTP layer): sessions are sized for it too."""
    from compiler import lower_mtp

    if not config.mtp_num_hidden_layers:
        return 0
    return lower_mtp(config, rows=MAX_PROMPT_ROWS, sms=sms, capacity=capacity, debug_logits=True).arena_bytes


def session_arena_bytes(widest: Program, config, capacity: int, sms: int = 132) -> int:
    """A session's arena: the widest target Program's (`widest`) or the widest MTP pass's, whichever is
    larger; every Program a backend runs shares it."""
    return max(widest.arena_bytes, mtp_arena_bytes(config, capacity, sms))


def prompt_programs(config, rows: int, capacity: int, sms: int = 132) -> dict:
    """The prompt program of `rows`-row chunks and, with an MTP head, its prefill program: {mtp: Program}."""
    from compiler import lower_mtp_prompt, lower_prompt

    out = {False: lower_prompt(config, rows=rows, sms=sms, capacity=capacity)}
    if config.mtp_num_hidden_layers:
        out[True] = lower_mtp_prompt(config, rows=rows, sms=sms, capacity=capacity)
    return out


class ProgramBackend:
    """What the backends that run compiled Programs share (the CPU interpreter, generate.InterpreterBackend;
    the GPU builds, discrete/backend.py): one session, a runner per row count; the prompt enters in passes
    of up to `prompt_rows` rows; verify / commit run a speculative pass and its rollback (docs/ISA.md
    "Speculative passes"); mtp_prefill / mtp_next draft with the MTP head's Programs on the same session.
    A subclass provides _runner(rows), _run(runner, tokens, pending, speculative), _logits(runner, rows,
    name) (rows of buffer `name`, default "logits"), _tokens_out(runner, rows), _reset_session(), position
    and _set_position(p); for the MTP head _mtp_runner(rows, chained), _set_mtp_position(runner, p),
    _run_mtp(runner, tokens), _move_hidden(src, dst, rows) and _write_draft_vocab(table) (the working
    vocabulary's ids and their lm_head rows into the session); and `config`."""

    def __init__(self, prompt_rows: int, prompt_path: str = "passes", prompt_chunk: int = PROMPT_CHUNK):
        prompt_chunks([], prompt_rows)  # checks the width
        self.prompt_rows = prompt_rows
        self.prompt_path, self.prompt_chunk = check_prompt_path(prompt_path), prompt_chunk
        self._pending = 0  # rows of the last verify pass kept by commit(), folded by the next pass
        self._verified: tuple[int, int] | None = None  # (position, rows) of a verify pass not yet committed
        self._last_verify = self._last_mtp = None  # the runners of the last verify and MTP passes
        self.draft_vocab: WorkingVocab | None = None  # None: the MTP head drafts over the full lm_head
        self._draft_table: np.ndarray | None = None  # the id table the session's draft head holds

    def set_draft_vocab(self, core: int | None = DRAFT_CORE) -> None:
        """Draft from a working vocabulary (the `core` lowest ids and the ids the session sees, gathered
        into the session: megakernel/model/draft_vocab.py), or from the full lm_head (None)."""
        config = self.config
        self.draft_vocab = None if core is None else WorkingVocab(draft_rows(config), config.defined_vocab, core)
        self._draft_table = None

    def _sync_draft_vocab(self, tokens: list[int]) -> None:
        """Rebuild the session's draft head when `tokens` bring new ids (or it was never written)."""
        if self.draft_vocab is not None and (self.draft_vocab.add(tokens) or self._draft_table is None):
            self._draft_table = self.draft_vocab.table()
            self._write_draft_vocab(self._draft_table)

    def _pass(self, tokens: list[int], speculative: bool = False):
        """One pass over `tokens` (one per row), after folding the rows a speculative pass left pending;
        returns its runner."""
        runner = self._runner(len(tokens))
        self._run(runner, tokens, self._pending, speculative)
        self._pending = 0
        return runner

    def uses_prompt_program(self, prompt_tokens: int) -> bool:
        """Whether a prompt of `prompt_tokens` tokens enters through the prompt program (prompt_path)."""
        return uses_prompt_program(self.prompt_path, prompt_tokens)

    def prepare(self, prompt_tokens: int, k: int = 0) -> None:
        """Build every Program a generation from a `prompt_tokens` prompt will run (with k drafts per verify
        pass, or none), so that none is compiled and loaded inside its timing."""
        if self.uses_prompt_program(prompt_tokens):
            self._prompt_runner()
            if k:
                self._prompt_runner(mtp=True)
        width = MAX_PROMPT_ROWS if k else self.prompt_rows  # speculation ingests the prompt 8 rows a pass
        last = prompt_tokens % width or width
        for rows in {1, min(prompt_tokens, width), last} | ({k + 1} if k else set()):
            self._runner(rows)
        if k:
            for rows in set(range(1, k + 2)) | {min(prompt_tokens, width), last}:
                self._mtp_runner(rows)
            self._mtp_runner(1, chained=True)

    def reset(self) -> None:
        """A new session (its working vocabulary too)."""
        self._reset_session()
        self._pending, self._verified = 0, None
        if self.draft_vocab is not None:
            self.draft_vocab.reset()
            self._draft_table = None

    def _last_logits(self, runner, rows: int, name: str = "logits") -> np.ndarray:
        """The last of `rows` rows of buffer `name` (a GPU backend copies just that row to the host)."""
        return self._logits(runner, rows, name)[-1]

    def run_rows(self, tokens: list[int], logits: bool = True) -> np.ndarray | None:
        """One plain pass over `tokens` (1..8); the last row's logits (logits=False: none, the pass only)."""
        runner = self._pass(tokens)
        return self._last_logits(runner, len(tokens)) if logits else None

    def start(self, prompt_ids: list[int], mtp: bool = False) -> np.ndarray:
        """A new session with the prompt in it; the last row's logits. mtp (the prompt program's path): the MTP
        head is prefilled over every prompt row but the last, whose one-row MTP pass (mtp_prefill) drafts."""
        self.reset()
        if self.uses_prompt_program(len(prompt_ids)):
            return self._prompt_program_start(prompt_ids, mtp)
        *head, last = prompt_chunks(prompt_ids, self.prompt_rows)
        for chunk in head:  # only the last pass's logits are wanted
            self._pass(chunk)
        return self.run_rows(last)

    def _prompt_program_start(self, prompt_ids: list[int], mtp: bool) -> np.ndarray:
        chunks, last_token = prompt_path_chunks(prompt_ids, self.prompt_chunk)
        if mtp:
            self._sync_draft_vocab(prompt_ids[1:])  # the ids the passes path's MTP prefill would have seen
        first = 0
        for chunk in chunks:
            self._run_prompt(self._prompt_runner(), chunk)
            if mtp:  # row i pairs the token after position first + i with the target's hidden row i
                runner = self._prompt_runner(mtp=True)
                self._set_mtp_position(runner, first)
                self._run_prompt(runner, prompt_ids[first + 1:first + 1 + len(chunk)])
            first += len(chunk)
        return self.run_rows([last_token])

    def _prompt_runner(self, mtp: bool = False):
        """The prompt program's runner (prompt_chunk rows), or the MTP head's prefill program's; a backend
        whose device does not run them refuses."""
        raise InputError(f"--prompt-path program: the {type(self).__name__} does not run the prompt program yet "
                         "(issue 21: the CPU interpreter and the reference do)")

    def step(self, token: int) -> np.ndarray:
        return self.run_rows([token])

    def greedy_step(self, token: int) -> int:
        """One plain pass; the Program's greedy choice (its ARGMAX)."""
        return self._tokens_out(self._pass([token]), 1)[0]

    def verify(self, tokens: list[int]) -> list[int]:
        """A speculative pass over [current, d1..dk]: each row's greedy choice. Its rows stay provisional
        until commit()."""
        self._verified = (self.position, len(tokens))
        self._last_verify = self._pass(tokens, speculative=True)
        return self._tokens_out(self._last_verify, len(tokens))

    def verify_logits(self) -> np.ndarray:
        """The last verify pass's logits, one row per input row (sampled acceptance needs them all)."""
        runner = self._last_verify
        return self._logits(runner, runner.program.rows)

    def commit(self, rows: int) -> None:
        """Keep the first `rows` rows of the last verify pass: the session continues from there as if
        only they had been run (the next pass folds them into the GDN state first)."""
        if self._verified is None:
            raise ValueError("commit() needs a verify() pass before it (and commits it once)")
        position, verify_rows = self._verified
        if not 1 <= rows <= verify_rows:
            raise ValueError(f"commit keeps 1..{verify_rows} rows of the verify pass, got {rows}")
        self._verified = None
        self._set_position(position + rows)
        self._pending = rows

    # --- MTP drafting: the MTP Programs on the same session ----------------------------------------------
    def mtp_prefill(self, tokens: list[int], position: int, hidden_first: int) -> int:
        """MTP rows for target positions [position, position + len(tokens)): row r pairs the target's
        hidden row hidden_first + r with tokens[r], the token at position + r + 1 (moved right-aligned,
        where an MTP pass reads them). Returns the last row's draft: the token after tokens[-1]."""
        m = len(tokens)
        self._sync_draft_vocab(tokens)
        if hidden_first != MAX_PROMPT_ROWS - m:  # a verify pass of k + 1 rows left them there already
            self._move_hidden(hidden_first, MAX_PROMPT_ROWS - m, m)
        runner = self._mtp_runner(m)
        self._set_mtp_position(runner, position)
        self._last_mtp = runner
        return self._run_mtp(runner, tokens)[-1]

    def mtp_next(self, token: int | None = None) -> int:
        """One chained MTP pass: the draft after the last one. Its input is the last MTP pass's greedy draft
        (handed off on the device) or, given, `token` (a draft sampled on the host)."""
        runner = self._mtp_runner(1, chained=True)
        self._last_mtp = runner
        return self._run_mtp(runner, None if token is None else [token])[0]

    def mtp_logits(self) -> np.ndarray:
        """The last MTP pass's logits for its last row: the distribution of the draft it chose."""
        runner = self._last_mtp
        logits = self._last_logits(runner, runner.program.rows, "mtp.logits")
        if self.draft_vocab is None:
            return logits
        return WorkingVocab.full_logits(logits, self._draft_table, self.config.vocab_size)


class InterpreterBackend(ProgramBackend):
    """The compiled Program run by the CPU interpreter, logits kept for sampling. The prompt enters through
    passes of up to `prompt_rows` tokens (M-row Programs on the same session: exact with one-row decode),
    generated tokens through one-row passes."""

    def __init__(self, weights, capacity: int, sms: int = 7, prompt_rows: int = MAX_PROMPT_ROWS,
                 prompt_path: str = "passes", prompt_chunk: int = PROMPT_CHUNK):
        from compiler import lower
        from compiler.interpreter import Interpreter

        super().__init__(prompt_rows, prompt_path, prompt_chunk)
        self._lower = lambda rows: lower(weights.config, rows=rows, sms=sms, capacity=capacity, debug_logits=True)
        self.weights, self.capacity, self.sms = weights, capacity, sms
        # The session belongs to the widest target Program, with room for the widest MTP pass; the others
        # run on it.
        widest = self._lower(MAX_PROMPT_ROWS)
        arena = session_arena_bytes(widest, weights.config, capacity, sms)
        self._prompt_programs = {}
        if prompt_path != "passes":  # the session has room for a chunk's activations too
            self._prompt_programs = prompt_programs(weights.config, prompt_chunk, capacity, sms)
            arena = max([arena] + [p.arena_bytes for p in self._prompt_programs.values()])
        self.interpreter = Interpreter(widest, weights, arena_bytes=arena)
        self._rows = {MAX_PROMPT_ROWS: self.interpreter}  # interpreters by rows, built when first needed
        self.program = self._runner(1).program
        self._buffer_index = {b.name: i for i, b in enumerate(self.interpreter.program.buffers)}
        self.config = weights.config
        self.defined_vocab = weights.config.defined_vocab

    def _runner(self, rows: int):
        from compiler.interpreter import Interpreter

        if rows not in self._rows:
            self._rows[rows] = Interpreter(self._lower(rows), self.weights, session_of=self.interpreter)
        return self._rows[rows]

    def _prompt_runner(self, mtp: bool = False):
        from compiler.interpreter import Interpreter

        key = ("prompt", mtp)
        if key not in self._rows:
            self._rows[key] = Interpreter(self._prompt_programs[mtp], self.weights, session_of=self.interpreter)
        return self._rows[key]

    def _run_prompt(self, runner, tokens: list[int]) -> None:
        runner.set_prompt_chunk(tokens)
        runner.run(1)

    def _run(self, runner, tokens: list[int], pending: int, speculative: bool) -> None:
        control = self.interpreter.view(0)[0]
        control[CTRL_PENDING], control[CTRL_SPECULATIVE] = pending, int(speculative)
        runner.set_tokens(tokens)
        runner.run(1)

    def _logits(self, runner, rows: int, name: str = "logits") -> np.ndarray:
        return runner.buffer(name)[:rows]

    def _tokens_out(self, runner, rows: int) -> list[int]:
        return runner.tokens_out()[:rows]

    def _reset_session(self) -> None:
        self.interpreter.reset()

    @property
    def position(self) -> int:
        return self.interpreter.position

    def _set_position(self, position: int) -> None:
        self.interpreter.view(0)[0, CTRL_POSITION] = position

    def _mtp_runner(self, rows: int, chained: bool = False):
        from compiler import lower_mtp
        from compiler.interpreter import Interpreter

        working = self.draft_vocab is not None
        key = ("mtp-chained" if chained else "mtp", rows, working)
        if key not in self._rows:
            program = lower_mtp(self.weights.config, rows=rows, sms=self.sms, capacity=self.capacity,
                                chained=chained, debug_logits=True, working_vocab=working)
            self._rows[key] = Interpreter(program, self.weights, session_of=self.interpreter)
        return self._rows[key]

    def _move_hidden(self, src: int, dst: int, rows: int) -> None:
        hidden = self.interpreter.view(self._buffer_index["hidden"])
        hidden[dst:dst + rows] = hidden[src:src + rows].copy()

    def _write_draft_vocab(self, table: np.ndarray) -> None:
        self.interpreter.view(self._buffer_index["mtp.draft_ids"])[0] = table
        self.interpreter.view(self._buffer_index["mtp.draft_head"])[:] = self.weights[LM_HEAD][table]

    def _set_mtp_position(self, runner, position: int) -> None:
        self.interpreter.view(0)[0, CTRL_LANE + CTRL_POSITION] = position

    def _run_mtp(self, runner, tokens: list[int] | None) -> list[int]:
        if tokens is not None:
            runner.set_tokens(tokens)
        runner.run(1)
        return runner.tokens_out()


def _sampled_tokens(backend, prompt_ids: list[int], params: SamplingParams) -> Iterator[tuple[int, int | None]]:
    """One pass per token, each sampled from its logits (the next pass runs only when asked for)."""
    rng = make_rng(params.seed)
    logits = backend.start(prompt_ids)
    while True:
        token = sample(logits, params, rng, backend.defined_vocab)
        yield token, None
        logits = backend.step(token)


def _speculative_tokens(backend, prompt_ids: list[int], k: int,
                        params: SamplingParams) -> Iterator[tuple[int, int | None]]:
    """Tokens by MTP drafts and verify passes (greedy, or sampled with the exact acceptance rule); each
    pass's drafts-accepted count with its first token."""
    for tokens, accepted in mtp_batches(backend, prompt_ids, k, backend.defined_vocab, backend.capacity, params):
        for i, token in enumerate(tokens):
            yield token, accepted if i == 0 else None


def check_prompt_ids(prompt_ids, defined_vocab: int) -> list[int]:
    """The prompt as a list of ints, or InputError naming the ids that are not integers in
    [0, defined_vocab) (the padding rows past the defined vocabulary are no tokens)."""
    if len(prompt_ids) == 0:
        raise InputError("the prompt is empty")
    bad = [(i, t) for i, t in enumerate(prompt_ids)
           if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < defined_vocab]
    if bad:
        shown = ", ".join(f"{int(t) if isinstance(t, np.integer) else t!r} at position {i}"
                          for i, t in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise InputError(f"prompt token ids must be integers in [0, {defined_vocab}): got {shown}{more}")
    return [int(t) for t in prompt_ids]


def generate(backend, tokenizer: Tokenizer, prompt_ids: list[int], max_new_tokens: int,
             params: SamplingParams = SamplingParams(), on_text: Callable[[str], None] | None = None,
             spec_k: int = 0) -> GenerationResult:
    """Generate from `prompt_ids`; spec_k > 0: speculative decoding with k drafts of the model's MTP head
    per verify pass (ProgramBackends: the interpreter and the GPU builds), greedy or sampled.

    The session holds backend.capacity tokens, prompt and generated together: generation stops with
    stop_reason "context_full" when it is full, and a prompt of capacity tokens or more returns at once
    with no tokens and that stop reason (nothing is run). A KeyboardInterrupt (Ctrl-C) while it runs ends it
    with stop_reason "interrupted" and the tokens so far. Bad requests raise InputError: an empty prompt,
    ids outside [0, backend.defined_vocab), max_new_tokens < 1, a draft count outside 1..7."""
    prompt_ids = check_prompt_ids(prompt_ids, backend.defined_vocab)
    if max_new_tokens < 1:
        raise InputError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
    if spec_k:
        check_draft_count(spec_k)
    if len(prompt_ids) >= backend.capacity:  # no room for a generated token: run nothing
        return GenerationResult(prompt_ids, [], "", CONTEXT_FULL, 0.0, 0.0, [] if spec_k else None)
    if hasattr(backend, "prepare"):  # Program backends: compile and load outside the timing
        backend.prepare(len(prompt_ids), spec_k)
    stream = tokenizer.stream()
    emit = on_text or (lambda text: None)
    t0 = time.perf_counter()
    source = (_speculative_tokens(backend, prompt_ids, spec_k, params) if spec_k
              else _sampled_tokens(backend, prompt_ids, params))
    tokens: list[int] = []
    accepted: list[int] = []
    stop_reason = LENGTH
    t_first = None
    try:
        while True:
            try:
                token, kept = next(source)
            except ModelOutputError as e:  # one line naming where, not a traceback from the sampler
                raise ModelOutputError(f"generation stopped at position {len(prompt_ids) + len(tokens)} "
                                       f"(generated token {len(tokens) + 1}): {e}") from None
            tokens.append(token)
            if kept is not None:
                accepted.append(kept)
            if t_first is None:
                t_first = time.perf_counter()
            if token in tokenizer.stop_ids:
                stop_reason = STOP
                break
            emit(stream.push(token))
            if len(tokens) == max_new_tokens:
                break
            if len(prompt_ids) + len(tokens) >= backend.capacity:
                stop_reason = CONTEXT_FULL
                break
    except KeyboardInterrupt:  # the caller gets what was generated, and why it stopped
        stop_reason = INTERRUPTED
    emit(stream.flush())
    t_end = time.perf_counter()
    if t_first is None:  # interrupted before the first token (in the prompt)
        t_first = t_end
    decode_steps = len(tokens) - 1
    text_ids = tokens[:-1] if stop_reason == STOP else tokens
    return GenerationResult(prompt_ids, tokens, tokenizer.decode(text_ids), stop_reason,
                            (t_end - t_first) * 1e3 / decode_steps if decode_steps > 0 else 0.0,
                            (t_first - t0) * 1e3, accepted if spec_k else None)
