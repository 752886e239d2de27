"""The GPU builds behind the generation loop: backends `eager`, `graph` and `megakernel`.

The target Program is compiled with DEBUG_LOGITS, so each pass also leaves its fp32 logits for the
sampler (greedy decoding could use the device's own argmax; sampling needs the logits).
"""

from __future__ import annotations

import numpy as np

from compiler import lower
from isa.opcodes import CTRL_PENDING, CTRL_SPECULATIVE
from megakernel.device import DeviceSession, DeviceWeights
from megakernel.generate import MAX_PROMPT_ROWS, checked_commit, prompt_chunks
from megakernel.models import model_config
from megakernel.synthetic import parse_synthetic

from .launcher import DiscreteProgram


def device_weights(program, model: str, progress: bool = True) -> DeviceWeights:
    """`model` (a checkpoint directory or synthetic:<preset>[:seed]) as the Program's device weight arena;
    synthetic weights are generated on the GPU."""
    synthetic = parse_synthetic(model)
    if synthetic:
        config, seed = synthetic
        return DeviceWeights.synthetic(program, config, seed, progress=progress)
    from megakernel.models import open_weights

    return DeviceWeights.from_weightset(program, open_weights(model), progress=progress)


class DiscreteBackend:
    """mode: "eager" (launch by launch), "graph" (CUDA graph replay) or "megakernel" (the persistent
    kernel, megakernel/persistent.py: same device functions, same Program). One session holds every
    Program the backend runs (one per row count, built when first needed); the prompt enters in passes of
    up to `prompt_rows` rows. verify / commit run a speculative pass and its rollback (megakernel/
    speculative.py; docs/ISA.md "Speculative passes")."""

    def __init__(self, model: str, capacity: int, mode: str = "graph", prompt_rows: int = 1):
        if mode not in ("eager", "graph", "megakernel"):
            raise ValueError(f"mode must be eager, graph or megakernel, got {mode!r}")
        prompt_chunks([], prompt_rows)  # checks the width
        config = model_config(model)
        self._lower = lambda rows: lower(config, rows=rows, capacity=capacity, debug_logits=True)
        self.program = self._lower(1)
        self.session = DeviceSession(self._lower(MAX_PROMPT_ROWS))  # the widest Program's arena holds them all
        self.weights = device_weights(self.program, model)
        self.config, self.mode, self.capacity, self.prompt_rows = config, mode, capacity, prompt_rows
        self.vocab = config.vocab_size
        self.defined_vocab = config.defined_vocab
        self._runners: dict[int, object] = {}
        self._pending = 0  # rows of the last verify pass kept by commit(), folded by the next pass
        self._control: dict[int, int] = {}  # control words as last written (the arena starts zeroed)
        self._verified: tuple[int, int] | None = None  # (position, rows) of a verify pass not yet committed
        self.runner = self._runner(1)

    def _runner(self, rows: int):
        if rows not in self._runners:
            program = self.program if rows == 1 else self._lower(rows)
            if self.mode == "megakernel":
                from megakernel.persistent import Megakernel

                self._runners[rows] = Megakernel(program, self.weights, self.session)
            else:
                self._runners[rows] = DiscreteProgram(program, self.weights, self.session)
        return self._runners[rows]

    def _pass(self, tokens: list[int], speculative: bool = False):
        runner = self._runner(len(tokens))
        for word, value in ((CTRL_PENDING, self._pending), (CTRL_SPECULATIVE, int(speculative))):
            if self._control.get(word, 0) != value:  # plain decoding writes neither: no copies per token
                self.session.set_control(word, value)
                self._control[word] = value
        self.session.set_tokens(tokens, self.vocab, runner.program)
        if self.mode == "megakernel":
            runner.run(1)
        else:
            runner.replay() if self.mode == "graph" else runner.step()
        self._pending = 0
        return runner

    def reset(self) -> None:
        """A new session (every megakernel runner's counters too)."""
        self.session.reset()
        self._pending, self._control, self._verified = 0, {}, None
        if self.mode == "megakernel":
            for runner in self._runners.values():
                runner.clear_counters()

    @property
    def position(self) -> int:
        return self.session.position

    def run_rows(self, tokens: list[int]) -> np.ndarray:
        """One plain pass over `tokens` (1..8); the last row's logits."""
        runner = self._pass(tokens)
        return self.session.view("logits", runner.program)[len(tokens) - 1].get()

    def start(self, prompt_ids: list[int]) -> np.ndarray:
        self.reset()
        for chunk in prompt_chunks(prompt_ids, self.prompt_rows):
            logits = self.run_rows(chunk)
        return logits

    def step(self, token: int) -> np.ndarray:
        return self.run_rows([token])

    def greedy_step(self, token: int) -> int:
        """One plain pass; the Program's greedy choice."""
        self._pass([token])
        return self.session.tokens_out(1)[0]

    def verify(self, tokens: list[int]) -> list[int]:
        """A speculative pass over [current, d1..dk]: each row's greedy choice; its rows stay
        provisional until commit()."""
        self._verified = (self.session.position, len(tokens))
        self._pass(tokens, speculative=True)
        return self.session.tokens_out(len(tokens))

    def commit(self, rows: int) -> None:
        """Keep the first `rows` rows of the last verify pass (the next pass folds them first)."""
        at = checked_commit(self._verified, rows)
        self._verified = None
        self.session.set_position(at + rows)
        self._pending = rows
