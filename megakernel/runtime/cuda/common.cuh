// What every device function shares: the Program's byte layout as the device reads it (docs/ISA.md
// "Program bytes", "Instruction word", "Control block"), fp32 arithmetic helpers, bf16 rounding and
// fixed-order block reductions.
//
// Determinism: every reduction here has a fixed thread -> element mapping and a fixed tree, so a result
// depends only on its inputs (never on timing or on which block ran it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace mk {

typedef unsigned int u32;
typedef unsigned char u8;
typedef unsigned long long u64;
typedef __nv_bfloat16 bf16;

constexpr int TILE_THREADS = 512;  // every tile function runs on a block of this many threads
constexpr int TILE_WARPS = TILE_THREADS / 32;
constexpr int MAX_ROWS = 8;

// --- fp32 arithmetic -------------------------------------------------------------------------------
// Rounded to nearest, never fused and never flushing subnormals: CuPy builds with -ftz=true, under
// which __fadd_rn / __fmul_rn flush, and the NumPy reference does not.
#ifdef MK_HOST_SIMT  // the tile functions on the CPU (tests/simt): the host's IEEE fp32, built without contraction
__device__ __forceinline__ float add_rn(float a, float b) { return a + b; }
__device__ __forceinline__ float sub_rn(float a, float b) { return a - b; }
__device__ __forceinline__ float mul_rn(float a, float b) { return a * b; }
__device__ __forceinline__ float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
__device__ __forceinline__ float div_rn(float a, float b) { return a / b; }
__device__ __forceinline__ float sqrt_rn(float a) { return std::sqrt(a); }
#else
__device__ __forceinline__ float add_rn(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

__device__ __forceinline__ float sub_rn(float a, float b) {
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

__device__ __forceinline__ float mul_rn(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// a * b + c with one rounding: the prompt GEMM's promotion (the reference's ops.fma32, D74), and where the
// reference's engine mode is not bit-matched (GDN_CORE's delta rule: its sums over dk already run in an order
// of the device's own, NUMERICS.md).
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
    float r;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
    return r;
}

__device__ __forceinline__ float div_rn(float a, float b) {
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

__device__ __forceinline__ float sqrt_rn(float a) {
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}
#endif

// The reference's elementwise functions (megakernel/reference/numerics.py), same formulas; expf and
// log1pf are CUDA's accurate versions (not the __expf intrinsics), within 2 ulps of NumPy's.
__device__ __forceinline__ float rsqrt_ref(float x) { return div_rn(1.0f, sqrt_rn(x)); }
__device__ __forceinline__ float sigmoid_ref(float x) { return div_rn(1.0f, add_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float silu_ref(float x) { return div_rn(x, add_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float softplus_ref(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// NVRTC has no <cmath> INFINITY.
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }

// --- reductions ------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = add_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The better of two (value, id) candidates: larger value, then lower id; id < 0 is "none" and NaN never
// wins. A total order, so any reduction tree gives the same winner.
__device__ __forceinline__ bool better(float v, int id, float best, int best_id) {
    if (id < 0 || v != v) return false;
    return best_id < 0 || v > best || (v == best && id < best_id);
}

__device__ __forceinline__ void warp_best(float& v, int& id) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oid = __shfl_xor_sync(0xffffffffu, id, o);
        if (better(ov, oid, v, id)) v = ov, id = oid;
    }
}

// %globaltimer: ns on a clock every SM shares (the watchdog, the megakernel's trace, the timing probes).
#ifdef MK_HOST_SIMT
__device__ __forceinline__ u64 global_ns() { return 0; }
#else
__device__ __forceinline__ u64 global_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif

// --- programmatic dependent launch (the discrete build's launches; docs/DECISIONS.md D40) ---------------
// Launched with programmatic stream serialization, a kernel may start while the launch before it still
// runs, so it reads nothing that launch writes before this wait, which returns once that launch has
// completed and its writes are visible (at once for a launch made without the attribute: the megakernel,
// the benches). Then it lets the next launch start: that launch's blocks take the SMs this launch's
// blocks leave and run up to their own wait. Every block of a kernel calls it, all threads together.
__device__ __forceinline__ void previous_launch_done() {
#ifndef MK_HOST_SIMT
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// --- the Program as the device reads it ------------------------------------------------------------
constexpr int HEADER_BYTES = 64;
constexpr int COUNTER_STRIDE = 32;  // u32 per counter: each on its own 128-byte line (ISA.md)
constexpr int WORD_BYTES = 128;
constexpr int RECORD_BYTES = 32;
constexpr u32 NO_BUFFER = 0xFFFFu;
constexpr int MTP_LAYER = 0xFE;

enum DType : int { DT_NONE = 0, DT_BF16 = 1, DT_F32 = 2, DT_I32 = 3, DT_FP8 = 4 };

enum Opcode : int {
    OP_NOP = 0, OP_EMBED = 1, OP_NORM_GEMV = 2, OP_NORM_GEMV_QKV = 3, OP_NORM_GATE_UP = 4, OP_GEMV_RESIDUAL = 5,
    OP_GDN_CORE = 7, OP_ATTN_SCORES = 8, OP_ATTN_PV = 9, OP_ATTN_MERGE = 10,
    OP_NORM_HEAD = 11, OP_ARGMAX = 12, OP_HANDOFF = 13, OP_MTP_FC = 14,
    // the prompt programs (docs/ISA.md "Prompt programs"; the discrete build's prompt_ops.cuh)
    OP_PROMPT_EMBED = 15, OP_NORM_PREPARE = 16, OP_PREPARE = 17, OP_MTP_PREPARE = 18, OP_GEMM = 19,
    OP_GEMM_GATE_UP = 20, OP_GEMM_RESIDUAL = 21, OP_PROMPT_QKV = 22, OP_ATTN_CAUSAL = 23, OP_PROMPT_CONV = 24,
    OP_GDN_CHUNK = 25, OP_PROMPT_NORM = 26, OP_PROMPT_ADVANCE = 27, OP_GATED_PREPARE = 28
};

__device__ __forceinline__ bool is_gemv(int op) {
    return op == OP_NORM_GEMV || op == OP_NORM_GEMV_QKV || op == OP_NORM_GATE_UP || op == OP_GEMV_RESIDUAL ||
           op == OP_NORM_HEAD || op == OP_MTP_FC;
}

constexpr int FLAG_DEBUG_LOGITS = 1;
constexpr int FLAG_WORKING_VOCAB = 2;  // isa.opcodes.Flag

// Wait slots of a word (isa/word.py, isa/opcodes.py WaitMode).
constexpr int WAIT_SLOTS = 4;
enum WaitMode : int { WAIT_NONE = 0, WAIT_ALL = 1, WAIT_SLICE = 2 };

struct Wait {
    int base, count, mode, lag;
    u32 expected;
};

// Control block words (per lane; isa/opcodes.py).
constexpr int CTRL_LANE = 32;
constexpr int CTRL_STEP = 0;
constexpr int CTRL_POSITION = 1;
constexpr int CTRL_ROWS = 2;  // a prompt chunk's rows r (host-written)
constexpr int CTRL_TOKENS_IN = 3;
constexpr int CTRL_TOKENS_OUT = 11;
constexpr int CTRL_PENDING = 19;      // rows GDN_CORE folds first (a speculative pass's kept rows)
constexpr int CTRL_SPECULATIVE = 20;  // 1: the pass's rows stay out of the stored GDN state

// One instruction word (isa/word.py FIELDS).
struct Word {
    const u32* u;
    __device__ int opcode() const { return u[0] & 0xFF; }
    __device__ int flags() const { return (u[0] >> 8) & 0xFF; }
    __device__ int layer() const { return (u[0] >> 16) & 0xFF; }
    __device__ int rows() const { return u[0] >> 24; }
    __device__ int n() const { return u[1]; }
    __device__ int k() const { return u[2]; }
    __device__ int tile_rows() const { return u[3] & 0xFFFF; }
    __device__ int k_slices() const { return u[3] >> 16; }
    __device__ int tiles() const { return u[4]; }
    __device__ int chunk_rows() const { return u[5] & 0xFFFF; }  // a prompt word's most rows R
    __device__ int weight_first() const { return u[6] & 0xFFFF; }
    __device__ int weight_count() const { return u[6] >> 16; }
    __device__ u32 buf_in() const { return u[7] & 0xFFFF; }
    __device__ u32 buf_out() const { return u[7] >> 16; }
    __device__ u32 buf_aux0() const { return u[8] & 0xFFFF; }
    __device__ u32 buf_aux1() const { return u[8] >> 16; }
    __device__ u32 buf_aux2() const { return u[9] & 0xFFFF; }
    __device__ u32 buf_scratch() const { return u[9] >> 16; }
    __device__ int signal_base() const { return u[10] & 0xFFFF; }
    __device__ int signal_count() const { return u[10] >> 16; }
    __device__ u32 signal_expected() const { return u[11]; }
    __device__ int arrival_base() const { return u[12] & 0xFFFF; }
    __device__ Wait wait(int slot) const {
        const u32 a = u[13 + 2 * slot];
        return Wait{static_cast<int>(a & 0xFFFF), static_cast<int>((a >> 16) & 0xFF), static_cast<int>((a >> 24) & 0xF),
                    static_cast<int>((a >> 28) & 0x7), u[14 + 2 * slot]};
    }
    __device__ u32 p(int i) const { return u[21 + i]; }
    __device__ float pf(int i) const { return __uint_as_float(u[21 + i]); }
    __device__ int ctrl_base() const { return layer() == MTP_LAYER ? CTRL_LANE : 0; }
};

struct Buffer {
    u8* base;
    int rows, cols, dtype;
    template <class T>
    __device__ T* at(int r, int c) const {
        return reinterpret_cast<T*>(base) + static_cast<size_t>(r) * cols + c;
    }
};

struct Weight {
    const u8* base;
    const u8* scale;  // nullptr: no block scales
    int rows, cols, dtype, scale_dtype;
    // Element i (flat) of a bf16 or fp32 weight, as float (norm weights, A_log, dt_bias, conv taps).
    __device__ float value(size_t i) const {
        return dtype == DT_F32 ? reinterpret_cast<const float*>(base)[i]
                               : bf(reinterpret_cast<const bf16*>(base)[i]);
    }
};

// The session's arena, the weight arena and the Program bytes (all in device memory).
struct Ctx {
    u8* arena;
    const u8* weights;
    const u8* program;

    __device__ u32 header(int i) const { return reinterpret_cast<const u32*>(program)[i]; }
    __device__ int n_words() const { return header(2); }
    __device__ int n_buffers() const { return header(3); }
    __device__ Word word(int i) const {
        return Word{reinterpret_cast<const u32*>(program + HEADER_BYTES + static_cast<size_t>(WORD_BYTES) * i)};
    }
    __device__ Buffer buffer(u32 id) const {
        const u8* r = program + HEADER_BYTES + static_cast<size_t>(WORD_BYTES) * n_words() + RECORD_BYTES * id;
        const u64 offset = *reinterpret_cast<const u64*>(r);
        const u32* u = reinterpret_cast<const u32*>(r + 8);
        return Buffer{arena + offset, static_cast<int>(u[0]), static_cast<int>(u[1]), r[16]};
    }
    __device__ Weight weight(int id) const {
        const u8* r = program + HEADER_BYTES + static_cast<size_t>(WORD_BYTES) * n_words() +
                      static_cast<size_t>(RECORD_BYTES) * (n_buffers() + id);
        const u64 offset = *reinterpret_cast<const u64*>(r);
        const u64 scale_offset = *reinterpret_cast<const u64*>(r + 8);
        const u32* u = reinterpret_cast<const u32*>(r + 16);
        return Weight{weights + offset, scale_offset == ~0ull ? nullptr : weights + scale_offset,
                      static_cast<int>(u[0]), static_cast<int>(u[1]), r[24], r[25]};
    }
    __device__ int* control() const { return reinterpret_cast<int*>(arena); }  // buffer 0 at offset 0
};

// --- a discrete launch's own program (discrete/launch_program.py) ----------------------------------------
// One word and the records it names, renumbered from zero, in the Program's layout, passed by value: every
// address is known at the launch's start, so the block copies it to shared memory in one round trip
// instead of reading parameter -> word -> records one after another (kernels.cu). A multiple of 128 bytes:
// the GEMV tile's shared memory placed after it keeps its 128-byte alignment (gemv_tile.cuh GEMV_SMEM_OFFSET).
constexpr int LAUNCH_PROGRAM_BYTES = 768;
static_assert(LAUNCH_PROGRAM_BYTES % 128 == 0, "LAUNCH_PROGRAM_BYTES");
struct LaunchProgram {
    u32 u[LAUNCH_PROGRAM_BYTES / 4];
};

#if defined(MK_GRAPH_TRACE) || defined(MK_TILE_STAMPS)
__device__ __forceinline__ u32 sm_id() {  // the SM the block runs on (the timing probes record it)
    u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}
#endif

#ifdef MK_GRAPH_TRACE
// The graph build's trace (experiments/graph_trace.py; built only with MEGAKERNEL_GRAPH_TRACE set): thread 0
// of block b of a launch whose launch program ends in slot s > 0 (launch_program.py) records %globaltimer at
// the kernel's start, past its wait for the launch before, and at its end (after a block barrier) in
// mk_graph_trace[s - 1][b][0..2], and 1 tile in [3]'s low 32 bits: the megakernel trace's record
// (megakernel.cu); [3]'s high 32 bits hold the block's SM + 1 (0 in records made before D79), so that a slow
// block can be told apart from a slow SM (graph_trace_report.py).
constexpr int GRAPH_TRACE_SLOTS = 1024;
constexpr int GRAPH_TRACE_BLOCKS = 2048;
extern "C" {  // unmangled: the probe finds it by name
__device__ unsigned long long mk_graph_trace[GRAPH_TRACE_SLOTS][GRAPH_TRACE_BLOCKS][4];
}
__device__ __forceinline__ void graph_trace(const LaunchProgram& launch, int field) {
    if (field == 2) __syncthreads();
    const u32 slot = launch.u[LAUNCH_PROGRAM_BYTES / 4 - 1];
    if (threadIdx.x != 0 || slot == 0 || slot > GRAPH_TRACE_SLOTS || blockIdx.x >= GRAPH_TRACE_BLOCKS) return;
    unsigned long long* r = mk_graph_trace[slot - 1][blockIdx.x];
    r[field] = global_ns();
    if (field == 2) r[3] = 1ull | static_cast<unsigned long long>(sm_id() + 1) << 32;
}
#else
__device__ __forceinline__ void graph_trace(const LaunchProgram&, int) {}
#endif

// All threads: the launch program into `copy` (shared memory), without waiting for the previous launch.
// First thing in a kernel that reads weights (which no launch writes) before it calls previous_launch_done
// itself: the GEMV tile primes its weight ring first (kernels.cu tile_gemv).
__device__ __forceinline__ Ctx launch_context_before_wait(u8* arena, const u8* weights, const LaunchProgram& launch,
                                                          u32* copy) {
    graph_trace(launch, 0);
    for (int i = threadIdx.x; i < LAUNCH_PROGRAM_BYTES / 4; i += blockDim.x) copy[i] = launch.u[i];
    __syncthreads();
    return Ctx{arena, weights, reinterpret_cast<const u8*>(copy)};
}

// All threads, first thing in every other discrete kernel: the launch program, then the wait for the
// previous launch (previous_launch_done: nothing the program holds depends on it).
__device__ __forceinline__ Ctx launch_context(u8* arena, const u8* weights, const LaunchProgram& launch, u32* copy) {
    const Ctx ctx = launch_context_before_wait(arena, weights, launch, copy);
    previous_launch_done();
    graph_trace(launch, 1);
    return ctx;
}

#ifdef MK_TILE_STAMPS
// A timing probe (experiments/tile_phases.py; built only with MEGAKERNEL_TILE_STAMPS set): thread 0 of
// block b records %clock64 at each phase of its tile in [b][phase] (0 start, 8 inputs addressed, 9
// staged, 1 input rows done, 3 passes done, 4 end; a GEMV main tile's, gemv_tile.cuh, or a GDN tile's,
// gdn.cuh), %globaltimer at the start and the end in [b][6], [b][7], and its SM in [b][5].
constexpr int STAMP_BLOCKS = 8192, STAMP_SLOTS = 10;
extern "C" {  // unmangled: the probe finds it by name
__device__ unsigned long long mk_tile_stamps[STAMP_BLOCKS][STAMP_SLOTS];
}
__device__ __forceinline__ void tile_stamp(int phase, bool wall = false) {
    __syncthreads();
    if (threadIdx.x != 0 || blockIdx.x >= STAMP_BLOCKS) return;
    if (wall) {
        mk_tile_stamps[blockIdx.x][phase == 0 ? 6 : 7] = global_ns();
        mk_tile_stamps[blockIdx.x][5] = sm_id();
    }
    mk_tile_stamps[blockIdx.x][phase] = clock64();
}
#else
__device__ __forceinline__ void tile_stamp(int, bool = false) {}
#endif

}  // namespace mk
