"""The megakernel's host side: one cooperative launch of megakernel/runtime/cuda/megakernel.cu runs N passes of a
compiled Program on a device session, synchronised by counters in global memory.

Counters belong to this runner: they only grow, so each launch passes the passes already run through it
(`step_base`) and the kernel's waits target E x (step_base + step + 1 - lag). Other builds may run the same
session in between (the counters do not describe the arena, only this kernel's progress). After a
watchdog stop the counters are inconsistent: the runner zeroes them and the session must be reset.

CuPy is imported inside the methods: the package imports on machines without a GPU.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from isa import COUNTER_STRIDE, PROMPT_OPS, Program

from . import cuda_build
from .device import DeviceSession, DeviceWeights
from ..errors import MegakernelError

SOURCE = cuda_build.CUDA_DIR / "megakernel.cu"
ERROR_WORDS = 8  # flag, block, word, counter, expected, seen, 0, 0; then a u64 clock
ERROR_PLACES = ERROR_WORDS + 2  # then per block: step + 1 (0: no record), word, tile, 0
TRACE_WORDS = 8  # u32 per (step, word, block) record: start, ready, end (u64 ns), tiles | polls << 32


class MegakernelStall(MegakernelError):
    """The watchdog stopped the kernel: a wait was not satisfied in time. `report_path`: the JSON stall
    report (stall_report) written before the counters were cleared."""

    def __init__(self, message: str, report_path: str):
        super().__init__(f"{message}\nstall report: {report_path}")
        self.report_path = report_path


def stall_report(program: Program, error: np.ndarray, held: np.ndarray, timeout_s: float) -> dict:
    """What the kernel left at a stall: the watchdog record, where each block stood when it left (blocks
    with no place had finished their passes or never waited) and every counter against its count per pass."""
    names = program.meta.get("instructions", [])

    def name(w: int) -> str:
        return names[w] if w < len(names) else ""
    block, word, counter, expected, seen = (int(v) for v in error[1:6])
    places = np.asarray(error[ERROR_PLACES:ERROR_PLACES + 4 * program.sms]).reshape(program.sms, 4)
    blocks = []
    for b, (step1, w, tile, _) in enumerate(places.tolist()):
        if step1 == 0:
            blocks.append({"block": b, "place": None})
        else:
            blocks.append({"block": b, "pass": step1 - 1, "word": w, "instruction": name(w), "tile": tile})
    counters = [{"counter": i, "name": e.name, "holds": int(h), "per_pass": e.expected, "producer": e.producer}
                for i, (e, h) in enumerate(zip(program.counters, held, strict=True))]
    return {"watchdog": {"block": block, "word": word, "instruction": name(word), "counter": counter,
                         "expected": expected,
                         "seen": seen, "timeout_s": timeout_s},
            "program": dict(program.meta), "blocks": blocks, "counters": counters}


def _module():
    import cupy

    return cuda_build.module(SOURCE, cupy.cuda.Device().id, cooperative=True)


class Megakernel:
    """`program` bound to device weights and a session, run by the persistent kernel. `run(steps)` runs
    `steps` passes in one launch and checks the watchdog; `launch(steps)` only enqueues (benchmarks)."""

    def __init__(self, program: Program, weights: DeviceWeights, session: DeviceSession, timeout_s: float = 0.5,
                 report_dir: str | None = None):
        """timeout_s: the watchdog's bound on one wait; report_dir: where stall reports go (default the
        system's temporary directory)."""
        unsupported = sorted({w.opcode.name for w in program.words if w.opcode in PROMPT_OPS})
        if unsupported:  # the device interpreter's default case would run them as GEMVs
            raise MegakernelError(f"the megakernel does not run {', '.join(unsupported)} yet: prompt programs run on "
                                  "the discrete build and the CPU interpreter (issue 21)")
        import cupy

        if not weights.serves(program):
            raise ValueError("the device weights were laid out for another Program's weight table")
        if not session.serves(program):
            raise ValueError("the session was laid out for another Program (session buffers or a smaller arena)")
        sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
        if program.sms > sms:
            raise MegakernelError(f"the Program was compiled for {program.sms} blocks; this device has {sms} SMs, "
                                  "so they cannot all be resident at once")
        self.program, self.weights, self.session = program, weights, session
        self.bytes = cupy.asarray(np.frombuffer(program.to_bytes(), dtype=np.uint8))
        self.threads = cuda_build.tile_threads()
        mod = _module()
        self.kernels = {name: mod.get_function(name) for name in ("megakernel", "megakernel_trace")}
        static = max(k.shared_size_bytes for k in self.kernels.values())
        self.smem = cuda_build.max_dynamic_smem() - static  # the GEMV and attention rings take what the rest leaves
        need = cuda_build.tile_smem_bytes(program)
        if need > self.smem:
            raise MegakernelError(f"the tiles need {need} bytes of shared memory, "
                                  f"the device offers {self.smem}")
        for name, kernel in self.kernels.items():
            kernel.max_dynamic_shared_size_bytes = self.smem
            if kernel.max_threads_per_block < self.threads:
                raise MegakernelError(f"{name}: {kernel.num_regs} registers per thread allow "
                                      f"{kernel.max_threads_per_block} threads per block, the tiles need {self.threads}")
        # Co-residency, from the occupancy API: blocks that wait on each other must all be resident.
        self.resident_per_sm = min(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, self.threads, self.smem) for kernel in self.kernels.values())
        if self.resident_per_sm * sms < program.sms:
            raise MegakernelError(f"{program.sms} blocks of {self.threads} threads with {self.smem} bytes of shared "
                                  f"memory cannot all be resident: {self.resident_per_sm} per SM x {sms} SMs")
        self.counters = cupy.zeros(max(1, len(program.counters)) * COUNTER_STRIDE, dtype=cupy.uint32)
        self.error = cupy.zeros(ERROR_PLACES + 4 * program.sms, dtype=cupy.uint32)
        self.timeout_ns = int(timeout_s * 1e9)
        self.report_dir = report_dir
        self.steps_run = 0

    def reset(self) -> None:
        """A new session: the arena reset, counters and the step count back to zero."""
        self.session.reset()
        self.clear_counters()

    def clear_counters(self) -> None:
        self.counters.fill(0)
        self.error.fill(0)
        self.steps_run = 0

    def launch(self, steps: int = 1, trace=None) -> None:
        """Enqueue one cooperative launch of `steps` passes on the current stream (no checks, no sync)."""
        import cupy

        name = "megakernel" if trace is None else "megakernel_trace"
        args = (self.session.arena, self.weights.data, self.bytes, self.counters, self.error,
                np.int32(self.steps_run), np.int32(steps), np.uint64(self.timeout_ns))
        if trace is not None:
            args += (trace,)
        try:
            self.kernels[name]((self.program.sms,), (self.threads,), args, shared_mem=self.smem)
        except cupy.cuda.driver.CUDADriverError as e:
            raise MegakernelError(f"cooperative launch of {self.program.sms} blocks x {self.threads} threads with "
                                  f"{self.smem} bytes of shared memory refused ({e}): the blocks cannot all be "
                                  "resident at once") from e
        self.steps_run += steps

    def run(self, steps: int = 1, trace=None) -> None:
        """`steps` passes in one launch, refused past the session's capacity; raises MegakernelStall (and
        clears the counters; reset the session) if the watchdog stopped the kernel."""
        self.session.check_room(steps, self.program)
        self.launch(steps, trace)
        self.check()

    def check(self) -> None:
        """Wait for the kernel; raise MegakernelStall naming the stalled instruction if the watchdog fired."""
        record = self.error.get()
        if record[0] == 0:
            return
        block, word, counter, expected, seen = (int(v) for v in record[1:6])
        held = self.counters.get()[::COUNTER_STRIDE][:len(self.program.counters)]
        path = self._write_report(stall_report(self.program, record, held, self.timeout_ns / 1e9))
        self.clear_counters()
        raise MegakernelStall(
            f"watchdog: block {block} waited {self.timeout_ns / 1e9:g} s for counter {counter} "
            f"({self.program.counters[counter].name}) to reach {expected} (it holds {seen}) before the "
            f"tiles of instruction {word}; every block stopped, counters cleared, reset the session.\n"
            f"{self._first_incomplete(held)}", path)

    def _write_report(self, report: dict) -> str:
        fd, path = tempfile.mkstemp(prefix="megakernel_stall_", suffix=".json", dir=self.report_dir)
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=1)
        return path

    def _first_incomplete(self, held: np.ndarray) -> str:
        """Waits cascade: name the earliest instruction (first step, then program order) with a completion
        counter short of its count, and the state of its own waits. (A split-K arrival counter is zeroed by
        the slice that finishes its group: it says nothing about passes.)"""
        entries = self.program.counters
        arrivals = {c for w in self.program.words for c in range(w.arrival_base, w.arrival_base + w.arrival_count)}
        done_steps = [1 << 30 if c in arrivals or not e.expected else int(h) // e.expected
                      for c, (h, e) in enumerate(zip(held, entries, strict=True))]
        step = min(done_steps)
        index = min(e.producer for e, d in zip(entries, done_steps, strict=True) if d == step)
        w = self.program.words[index]
        waits = [f"c{c} ({entries[c].name}) needs {wt.expected * (step + 1 - wt.lag)}, holds {int(held[c])}"
                 for wt in w.waits for c in wt.counters()]
        return (f"first incomplete instruction (session pass {step}):\n{self.program.line(index, w)}\n"
                f"its waits: {'; '.join(waits) or 'none'}")

    def trace_buffer(self, steps: int):
        """A zeroed trace buffer for `steps` passes: [steps, words, blocks, 4] uint64."""
        import cupy

        return cupy.zeros((steps, len(self.program.words), self.program.sms, TRACE_WORDS // 2), dtype=cupy.uint64)


__all__ = ["Megakernel", "MegakernelStall"]
