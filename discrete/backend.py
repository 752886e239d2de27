"""The GPU builds behind the generation loop: backends `eager`, `graph` and `megakernel`.

The target Program is compiled with DEBUG_LOGITS, so each pass also leaves its fp32 logits for the
sampler (greedy decoding could use the device's own argmax; sampling needs the logits).
"""

from __future__ import annotations

import numpy as np

from compiler import lower, lower_mtp
from isa.opcodes import CTRL_PENDING, CTRL_SPECULATIVE
from megakernel.runtime.device import DeviceSession, DeviceWeights
from megakernel.generation.generate import MAX_PROMPT_ROWS, ProgramBackend, prompt_programs, session_arena_bytes
from megakernel.generation.passes import PROMPT_CHUNK
from megakernel.model.models import model_config
from megakernel.model.synthetic import parse_synthetic
from megakernel.model.tensors import LM_HEAD

from .launcher import DiscreteProgram


def device_weights(program, model: str, progress: bool = True) -> DeviceWeights:
    """`model` (a checkpoint directory or synthetic:<preset>[:seed]) as the Program's device weight arena;
    synthetic weights are generated on the GPU."""
    synthetic = parse_synthetic(model)
    if synthetic:
        config, seed = synthetic
        return DeviceWeights.synthetic(program, config, seed, progress=progress)
    from megakernel.model.models import open_weights

    return DeviceWeights.from_weightset(program, open_weights(model), progress=progress)


def device_pass(runner, mode: str):
    """One pass of `runner` (a DiscreteProgram, or a Megakernel for mode "megakernel") enqueued with no
    host-side checks: what benchmarks time."""
    if mode == "megakernel":
        return lambda: runner.launch(1)
    return runner.launch_graph if mode == "graph" else runner.launch_eager


