"""The GPU builds behind the generation loop: backends `eager`, `graph` and `megakernel`.

The target Program is compiled with DEBUG_LOGITS, so each pass also leaves its fp32 logits for the
sampler (greedy decoding could use the device's own argmax; sampling needs the logits).
"""

from __future__ import annotations

import numpy as np

from compiler import lower
from isa.opcodes import CTRL_PENDING, CTRL_SPECULATIVE
from megakernel.device import DeviceSession, DeviceWeights
from megakernel.generate import MAX_PROMPT_ROWS, ProgramBackend
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


class DiscreteBackend(ProgramBackend):
    """mode: "eager" (launch by launch), "graph" (CUDA graph replay) or "megakernel" (the persistent
    kernel, megakernel/persistent.py: same device functions, same Program). One session holds every
    Program the backend runs (one per row count, built when first needed); passes, prompts and
    speculation as in generate.ProgramBackend."""

    def __init__(self, model: str, capacity: int, mode: str = "graph", prompt_rows: int = 1):
        if mode not in ("eager", "graph", "megakernel"):
            raise ValueError(f"mode must be eager, graph or megakernel, got {mode!r}")
        super().__init__(prompt_rows)
        config = model_config(model)
        self._lower = lambda rows: lower(config, rows=rows, capacity=capacity, debug_logits=True)
        self._programs = {1: self._lower(1), MAX_PROMPT_ROWS: self._lower(MAX_PROMPT_ROWS)}
        self.program = self._programs[1]
        self.session = DeviceSession(self._programs[MAX_PROMPT_ROWS])  # the widest Program's arena holds them all
        self.weights = device_weights(self.program, model)
        self.config, self.mode, self.capacity = config, mode, capacity
        self.vocab = config.vocab_size
        self.defined_vocab = config.defined_vocab
        self._runners: dict[int, object] = {}
        self._control: dict[int, int] = {}  # control words as last written (the arena starts zeroed)
        self.runner = self._runner(1)

    def _runner(self, rows: int):
        if rows not in self._runners:
            program = self._programs.get(rows) or self._lower(rows)
            if self.mode == "megakernel":
                from megakernel.persistent import Megakernel

                self._runners[rows] = Megakernel(program, self.weights, self.session)
            else:
                self._runners[rows] = DiscreteProgram(program, self.weights, self.session)
        return self._runners[rows]

    def _run(self, runner, tokens: list[int], pending: int, speculative: bool) -> None:
        for word, value in ((CTRL_PENDING, pending), (CTRL_SPECULATIVE, int(speculative))):
            if self._control.get(word, 0) != value:  # plain decoding writes neither: no copies per token
                self.session.set_control(word, value)
                self._control[word] = value
        self.session.set_tokens(tokens, self.vocab, runner.program)
        if self.mode == "megakernel":
            runner.run(1)
        else:
            runner.replay() if self.mode == "graph" else runner.step()

    def _logits(self, runner, rows: int) -> np.ndarray:
        return self.session.view("logits", runner.program)[rows - 1].get()

    def _tokens_out(self, runner, rows: int) -> list[int]:
        return self.session.tokens_out(rows)

    def _reset_session(self) -> None:
        """The session (every megakernel runner's counters too)."""
        self.session.reset()
        self._control = {}
        if self.mode == "megakernel":
            for runner in self._runners.values():
                runner.clear_counters()

    @property
    def position(self) -> int:
        return self.session.position

    def _set_position(self, position: int) -> None:
        self.session.set_position(position)
