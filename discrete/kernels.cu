// The discrete build's kernels: one __global__ per op family, each a thin wrapper over the device
// functions in megakernel/runtime/cuda/*.cuh (the megakernel calls the same functions).
//
// Built at run time by NVRTC (discrete/kernels.py, -I megakernel/runtime/cuda) and checked by nvcc in CI.

#define MK_DISCRETE_BUILD  // GEMV tiles keep the launch program before their shared memory (gemv_tile.cuh)
#include "tiles.cuh"
#include "prompt_attention.cuh"  // the prompt programs' words: the discrete build only (persistent.py refuses them)
#include "prompt_gdn.cuh"
#include "prompt_gemm.cuh"

#define GEMV_THREADS 512  // 16 warps: each 16-row strip of a pass shared by 16 / strips warps (gemv.cuh WarpRole)

// The GEMV core alone (bench and tests; fp8 weights in 16-row units, megakernel/runtime/weight_layout.py): block
// (row group r, k-slice s) writes the fp32 slice sums of rows [tile_rows r, min(tile_rows (r + 1), n / halves))
// (tile_rows a multiple of 16: fp8 up to MAX_TILE_ROWS, cut into passes where a 128-row scale block ends, as the
// engine's tiles cut them; bf16 up to 128) of each half of the rows for the m input rows to out[(s * m + row) *
// n + output row]. halves = 2 makes a row group cover the same rows of both halves, as the engine's NORM_GATE_UP
// tiles cover gate and up (gemv_tile.cuh). Dynamic shared memory: a GemvSmem (the slice's input rows copied in,
// then the weight ring).
template <bool FP8>  // a constant dtype: the bench kernels compile one path each
__device__ __forceinline__ void gemv_slices(const unsigned char* weight, const __nv_bfloat16* scale,
                                            const __nv_bfloat16* x, float* out, int n, int k, int m, int slices,
                                            int tile_rows, int halves) {
    extern __shared__ __align__(16) unsigned char smem[];
    const mk::GemvSmem sm(smem + mk::GEMV_SMEM_OFFSET);  // laid out as tile_gemv lays out its tiles
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    const int s = blockIdx.y, blocks = k / mk::K_BLOCK;
    const int b0 = s * blocks / slices, b1 = (s + 1) * blocks / slices, width = (b1 - b0) * mk::K_BLOCK;
    // the slice's input rows into shared memory as a GEMV_RESIDUAL tile takes them (gemv_tile.cuh)
    const __nv_bfloat16* x_slice = x + b0 * mk::K_BLOCK;
    const int stride = mk::x_stride_of(width, m), half_rows = n / halves;
    const int row0 = blockIdx.x * tile_rows, rows = min(tile_rows, half_rows - row0);
    const auto pass_rows = [&](int first, int left) {  // fp8: a pass ends where its scale block does
        return FP8 ? min(left, mk::ROW_BLOCK - first % mk::ROW_BLOCK) : min(left, mk::ROW_BLOCK);
    };
    if (FP8) {  // every small load (the scales, the input rows) issued ahead of the first weights
        mk::stage_pass_scales(scale, k, row0, b0, b1, sm.scales);
        mk::stage_rows(x_slice, k, sm.x, stride, m, width);
        mk::copies_commit();
        mk::copies_wait(mk::prime_ring(weight, k, row0, pass_rows(row0, rows), b0, b1, sm.ring(m * stride),
                                       sm.ring_bytes(m * stride), mk::WHOLE_RING));  // the rows have landed
        __syncthreads();
        mk::f16_operand(sm.x, stride, sm.x, stride, m, b1 - b0, sm.x_p);
    } else {
        mk::stage_rows(x_slice, k, sm.x, stride, m, width);
        mk::stage_wait();
    }
    for (int h = 0; h < halves; ++h) {
        for (int a = 0; a < rows;) {
            const int first = h * half_rows + row0 + a, prows = pass_rows(first, rows - a);
            float acc[4];
            mk::gemv_block_rows(acc, FP8, weight, scale, k, first, prows, b0, b1, sm.x, sm.x_p, stride, m,
                                sm.ring(m * stride), sm.ring_bytes(m * stride), sm.scales, FP8 && h == 0 && a == 0);
            if (warp * mk::WARP_ROWS < prows) {  // phase 0 of strip `warp` holds the strip's sums
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int row = first + warp * mk::WARP_ROWS + g + 8 * (r >> 1), input = 2 * t + (r & 1);
                    if (input < m && row < first + prows) out[(static_cast<size_t>(s) * m + input) * n + row] = acc[r];
                }
            }
            __syncthreads();  // the ring (and the phases' sums in it) free for the next pass
            a += prows;
        }
    }
}

