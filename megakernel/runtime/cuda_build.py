"""Build the project's CUDA sources at run time with NVRTC (through CuPy): one place for the compile
options, the architecture and the constants that Python and CUDA must agree on.

CuPy is imported inside the functions, so this module imports on a machine without a GPU. CuPy
appends -ftz=true to every NVRTC build; device code whose results must match the NumPy reference bit
for bit therefore does its fp32 arithmetic with explicit non-flushing PTX (gemv.cuh).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

CUDA_DIR = Path(__file__).with_name("cuda")  # the shared device functions (*.cuh)


def arch_for(major: int, minor: int) -> str:
    """NVRTC's real architecture for a compute capability: sm_90a on Hopper (H100, H200)."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


@functools.cache
def define(path: Path, name: str) -> int:
    """An integer constant of a CUDA source (`#define NAME n` or `constexpr int NAME = n;`), so that
    Python's launch geometry and layout rules have one definition (read once a process: launch paths ask)."""
    text = path.read_text()
    m = re.search(rf"^\s*(?:#define {name} (\d+)\b|constexpr int {name} = (\d+);)", text, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"{path} defines no {name}")
    return int(m.group(1) or m.group(2))


@functools.cache
def module(source: Path, device_id: int, cooperative: bool = False):
    """The compiled cupy.RawModule of `source` for device `device_id` (cached), with CUDA_DIR on the
    include path; `cooperative`: its kernels launch cooperatively (all blocks co-resident, or refused)."""
    import cupy
    from cupy.cuda.compiler import CompileException

    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    arch = arch_for(props["major"], props["minor"])
    # The runtime's headers and the source's own folder's (an experiment's shared header) are on the include
    # path. CuPy's on-disk cache keys on the source text and options only, not on included headers: name the
    # headers' contents in the text, or an edited header would run a stale binary.
    folders = sorted({CUDA_DIR, source.parent})
    headers = hashlib.sha256(b"".join(p.read_bytes() for d in folders for p in sorted(d.glob("*.cuh")))).hexdigest()
    code, base = f"// headers {headers}\n" + source.read_text(), ("-std=c++17", *(f"-I{d}" for d in folders))
    if os.environ.get("MEGAKERNEL_LINEINFO"):  # source lines in compute-sanitizer's and profilers' reports
        base += ("-lineinfo",)
    if os.environ.get("MEGAKERNEL_TILE_STAMPS"):  # the GEMV tiles' phase probe (experiments/tile_phases.py)
        base += ("-DMK_TILE_STAMPS",)
    if os.environ.get("MEGAKERNEL_GRAPH_TRACE"):  # the graph build's per-block trace (experiments/graph_trace.py)
        base += ("-DMK_GRAPH_TRACE",)
    # CuPy appends its own -arch=sm_XY; NVRTC 13 takes both and builds for the "a" target. Decode needs no
    # arch-specific feature, so if an NVRTC refuses the second arch option, build with CuPy's alone rather than
    # fail: the wgmma kernels then trap (the prompt GEMM, ATTN_CAUSAL: wgmma.cuh; the experiments' probes).
    with cupy.cuda.Device(device_id):
        mod = cupy.RawModule(code=code, options=(*base, f"--gpu-architecture={arch}"),
                             enable_cooperative_groups=cooperative)
        try:
            mod.compile()
        except CompileException as e:
            if "arch" not in str(e):
                raise
            mod = cupy.RawModule(code=code, options=base, enable_cooperative_groups=cooperative)
            mod.compile()
    return mod


@functools.cache
def _max_dynamic_smem(device_id: int) -> int:
    import cupy

    return cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, device_id)


def max_dynamic_smem() -> int:
    """The most dynamic shared memory one block of the current device may opt in to (227 KB on the H200)."""
    import cupy

    return _max_dynamic_smem(cupy.cuda.Device().id)


def tile_threads() -> int:
    """Threads per block of every tile kernel (common.cuh TILE_THREADS)."""
    return define(CUDA_DIR / "common.cuh", "TILE_THREADS")


def gemv_smem_bytes(program) -> int:
    """Least dynamic shared memory of a Program's GEMV tiles (gemv_word_smem), for the neediest word."""
    from isa import GEMV_OPS

    return max([gemv_word_smem(program, w) for w in program.words if w.opcode in GEMV_OPS] or [0])


