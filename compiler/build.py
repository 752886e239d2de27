"""The compiler driver: config -> Program, pass by pass."""

from __future__ import annotations

import functools
import time

from isa import Program
from megakernel.model.config import ModelConfig

from .allocate import allocate
from .assemble import assemble
from .dependencies import add_dependencies
from .ir import Lowered
from .lowering import lower as lower_forward
from .lowering import lower_mtp as lower_mtp_pass
from .lowering import lower_mtp_prompt as lower_mtp_prompt_chunk
from .lowering import lower_prompt as lower_prompt_chunk
from .partition import partition

DEFAULT_CAPACITY = 4096


def lower(config: ModelConfig, rows: int = 1, sms: int = 132, capacity: int = DEFAULT_CAPACITY,
          debug_logits: bool = False) -> Program:
    """The target forward over `rows` tokens as a Program for `sms` blocks (one per SM)."""
    t0 = time.perf_counter()
    return _finish(lower_forward(config, rows, capacity, debug_logits), config, sms, t0,
                   {"program": "target", "debug_logits": debug_logits})


def lower_mtp(config: ModelConfig, rows: int = 1, sms: int = 132, capacity: int = DEFAULT_CAPACITY,
              chained: bool = False, debug_logits: bool = False, working_vocab: bool = False) -> Program:
    """One MTP draft pass (docs/SPEC-qwen35.md 4) over `rows` rows; `chained` reads the MTP's own previous hidden;
    `working_vocab` drafts from the session's working-vocabulary head (megakernel/model/draft_vocab.py)."""
    t0 = time.perf_counter()
    return _finish(lower_mtp_pass(config, rows, capacity, chained, debug_logits, working_vocab), config, sms, t0,
                   {"program": "mtp-chained" if chained else "mtp", "debug_logits": debug_logits,
                    "working_vocab": working_vocab})


def lower_prompt(config: ModelConfig, rows: int = 512, sms: int = 132, capacity: int = DEFAULT_CAPACITY) -> Program:
    """A prompt chunk of up to `rows` rows through every decoder layer in the prompt path's arithmetic
    (docs/ISA.md "Prompt programs"); it shares the decode Programs' session layout and weight table."""
    t0 = time.perf_counter()
    return _finish(lower_prompt_chunk(config, rows, capacity), config, sms, t0, {"program": "prompt"})


def lower_mtp_prompt(config: ModelConfig, rows: int = 512, sms: int = 132,
                     capacity: int = DEFAULT_CAPACITY) -> Program:
    """The MTP head's prefill over a prompt chunk of up to `rows` rows (docs/ISA.md "Prompt programs")."""
    t0 = time.perf_counter()
    return _finish(lower_mtp_prompt_chunk(config, rows, capacity), config, sms, t0, {"program": "mtp-prompt"})


@functools.lru_cache(maxsize=8)
def weight_order(config: ModelConfig) -> tuple[str, ...]:
    """The weight table of every Program of `config`: the target's weights in first-use order, then the
    MTP pass's others. One table (like one session layout) lets a single device weight arena serve the
    target, verify and MTP draft Programs."""
    names: list[str] = []
    passes = [lower_forward(config, 1, 1)] + ([lower_mtp_pass(config, 1, 1)] if config.mtp_num_hidden_layers else [])
    for low in passes:
        for ins in low.instrs:
            for name in ins.weights + [v for v in ins.params.values() if isinstance(v, str)]:
                if name not in names:
                    names.append(name)
    return tuple(names)


def _finish(low: Lowered, config: ModelConfig, sms: int, t0: float, meta: dict) -> Program:
    partition(low, config)
    offsets = allocate(low)
    meta = {"config": config.name, "rows": low.rows, "sms": sms, "capacity": low.capacity, **meta}
    program = assemble(low, config, offsets, sms, meta, weight_order(config))
    add_dependencies(program, sms)
    program.meta["compile_seconds"] = round(time.perf_counter() - t0, 3)
    return program