extern "C" __global__ void __launch_bounds__(GEMV_THREADS, 1)
gemv_fp8_slices(const unsigned char* weight, const __nv_bfloat16* scale, const __nv_bfloat16* x, float* out, int n,
                int k, int m, int slices, int tile_rows, int halves) {
    gemv_slices<true>(weight, scale, x, out, n, k, m, slices, tile_rows, halves);
}

extern "C" __global__ void __launch_bounds__(GEMV_THREADS, 1)
gemv_bf16_slices(const unsigned char* weight, const __nv_bfloat16* x, float* out, int n, int k, int m, int slices,
                 int tile_rows, int halves) {
    gemv_slices<false>(weight, nullptr, x, out, n, k, m, slices, tile_rows, halves);
}

// A pure streaming read of `count` 16-byte pieces by the whole grid.
__device__ __forceinline__ void read_pieces(const uint4* data, size_t count, unsigned int* sink) {
    unsigned int x = 0;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        const uint4 v = mk::load_stream(data + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678u) sink[0] = x;  // keeps the loads alive; practically never taken
}

// Pure streaming read of `bytes` (a multiple of 16): the bandwidth every result is a fraction of.
extern "C" __global__ void __launch_bounds__(512) read_bandwidth(const uint4* data, size_t count, unsigned int* sink) {
    read_pieces(data, count, sink);
}

// A word's bytes read as a discrete launch reads them, after the launch before it (experiments/graph_floor.py:
// the step's bytes through the step's launches at the stream rate).
extern "C" __global__ void __launch_bounds__(512) read_after_previous(const uint4* data, unsigned int count,
                                                                       unsigned int* sink) {
    mk::previous_launch_done();
    read_pieces(data, count, sink);
}

// --- one kernel per op family: block b runs tile b of the instruction ----------------------------------
// Each launch gets its word as a launch program (common.cuh LaunchProgram, discrete/launch_program.py): word
// 0 of a one-word Program, copied into shared memory by launch_context before anything else is read.
#define PROGRAM_ARGS \
    unsigned char *arena, const unsigned char *weights, const __grid_constant__ mk::LaunchProgram launch

// Every GEMV word (fp8 segments from their 16-row units, bf16 ones row-major: gemv.cuh), split-K ones
// finished in the same launch by the slice that lands last (gemv_tile.cuh gemv_finish_last; `arrivals`:
// the launcher's zeroed counters, indexed as the megakernel's arrival counters). The tile primes its ring
// before it waits for the previous launch (its weights depend on no launch), so that they stream while that
// launch finishes; one block an SM with all the shared memory it may take (the launcher), and so with all
// the registers it needs (no cap at 64 for a second block: D57). The launch program takes the first
// GEMV_SMEM_OFFSET bytes of the dynamic memory, the tile the rest.
extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_gemv(PROGRAM_ARGS, unsigned int* arrivals) {
    extern __shared__ __align__(16) unsigned char smem[];
    const mk::Ctx ctx = mk::launch_context_before_wait(arena, weights, launch, reinterpret_cast<mk::u32*>(smem));
    mk::gemv_main_weights(ctx, ctx.word(0), blockIdx.x, smem + mk::GEMV_SMEM_OFFSET);
    mk::previous_launch_done();
    mk::graph_trace(launch, 1);
    mk::gemv_main_tile(ctx, ctx.word(0), blockIdx.x, smem + mk::GEMV_SMEM_OFFSET, arrivals);
    mk::graph_trace(launch, 2);
}
static_assert(mk::GEMV_SMEM_OFFSET == mk::LAUNCH_PROGRAM_BYTES, "tile_gemv's launch program");