def tile_smem_bytes(program) -> int:
    """Least dynamic shared memory a Program's tiles run with: its GEMV words' (gemv_smem_bytes), where it
    has attention words their ring of three key chunks (attention.cuh ATTN_MIN_SMEM), and where it has
    GDN_CORE words the head's state and inputs (gdn.cuh GDN_MIN_SMEM)."""
    from isa import Op

    attention = any(w.opcode in (Op.ATTN_SCORES, Op.ATTN_PV) for w in program.words)
    gdn = any(w.opcode == Op.GDN_CORE for w in program.words)
    return max(gemv_smem_bytes(program), define(CUDA_DIR / "attention.cuh", "ATTN_MIN_SMEM") if attention else 0,
               define(CUDA_DIR / "gdn.cuh", "GDN_MIN_SMEM") if gdn else 0,
               max((prompt_word_smem(w) for w in program.words), default=0))


def gemm_smem_bytes() -> int:
    """prompt_gemm.cuh GEMM_SMEM: GEMM_STAGES slots of a slab and 128 weight rows' units of one k-block,
    each rounded up to 1 KB."""
    from isa.operand_layout import SLAB_BYTES

    rows, k_block = define(CUDA_DIR / "prompt_gemm.cuh", "GEMM_ROWS"), define(CUDA_DIR / "gemv.cuh", "K_BLOCK")
    return define(CUDA_DIR / "prompt_gemm.cuh", "GEMM_STAGES") * -(-(SLAB_BYTES + rows * k_block) // 1024) * 1024


def gemm_threads() -> int:
    """prompt_gemm.cuh GEMM_THREADS: two consumer warpgroups and a producer warpgroup."""
    return 32 * (define(CUDA_DIR / "prompt_gemm.cuh", "GEMM_CONSUMER_WARPS") + 4)


def word_threads(w) -> int:
    """Threads per block of a discrete word's kernel: a GEMM's warpgroups (gemm_threads), ATTN_CAUSAL's two
    warpgroups (prompt_attention.cuh CAUSAL_THREADS; refused for a head_dim other than ATTN_HEAD_DIM), every other
    kernel's TILE_THREADS."""
    from isa import GEMM_OPS, Op
    from compiler.tiling import params

    if w.opcode in GEMM_OPS:
        return gemm_threads()
    if w.opcode == Op.ATTN_CAUSAL:
        head_dim = define(CUDA_DIR / "attention.cuh", "ATTN_HEAD_DIM")
        if params(w)["head_dim"] != head_dim:
            raise ValueError(f"ATTN_CAUSAL takes heads of head_dim {head_dim}, the word's are {params(w)['head_dim']}")
        return define(CUDA_DIR / "prompt_attention.cuh", "CAUSAL_THREADS")
    return tile_threads()


def prompt_word_smem(w) -> int:
    """Dynamic shared memory of a prompt word's tile (prompt_ops.cuh, prompt_attention.cuh, prompt_gdn.cuh,
    prompt_gemm.cuh; 0 for the words that take none): PROMPT_NORM norm_rows' staging of MAX_ROWS rows and the
    weight (as fp32, a bound); ATTN_CAUSAL's queries and key and value slots; GDN_CHUNK's ChunkSmem; a GEMM's
    ring; MTP_PREPARE's PrepareSmem (prompt_ops.cuh prepare_stage_bytes)."""
    from isa import Op

    rows, k_block = define(CUDA_DIR / "common.cuh", "MAX_ROWS"), define(CUDA_DIR / "gemv.cuh", "K_BLOCK")
    if w.opcode in (Op.GEMM, Op.GEMM_GATE_UP, Op.GEMM_RESIDUAL):
        return gemm_smem_bytes()
    if w.opcode == Op.ATTN_CAUSAL:
        return define(CUDA_DIR / "prompt_attention.cuh", "CAUSAL_SMEM")
    if w.opcode == Op.PROMPT_NORM:
        return 2 * rows * w.n + 4 * w.n
    if w.opcode == Op.GDN_CHUNK:  # prompt_gdn.cuh CHUNK_SMEM: the state, the WY chunk's rows and matrices
        from compiler.tiling import params

        gdn = CUDA_DIR / "gdn.cuh"
        p = params(w)
        if p["key_dim"] != define(gdn, "GDN_DK") or p["value_dim"] > define(gdn, "GDN_MAX_COLS") or p["value_dim"] % 8:
            raise ValueError(f"GDN_CHUNK takes dk = {define(gdn, 'GDN_DK')} and dv up to {define(gdn, 'GDN_MAX_COLS')}, "
                             f"a multiple of 8 (its rows are copied 16 bytes at a time), the word has {p['key_dim']} and "
                             f"{p['value_dim']}")
        return define(CUDA_DIR / "prompt_gdn.cuh", "CHUNK_SMEM")
    if w.opcode != Op.MTP_PREPARE:  # the other prepare words stream in registers
        return 0
    blocks = define(CUDA_DIR / "prompt_ops.cuh", "PREPARE_MAX_BLOCKS")
    stage = 2 * rows * (w.n // 2) + 4 * blocks * k_block
    pad = define(CUDA_DIR / "prompt_ops.cuh", "PREPARE_PAD")  # a row's padding (elements)
    return -(-stage // 128) * 128 + 2 * 2 * rows * (blocks * k_block + pad) + rows * define(CUDA_DIR / "gemv.cuh",
                                                                                          "MAX_SLICE_BLOCKS")


def gemv_word_smem(program, w) -> int:
    """Least dynamic shared memory of one GEMV word's tiles (gemv_tile.cuh GemvSmem): the fixed part, the
    k-slice's bf16 input rows, then a weight ring of one k-block per warp (GEMV_MIN_RING bytes per byte of
    weight element), which must also hold what the prologue stages there. The discrete build's launches and
    the megakernel give a tile all the shared memory it may take: the deepest ring (D57)."""
    from isa import DType

    from ..model import plan

    width = plan.widest_slice(w.k, w.k_slices)
    elem = max(2 if e.dtype == DType.BF16 else 1 for e in program.gemv_weights(w))
    tile = CUDA_DIR / "gemv_tile.cuh"
    fixed, ring = define(tile, "GEMV_SMEM_FIXED"), define(tile, "GEMV_MIN_RING")
    stride = width + (define(CUDA_DIR / "gemv.cuh", "X_PAD") if program.rows > 1 else 0)  # gemv.cuh x_stride_of
    return fixed + 2 * program.rows * stride + 128 + max(ring * elem, prologue_stage_bytes(program, w, width))


BLOCK_RESERVE = 1024  # shared memory the hardware keeps per resident block (Hopper)


def two_share_an_sm(block_smem: int) -> bool:
    """Whether two blocks of `block_smem` bytes of dynamic shared memory fit one SM together."""
    return 2 * (block_smem + BLOCK_RESERVE) <= smem_per_sm()


def launch_program_bytes() -> int:
    """Bytes of a discrete launch's own program (common.cuh LAUNCH_PROGRAM_BYTES): the first of a GEMV
    launch's dynamic shared memory (gemv_tile.cuh GEMV_SMEM_OFFSET), a static array in the other kernels."""
    return define(CUDA_DIR / "common.cuh", "LAUNCH_PROGRAM_BYTES")


def prologue_stage_bytes(program, w, width: int) -> int:
    """What a GEMV tile's prologue stages in its ring's memory (gemv_tile.cuh norm_rows and gemv_prologue) for a
    k-slice of `width` columns; norm weights counted as fp32 (a bound)."""
    from isa import Op

    m = program.rows
    if w.opcode in (Op.NORM_GEMV, Op.NORM_GEMV_QKV, Op.NORM_GATE_UP, Op.NORM_HEAD):
        return 2 * m * w.k + 4 * (w.k if w.opcode == Op.NORM_HEAD else width)  # the head's tile 0 keeps all k
    if w.opcode == Op.MTP_FC:  # one half's rows at a time
        return 2 * m * (w.k // 2) + 4 * min(width, w.k // 2)
    return 0  # GEMV_RESIDUAL stages into the input rows' own place


@functools.cache
def _smem_per_sm(device_id: int) -> int:
    import cupy

    return cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                                device_id)


def smem_per_sm() -> int:
    """Shared memory of one SM of the current device (228 KB on the H200), blocks' reserves included."""
    import cupy

    return _smem_per_sm(cupy.cuda.Device().id)