class DiscreteBackend(ProgramBackend):
    """mode: "eager" (launch by launch), "graph" (CUDA graph replay) or "megakernel" (the persistent
    kernel, megakernel/runtime/persistent.py: same device functions, same Program). One session holds every
    Program the backend runs (one per row count and the MTP draft passes, built when first needed);
    passes, prompts and speculation as in generate.ProgramBackend; the prompt enters `prompt_rows`
    (default 8) rows a pass, bit-identical to one-row passes (tests/gpu/test_speculative_gpu.py; prompt_path
    "passes"), or through the prompt programs in chunks of `prompt_chunk` rows ("program"; "auto", the default:
    prompts of more than 64 tokens, D70), which every mode
    runs with the discrete kernels from a CUDA graph (the megakernel mode too: its persistent kernel runs
    decode passes only; the session after the prompt is the same in every mode, so decode stays
    megakernel == graph).
    `weights`: another backend's device weights of the same model (benchmarks: several builds, one copy
    of the weights); `watchdog_s`: the megakernel's bound on one wait (longer under compute-sanitizer).
    Everything a pass uses is allocated when its runner is built (generate.ProgramBackend.prepare builds
    them all): the decode loop allocates nothing (tests/gpu/test_no_alloc_gpu.py)."""

    def __init__(self, model: str, capacity: int, mode: str = "graph", prompt_rows: int = MAX_PROMPT_ROWS,
                 weights: DeviceWeights | None = None, watchdog_s: float = 0.5, prompt_path: str = "auto",
                 prompt_chunk: int = PROMPT_CHUNK):
        if mode not in ("eager", "graph", "megakernel"):
            raise ValueError(f"mode must be eager, graph or megakernel, got {mode!r}")
        super().__init__(prompt_rows, prompt_path, prompt_chunk)
        config = model_config(model)
        self._lower = lambda rows: lower(config, rows=rows, capacity=capacity, debug_logits=True)
        self._lower_mtp = lambda rows, chained, working: lower_mtp(config, rows=rows, capacity=capacity,
                                                                   chained=chained, debug_logits=True,
                                                                   working_vocab=working)
        self._programs = {1: self._lower(1), MAX_PROMPT_ROWS: self._lower(MAX_PROMPT_ROWS)}
        self.program = self._programs[1]
        # the widest target Program's session, with room for the widest MTP pass: it holds them all
        widest = self._programs[MAX_PROMPT_ROWS]
        arena = session_arena_bytes(widest, config, capacity)
        self._prompt_programs = {}
        if self.prompt_path != "passes":  # the session holds a chunk's activations too
            self._prompt_programs = prompt_programs(config, prompt_chunk, capacity)
            arena = max([arena] + [p.arena_bytes for p in self._prompt_programs.values()])
        self.session = DeviceSession(widest, arena)
        # the config's one weight table (MTP weights too); another backend's weights may be shared
        self.weights = weights if weights is not None else device_weights(self.program, model)
        if not self.weights.serves(self.program):
            raise ValueError("the device weights were laid out for another model's weight table")
        self.config, self.mode, self.capacity, self.watchdog_s = config, mode, capacity, watchdog_s
        # the kept rows' hidden move through a scratch copy (an in-place copy would allocate a temporary
        # every pass)
        self._hidden = self.session.view("hidden")
        self._hidden_scratch = self._hidden.copy()
        self.vocab = config.vocab_size
        self.defined_vocab = config.defined_vocab
        self._runners: dict[int, object] = {}

    def _bind(self, key, lower_it):
        if key not in self._runners:
            program = lower_it()
            if self.mode == "megakernel":
                from megakernel.runtime.persistent import Megakernel

                self._runners[key] = Megakernel(program, self.weights, self.session, timeout_s=self.watchdog_s)
            else:
                self._runners[key] = DiscreteProgram(program, self.weights, self.session)
                if self.mode == "graph":
                    self._runners[key].capture()  # now, not at the first pass: nothing is allocated later
        return self._runners[key]

    def _prompt_runner(self, mtp: bool = False):
        """The prompt program's runner (or the MTP head's prefill program's): the discrete kernels, eagerly in
        eager mode, else from a CUDA graph (captured when built)."""
        key = ("prompt", mtp)
        if key not in self._runners:
            if mtp not in self._prompt_programs:
                raise ValueError("this model has no MTP head" if mtp else
                                 "the backend was built with prompt_path 'passes': no prompt program")
            runner = DiscreteProgram(self._prompt_programs[mtp], self.weights, self.session)
            if self.mode != "eager":
                runner.capture()
            self._runners[key] = runner
        return self._runners[key]

    def _run_prompt(self, runner, tokens: list[int]) -> None:
        self.session.set_prompt_chunk(tokens, self.vocab, runner.program)
        runner.launch_eager() if self.mode == "eager" else runner.launch_graph()

    def _runner(self, rows: int):
        return self._bind(rows, lambda: self._programs.get(rows) or self._lower(rows))

    def _launch(self, runner) -> None:
        if self.mode == "megakernel":
            runner.run(1)
        else:
            runner.replay() if self.mode == "graph" else runner.step()

    def _run(self, runner, tokens: list[int], pending: int, speculative: bool) -> None:
        self.session.set_control(CTRL_PENDING, pending)
        self.session.set_control(CTRL_SPECULATIVE, int(speculative))
        self.session.set_tokens(tokens, self.vocab, runner.program)
        self._launch(runner)

    def _logits(self, runner, rows: int, name: str = "logits") -> np.ndarray:
        return self.session.view(name, runner.program)[:rows].get()

    def _last_logits(self, runner, rows: int, name: str = "logits") -> np.ndarray:
        return self.session.view(name, runner.program)[rows - 1].get()

    def _tokens_out(self, runner, rows: int) -> list[int]:
        return self.session.tokens_out(rows)

    def _reset_session(self) -> None:
        """The session (every megakernel runner's counters too)."""
        self.session.reset()
        if self.mode == "megakernel":
            for runner in self._runners.values():
                if not isinstance(runner, DiscreteProgram):  # the prompt programs' runners
                    runner.clear_counters()

    @property
    def position(self) -> int:
        return self.session.position

    def _set_position(self, position: int) -> None:
        self.session.set_position(position)

    def _mtp_runner(self, rows: int, chained: bool = False):
        working = self.draft_vocab is not None
        return self._bind(("mtp-chained" if chained else "mtp", rows, working),
                          lambda: self._lower_mtp(rows, chained, working))

    def _write_draft_vocab(self, table: np.ndarray) -> None:
        """The ids, then their lm_head rows gathered on the device (no host copy of the rows)."""
        import cupy

        ids = self.session.view("mtp.draft_ids")
        ids.set(table.reshape(ids.shape))
        cupy.take(self.weights.tensor(self.program, LM_HEAD), ids[0], axis=0, out=self.session.view("mtp.draft_head"))

    def _move_hidden(self, src: int, dst: int, rows: int) -> None:
        hidden, scratch = self._hidden, self._hidden_scratch
        scratch[:rows] = hidden[src:src + rows]
        hidden[dst:dst + rows] = scratch[:rows]

    def _set_mtp_position(self, runner, position: int) -> None:
        self.session.set_position(position, runner.program)

    def _run_mtp(self, runner, tokens: list[int] | None) -> list[int]:
        if tokens is not None:
            self.session.set_tokens(tokens, self.vocab, runner.program)
        self._launch(runner)
        return self.session.tokens_out(program=runner.program)
