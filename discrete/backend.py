"""The GPU builds behind the generation loop: backends `eager`, `graph` and `megakernel` (one row per pass).

The target Program is compiled with DEBUG_LOGITS, so each pass also leaves its fp32 logits for the
sampler (greedy decoding could use the device's own argmax; sampling needs the logits).
"""

from __future__ import annotations

import numpy as np

from compiler import lower
from megakernel.device import DeviceSession, DeviceWeights
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
    kernel, megakernel/persistent.py: same device functions, same Program)."""

    def __init__(self, model: str, capacity: int, mode: str = "graph"):
        if mode not in ("eager", "graph", "megakernel"):
            raise ValueError(f"mode must be eager, graph or megakernel, got {mode!r}")
        config = model_config(model)
        self.program = lower(config, rows=1, capacity=capacity, debug_logits=True)
        self.session = DeviceSession(self.program)
        weights = device_weights(self.program, model)
        if mode == "megakernel":
            from megakernel.persistent import Megakernel

            self.runner = Megakernel(self.program, weights, self.session)
        else:
            self.runner = DiscreteProgram(self.program, weights, self.session)
        self.mode, self.capacity = mode, capacity
        self.vocab = config.vocab_size
        self.defined_vocab = config.defined_vocab

    def start(self, prompt_ids: list[int]) -> np.ndarray:
        self.runner.reset() if self.mode == "megakernel" else self.session.reset()
        for token in prompt_ids:
            logits = self.step(token)
        return logits

    def step(self, token: int) -> np.ndarray:
        self.session.set_tokens([token], self.vocab)
        if self.mode == "megakernel":
            self.runner.run(1)
        else:
            self.runner.replay() if self.mode == "graph" else self.runner.step()
        return self.session.view("logits")[0].get()
