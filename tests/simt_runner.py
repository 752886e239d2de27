"""A Program's words on the CPU: the engine's own tile functions (the prompt programs' prompt_ops.cuh,
prompt_gdn.cuh, prompt_attention.cuh, prompt_gemm.cuh; the decode words' gemv_tile.cuh, gdn.cuh, attention.cuh,
small_ops.cuh, called as discrete/kernels.cu or the megakernel calls them) built by the host's g++ against
tests/simt/simt.h, which runs a CUDA block's threads as fibers that interleave only at barriers, shuffles, mbarrier
waits and warp-wide instructions (mma.sync, ldmatrix and wgmma modelled from the PTX ISA's fragment layouts). A word
runs from a copy of the CPU interpreter's arena, so tests/gpu/per_word.py's check compares it with the interpreter
exactly as on the GPU.

Why: the prompt kernels were written in sessions without a GPU (D68-D70), and the decode kernels' levers are
prepared in such sessions too (D77); this finds their indexing, barrier and arithmetic mistakes before a GPU
session spends device time on them; its copies stay in flight until the waits the GPU requires, so a missing wait
shows too. What it cannot find: anything of timing, fences, or global memory shared between blocks (one block runs
at a time, so a split-K group's last slice is its last tile). Arithmetic: the host's IEEE fp32, glibc's expf and
log1pf (CUDA's may differ in the last bit), a tensor-core product's sums in double rounded once (the hardware's own
order is not modelled): the comparison's tolerances cover these as they cover the GPU's.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from isa import COUNTER_STRIDE, GEMV_OPS, DType, Op, Program
from megakernel.runtime import cuda_build
from megakernel.runtime.weight_layout import to_units

SIMT_DIR = Path(__file__).parent / "simt"
PROMPT_CPU_OPS = frozenset({Op.PROMPT_EMBED, Op.PROMPT_ADVANCE, Op.PROMPT_QKV, Op.PROMPT_CONV, Op.PROMPT_NORM,
                            Op.NORM_PREPARE, Op.PREPARE, Op.MTP_PREPARE, Op.GATED_PREPARE, Op.GDN_CHUNK,
                            Op.ATTN_CAUSAL, Op.GEMM, Op.GEMM_GATE_UP, Op.GEMM_RESIDUAL})
DECODE_CPU_OPS = frozenset(GEMV_OPS | {Op.EMBED, Op.GDN_CORE, Op.ATTN_SCORES, Op.ATTN_PV, Op.ATTN_MERGE, Op.ARGMAX,
                                       Op.HANDOFF})
CPU_OPS = PROMPT_CPU_OPS | DECODE_CPU_OPS
H200_SMEM_OPT_IN = 232448  # a block's dynamic shared memory opt-in on the H200 (docs/HOPPER.md)


def _cuda_include() -> Path | None:
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda_bf16.h").exists():
            return Path(root) / "include"
    return None


def unavailable() -> str | None:
    """Why the CPU runner cannot be built here (None: it can)."""
    if shutil.which("g++") is None:
        return "no g++"
    if _cuda_include() is None:
        return "no CUDA headers (cuda_bf16.h) under $CUDA_HOME or /usr/local/cuda"
    return None


def _sources() -> list[Path]:
    return sorted(SIMT_DIR.glob("*")) + sorted(cuda_build.CUDA_DIR.glob("*.cuh"))


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    """tests/simt/prompt_words.cpp built once per source version (a shared library in the temp directory)."""
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in _sources())).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"megakernel-simt-{digest}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cmd = ["g++", "-std=c++20", "-O2", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared",
               "-DMK_HOST_SIMT", "-include", "cstdio", f"-I{SIMT_DIR}", f"-I{cuda_build.CUDA_DIR}",
               f"-I{_cuda_include()}", str(SIMT_DIR / "prompt_words.cpp"), "-o", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"building the CPU runner failed:\n{done.stderr[-4000:]}")
        tmp.replace(out)
    lib = ctypes.CDLL(str(out))
    lib.simt_run_launch.restype = ctypes.c_int
    lib.simt_run_launch.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                    ctypes.c_int]
    lib.simt_f16_operand.restype = ctypes.c_int
    lib.simt_f16_operand.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                     ctypes.c_char_p, ctypes.c_int]
    return lib


def weight_arena(program: Program, weights) -> np.ndarray:
    """The weight arena as DeviceWeights.from_weightset lays it out (fp8 weights in units), in host memory."""
    from megakernel.runtime.device import host_scale_bytes, host_weight_bytes

    arena = np.zeros(max(program.weight_bytes, 1), np.uint8)
    for e in program.weights:
        raw = host_weight_bytes(e, weights)
        if e.dtype == DType.FP8_E4M3:
            raw = to_units(raw)
        arena[e.offset:e.offset + raw.size] = raw.ravel()
        if e.scale_dtype != DType.NONE:
            scales = host_scale_bytes(e, weights).ravel()
            arena[e.scale_offset:e.scale_offset + scales.size] = scales
    return arena


class HostArena:
    """A session arena in host memory, with the one method of a CuPy array the per-word check calls."""

    def __init__(self, size: int):
        self.data = np.zeros(size, np.uint8)

    def get(self) -> np.ndarray:
        return self.data.copy()


class HostSession:
    def __init__(self, program: Program):
        self.arena = HostArena(program.arena_bytes)

    def load(self, arena_bytes: np.ndarray) -> None:
        if arena_bytes.size != self.arena.data.size:
            raise ValueError(f"an arena of {arena_bytes.size} bytes for a session of {self.arena.data.size}")
        self.arena.data[:] = arena_bytes


class HostProgram:
    """`program`'s words run one at a time on the CPU (DiscreteProgram.run_word's contract), each with all the
    shared memory an H200 block may take, as the discrete build gives its GEMV, attention and GDN tiles."""

    def __init__(self, program: Program, weights, megakernel: bool = False, target: Program | None = None):
        """megakernel: the decode words' tiles as the megakernel calls them (megakernel.cu run_tile; its GEMV tiles
        primed before their inputs, or not, tile by tile in turn), each of the Program's G blocks its range of a
        word's tiles in order in one shared memory; else as the discrete kernels do, a block a tile. target: the
        Program whose session and weight arena the words run in (an MTP draft Program's target), else `program`."""
        from discrete.launch_program import launch_program

        home = target or program
        self.program, self.session, self.megakernel = program, HostSession(home), megakernel
        self.weights = weight_arena(home, weights)
        self._launch = {i: launch_program(program, i) for i, w in enumerate(program.words) if w.opcode in CPU_OPS}
        room = H200_SMEM_OPT_IN - -(-cuda_build.launch_program_bytes() // 1024) * 1024  # as DiscreteProgram._room
        need = cuda_build.tile_smem_bytes(program)  # the tiles' least, checked once as the launcher checks it
        if need > room:
            raise ValueError(f"the tiles need {need} bytes of shared memory, a block has {room}")
        self.smem = np.zeros(room, np.uint8)
        # the split-K arrival counters, laid out as the discrete launcher's (zero between words)
        self.arrivals = np.zeros(max(1, len(program.counters)) * COUNTER_STRIDE, np.uint32)

    def run_word(self, index: int) -> None:
        w = self.program.words[index]
        if index not in self._launch:
            raise ValueError(f"word {index} ({w.opcode.name}) does not run on the CPU")
        need = cuda_build.prompt_word_smem(w)  # a prompt word's own need (0: a decode word), as the launcher asks
        if need > self.smem.size:
            raise ValueError(f"word {index} ({w.opcode.name}) needs {need} bytes of shared memory, "
                             f"a block has {self.smem.size}")
        self.smem.fill(0xA5)  # shared memory is not zeroed on the GPU either
        message = ctypes.create_string_buffer(512)
        rc = library().simt_run_launch(self._launch[index], self.session.arena.data.ctypes.data,
                                       self.weights.ctypes.data, cuda_build.word_threads(w), self.smem.ctypes.data,
                                       self.smem.size, self.arrivals.ctypes.data,
                                       self.program.sms if self.megakernel else 0, message, len(message))
        if rc:
            raise RuntimeError(f"word {index} ({w.opcode.name}) on the CPU: {message.value.decode()}")
        if self.arrivals.any():
            raise RuntimeError(f"word {index} ({w.opcode.name}) on the CPU left split-K arrivals counted")


__all__ = ["CPU_OPS", "DECODE_CPU_OPS", "PROMPT_CPU_OPS", "HostProgram", "library", "unavailable", "weight_arena"]
