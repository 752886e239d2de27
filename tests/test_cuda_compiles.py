"""Every megakernel/runtime/cuda/*.cu and discrete/*.cu builds for the H200 (sm_90a) with nvcc, and no kernel spills
registers.

Runs on the CPU: nvcc needs no GPU. The same files are built at run time by NVRTC (through CuPy),
so they must also stay free of anything NVRTC lacks (standard library headers); the GPU tests
check that side.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from megakernel.model import fp8
from megakernel.runtime import gpu_synthetic

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "megakernel" / "runtime" / "cuda"
SOURCES = sorted(CUDA_DIR.glob("*.cu")) + sorted((ROOT / "discrete").glob("*.cu"))
NVCC = shutil.which("nvcc")

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA toolkit) is not on PATH")


def ptxas_report(log: str) -> dict[str, str]:
    """Entry function -> its ptxas lines (registers, stack frame, spills; those of the functions it calls
    follow), from -Xptxas -v output."""
    parts = re.split(r"ptxas info\s*: Compiling entry function '([^']+)'", log)
    return dict(zip(parts[1::2], parts[2::2]))


# A called (not inlined) function saves the callee-saved registers it uses on entry: ptxas counts those
# stores as spills. The megakernel calls its GDN tile and a GEMV tile's input rows (docs/DECISIONS.md D16,
# D31); CALL_SAVES bytes of saves per call are allowed there, nothing more, and entry functions (every kernel's
# own body) must not spill at all.
CALL_SAVES = 8


def nvcc_object(source: Path, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """nvcc -c of one source for sm_90a with the runtime's headers on the include path."""
    cmd = [NVCC, "-arch=sm_90a", "-std=c++17", *flags, f"-I{CUDA_DIR}", "-c", "-o", str(tmp_path / f"{source.stem}.o"),
           str(source)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@needs_nvcc
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_builds_for_sm90a_without_spills(source, tmp_path):
    result = nvcc_object(source, tmp_path, "-Xptxas", "-v")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    kernels = ptxas_report(log)
    assert kernels, f"ptxas reported no entry functions:\n{log}"
    for name, report in kernels.items():
        functions = re.findall(r"Function properties for (\S+)\s*\n\s*\d+ bytes stack frame, (\d+) bytes spill stores, "
                               r"(\d+) bytes spill loads", report)
        assert any(f == name for f, _, _ in functions), f"{name}: no spill figures in\n{report}"
        for function, stores, loads in functions:
            limit = 0 if function == name else CALL_SAVES
            assert int(stores) <= limit and int(loads) <= limit, f"{function} (in {name}) spills registers:\n{report}"


EXPERIMENT_SOURCES = sorted((ROOT / "experiments").glob("*.cu"))


@needs_nvcc
@pytest.mark.parametrize("source", EXPERIMENT_SOURCES, ids=lambda p: p.name)
def test_experiment_kernels_build_for_sm90a(source, tmp_path):
    """The experiments' own kernels (run only on the device) at least compile, so a broken one is found
    here rather than in a device call."""
    result = nvcc_object(source, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_synthetic_kernels_exist_and_python_agrees_on_their_constants():
    source = (CUDA_DIR / "synthetic.cu").read_text()
    for kernel in ("synth_bf16", "synth_fp8"):
        assert re.search(rf'extern "C" __global__ void __launch_bounds__\([A-Z0-9_]+\)\s*{kernel}\(', source), kernel
    assert f"__launch_bounds__({gpu_synthetic.BF16_THREADS})" in source
    assert gpu_synthetic.fp8_threads() % 32 == 0 and fp8.BLOCK % (gpu_synthetic.fp8_threads() // 32) == 0
    assert gpu_synthetic.arch_for(9, 0) == "sm_90a" and gpu_synthetic.arch_for(8, 9) == "sm_89"


def test_gemv_constants_agree_with_the_python_plan():
    from discrete import kernels

    from megakernel.runtime import cuda_build
    from megakernel.model import plan

    kernels.check_shared_constants()  # K_BLOCK, ROW_BLOCK, MAX_ROWS of gemv.cuh == plan / isa
    # one even and one odd warp per 16-row strip of a row group
    assert kernels.gemv_threads() == 2 * (plan.ROW_BLOCK // cuda_build.define(kernels.GEMV_HEADER, "WARP_ROWS")) * 32
    with pytest.raises(RuntimeError, match="defines no NOT_A_CONSTANT"):
        cuda_build.define(kernels.GEMV_HEADER, "NOT_A_CONSTANT")


H200_MAX_DYNAMIC_SMEM = 232448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on the H200 (227 KB)


@pytest.mark.parametrize("rows", [1, 8])
def test_gemv_tiles_fit_the_h200_shared_memory_with_a_ring(rows):
    """The widest k-slice's input rows plus the fixed part leave at least the two-slot weight ring, for the
    27B target and the MTP programs, over the full or the working vocabulary (the megakernel's static
    shared memory taken off too)."""
    from compiler import lower, lower_mtp
    from isa import Op
    from megakernel.runtime import cuda_build
    from megakernel.model.config import preset

    config = preset("qwen3.5-27b")
    for program in (lower(config, rows=rows, sms=132, capacity=64), lower_mtp(config, rows=rows, sms=132, capacity=64),
                    lower_mtp(config, rows=rows, sms=132, capacity=64, working_vocab=True)):
        need = cuda_build.gemv_smem_bytes(program)
        assert need <= H200_MAX_DYNAMIC_SMEM - 4096, f"{need} bytes needed, M = {rows}"
        # and the attention tiles' three-chunk ring and the GDN tile's state, which every Program with those
        # words needs
        tiles = cuda_build.tile_smem_bytes(program)
        has_gdn = any(w.opcode == Op.GDN_CORE for w in program.words)
        gdn = cuda_build.define(CUDA_DIR / "gdn.cuh", "GDN_MIN_SMEM") if has_gdn else 0
        assert max(need, cuda_build.define(CUDA_DIR / "attention.cuh", "ATTN_MIN_SMEM"), gdn) == tiles
        assert tiles <= H200_MAX_DYNAMIC_SMEM - 4096, f"{tiles} bytes needed, M = {rows}"


def test_the_device_opcodes_and_prompt_constants_are_the_isas():
    """common.cuh's Opcode enum names every isa.Op at its value (the prompt programs' too), and the prompt
    device functions' constants are the plan's and isa/operand_layout.py's."""
    from isa import Op
    from isa.opcodes import CTRL_ROWS, MAX_ROWS
    from isa.operand_layout import GROUP_BYTES, GROUP_TOKENS, SLAB_BYTES, X_BYTES
    from megakernel.model import plan
    from megakernel.runtime import cuda_build

    enum = dict(re.findall(r"OP_([A-Z_0-9]+) = (\d+)", (CUDA_DIR / "common.cuh").read_text()))
    assert {name: int(v) for name, v in enum.items()} == {op.name: op.value for op in Op}
    prompt = CUDA_DIR / "prompt_ops.cuh"
    assert cuda_build.define(prompt, "PROMPT_TOKEN_TILE") == plan.PROMPT_TOKEN_TILE
    assert cuda_build.define(prompt, "PREPARE_MAX_BLOCKS") == plan.PROMPT_PREPARE_BLOCKS
    causal = CUDA_DIR / "prompt_attention.cuh"
    assert cuda_build.define(causal, "CAUSAL_KEY_TILE") == plan.PROMPT_KEY_TILE
    assert cuda_build.define(causal, "CAUSAL_ROWS") == plan.PROMPT_ATTN_ROWS
    from megakernel.reference import gdn
    assert cuda_build.define(CUDA_DIR / "prompt_gdn.cuh", "WY_CHUNK") == gdn.CHUNK
    assert cuda_build.define(CUDA_DIR / "prompt_gdn.cuh", "GDN_SPLIT") == plan.PROMPT_GDN_SPLIT
    assert cuda_build.define(CUDA_DIR / "common.cuh", "CTRL_ROWS") == CTRL_ROWS
    assert (X_BYTES, SLAB_BYTES) == (plan.PROMPT_TOKEN_TILE * plan.K_BLOCK * 2, X_BYTES + plan.PROMPT_TOKEN_TILE * 4)
    # a prepare tile is one 8-token group of the slabs, MAX_ROWS rows (prompt_ops.cuh SLAB_GROUP_BYTES)
    assert plan.PROMPT_PREPARE_ROWS == GROUP_TOKENS == MAX_ROWS and GROUP_BYTES == GROUP_TOKENS * plan.K_BLOCK * 2


def test_the_27b_prompt_words_fit_the_h200_shared_memory():
    from compiler import lower_mtp_prompt, lower_prompt
    from isa import Op
    from megakernel.runtime import cuda_build
    from megakernel.model.config import preset

    config = preset("qwen3.5-27b")
    for program in (lower_prompt(config, rows=1024, sms=132, capacity=64),
                    lower_mtp_prompt(config, rows=1024, sms=132, capacity=64)):
        need = cuda_build.tile_smem_bytes(program)
        assert 0 < need <= H200_MAX_DYNAMIC_SMEM - 4096, f"{need} bytes needed"
        causal = [w for w in program.words if w.opcode == Op.ATTN_CAUSAL]
        assert all(cuda_build.word_threads(w) == 256 for w in causal)  # two warpgroups of 64 query rows


def test_causal_attention_takes_any_group_and_refuses_another_head_dim():
    """A tile is one query head (D75), so any number of query heads a KV head runs; the tiles are specialised to
    head_dim 256 (prompt_attention.cuh), so another gets one line."""
    import dataclasses

    from compiler import lower_prompt
    from isa import Op
    from megakernel.model.config import preset
    from megakernel.runtime import cuda_build

    def causal_word(**change):
        config = dataclasses.replace(preset("tiny"), **change)
        program = lower_prompt(config, rows=64, sms=132, capacity=128)
        return next(w for w in program.words if w.opcode == Op.ATTN_CAUSAL)

    assert cuda_build.word_threads(causal_word(num_attention_heads=18)) == 256  # 9 query heads a KV head
    with pytest.raises(ValueError, match="ATTN_CAUSAL takes heads of head_dim 256, the word's are 128"):
        cuda_build.word_threads(causal_word(head_dim=128))


def test_gdn_chunk_refuses_value_heads_its_16_byte_copies_cannot_take():
    """cuda_build's guard for prompt_gdn.cuh's 16-byte copies (D74): a GDN_CHUNK word whose value_dim (p5) is not a
    multiple of 8 gets one line (the compiler asks for 128 today, so the word is edited by hand)."""
    import dataclasses

    from compiler import lower_prompt
    from compiler.tiling import params
    from isa import Op
    from megakernel.model.config import preset
    from megakernel.runtime import cuda_build

    word = next(w for w in lower_prompt(preset("tiny"), rows=64, sms=132, capacity=128).words
                if w.opcode == Op.GDN_CHUNK)
    assert params(word)["value_dim"] == 128 and cuda_build.prompt_word_smem(word) > 0
    odd = dataclasses.replace(word, params=tuple(124 if i == 5 else p for i, p in enumerate(word.params)))
    assert params(odd)["value_dim"] == 124
    with pytest.raises(ValueError, match="a multiple of 8"):
        cuda_build.prompt_word_smem(odd)