// The other kernels keep their launch program in a static array. Dynamic shared memory: GdnSmem (the
// head's 64 KB state and the tile's inputs) is over the 48 KB a static array may take. The launcher gives
// it what it gives the attention tiles, at least gdn.cuh GDN_MIN_SMEM (cuda_build.tile_smem_bytes).
extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_gdn(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context_before_wait(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::GdnSmem& sm = *reinterpret_cast<mk::GdnSmem*>(smem);
    mk::gdn_reads_ahead(ctx, ctx.word(0), blockIdx.x, sm);  // its state, ring rows and norm weight (D58)
    mk::previous_launch_done();
    mk::graph_trace(launch, 1);
    mk::gdn_tile(ctx, ctx.word(0), blockIdx.x, sm, true);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_attn_scores(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::attn_scores_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_attn_pv(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::attn_pv_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_attn_merge(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::attn_merge_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_embed(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::embed_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_argmax(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::argmax_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_handoff(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::handoff_tile(ctx, ctx.word(0));
    mk::graph_trace(launch, 2);
}

// --- the prompt programs' words (prompt_ops.cuh; docs/ISA.md "Prompt programs") ---------------------------------
// Written and compile-checked in a session without a GPU (D68); tests/gpu/test_prompt_gpu.py compares them with
// the CPU interpreter word by word.
extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_prompt_embed(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::prompt_embed_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_prompt_advance(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::prompt_advance_tile(ctx, ctx.word(0));
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_prompt_qkv(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::prompt_qkv_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS) tile_prompt_conv(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    mk::prompt_conv_tile(ctx, ctx.word(0), blockIdx.x);
    mk::graph_trace(launch, 2);
}

// Two warpgroups (cuda_build.word_threads); dynamic shared memory: the tile's queries and the key and value slots
// (prompt_attention.cuh CAUSAL_SMEM).
extern "C" __global__ void __launch_bounds__(mk::CAUSAL_THREADS, 1) tile_attn_causal(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::attn_causal_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

// Dynamic shared memory: the head's state and the WY chunk's rows (prompt_gdn.cuh ChunkSmem).
extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_gdn_chunk(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::gdn_chunk_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

// Dynamic shared memory: norm_rows' staging area (PROMPT_NORM), PrepareSmem (the prepare words).
extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_prompt_norm(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::prompt_norm_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

extern "C" __global__ void __launch_bounds__(mk::TILE_THREADS, 1) tile_prepare(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(16) unsigned char smem[];
    mk::prepare_tile(ctx, ctx.word(0), blockIdx.x, smem);
    mk::graph_trace(launch, 2);
}

// The prompt GEMMs (prompt_gemm.cuh): GEMM_THREADS threads (two consumer warpgroups and a producer's), one tile a
// block, GEMM_SMEM bytes of dynamic shared memory for the ring, aligned as the experiment measured it (D67). Tiles
// run last first: the last row groups are the slowest (in_proj's bf16 b and a: mma.sync from global), so they
// start in the first wave instead of making a tail.
extern "C" __global__ void __launch_bounds__(mk::GEMM_THREADS, 1) tile_gemm(PROGRAM_ARGS) {
    __shared__ __align__(16) mk::u32 program[mk::LAUNCH_PROGRAM_BYTES / 4];
    const mk::Ctx ctx = mk::launch_context(arena, weights, launch, program);
    extern __shared__ __align__(1024) unsigned char gemm_smem[];
    mk::gemm_tile(ctx, ctx.word(0), gridDim.x - 1 - blockIdx.x, gemm_smem);
    mk::graph_trace(launch, 2);
}
