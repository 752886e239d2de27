// The prompt programs' GEMMs (GEMM, GEMM_GATE_UP, GEMM_RESIDUAL; docs/ISA.md "Prompt programs"): D67's
// warp-specialised design (experiments/prompt_gemm_ws.cu, ws3: 404-522 TFLOP/s on the 27B's products) on the
// engine's buffers. A block is one tile: a row group of 128 weight rows (GEMM_GATE_UP: 64 of gate and the same
// 64 of up) x one 128-token tile of the chunk. Warps 0-7 are two consumer warpgroups of 64 rows; lane 0 of warp
// 8 is the producer, filling a ring of GEMM_STAGES slots by bulk copies (the token tile's slab of the k-block
// and the block's eight 16-row fp8 units), completed on `full` mbarriers; consumers free a slot on `empty`.
//
// Arithmetic (NUMERICS.md "The prompt path"): per row and token the k-blocks in order from zero, each k-block's
// fp32 partial from eight wgmma k16 steps in the decode units' k order (D66: decode's bits), promoted by one
// fused multiply-add, acc = fma(partial, scale x 2^-P, acc) (D74: half the fp32 instructions of decode's mul_rn,
// mul_rn, add_rn; scale x 2^-P is exact, so one rounding where decode has three). bf16 weight segments (in_proj's b
// and a; the MTP fc) multiply the bf16 slabs by mma.sync (the same accumulator layout), partials added.
// Epilogues: bf16; bf16(bf16(silu(g)) * u); bf16(x_in + bf16(y)). Rows of the tile past the chunk's r are not
// stored. Written without a GPU (D68); tests/gpu/test_prompt_gpu.py compares it with the interpreter, and
// tests/test_prompt_words_on_cpu.py does on the CPU (D70).
#pragma once

#include "prompt_ops.cuh"
#include "wgmma.cuh"

namespace mk {

constexpr int GEMM_ROWS = 128;                                         // plan.PROMPT_TILE_ROWS
constexpr int GEMM_UNIT = 16 * K_BLOCK;                                // a 16-row fp8 unit
constexpr int GEMM_SLOT = (SLAB_BYTES + GEMM_ROWS * K_BLOCK + 1023) / 1024 * 1024;
constexpr int GEMM_STAGES = 3;                                         // D67: a fourth slot 2-5 % slower
constexpr int GEMM_CONSUMER_WARPS = 8;
constexpr int GEMM_THREADS = 32 * (GEMM_CONSUMER_WARPS + 4);           // a whole producer warpgroup: setmaxnreg
constexpr int GEMM_SMEM = GEMM_STAGES * GEMM_SLOT;                     // dynamic; the exchange reuses it
static_assert(GEMM_SMEM + LAUNCH_PROGRAM_BYTES <= 232448, "the ring fits the H200's shared memory (227 KB)");

// The tile's rows: for each consumer warpgroup its segment, the segment's local first row and its rows (<= 64).
struct GemmTile {
    int token_tile, rows_out0;  // the chunk's token tile; the first output column (GATE_UP: intermediate row)
    int seg[2], local0[2], rows[2];
};

__device__ inline GemmTile gemm_tile_of(const Ctx& ctx, const Word& w, int tile) {
    const int token_tiles = (w.chunk_rows() + PROMPT_TOKEN_TILE - 1) / PROMPT_TOKEN_TILE, tr = w.tile_rows();
    const int group = tile / token_tiles;
    GemmTile g{};
    g.token_tile = tile % token_tiles;
    if (w.opcode() == OP_GEMM_GATE_UP) {  // one segment's worth of intermediate rows, gate then up
        const int r0 = group * tr, rows = min(tr, w.n() - r0);
        g.rows_out0 = r0;
        g.seg[0] = 0, g.seg[1] = 1, g.local0[0] = g.local0[1] = r0, g.rows[0] = g.rows[1] = rows;
        return g;
    }
    int start = 0, index = 0;
    for (int seg = 0; seg < w.weight_count(); ++seg) {
        const int rows = ctx.weight(w.weight_first() + seg).rows, groups = (rows + tr - 1) / tr;
        if (group < index + groups) {
            const int local = (group - index) * tr, n = min(tr, rows - local);
            g.rows_out0 = start + local;
            g.seg[0] = g.seg[1] = seg;
            g.local0[0] = local, g.local0[1] = local + GEMM_ROWS / 2;
            g.rows[0] = min(n, GEMM_ROWS / 2), g.rows[1] = max(0, n - GEMM_ROWS / 2);
            return g;
        }
        index += groups;
        start += rows;
    }
    return g;
}

// Producer: k-block b of the tile into slot b % STAGES once its previous round is released: the slab (f16, or
// bf16 for a bf16 segment) and, fp8, the units of each warp's strip that holds rows.
__device__ inline void gemm_produce(u8* smem, u64* full, u64* empty, const Ctx& ctx, const Word& w,
                                    const GemmTile& g, const u8* slabs, bool fp8, int blocks) {
    const Weight seg0 = ctx.weight(w.weight_first() + g.seg[0]), seg1 = ctx.weight(w.weight_first() + g.seg[1]);
    const u8* operand = slabs + static_cast<size_t>(g.token_tile) * blocks * SLAB_BYTES;
    for (int b = 0; b < blocks; ++b) {
        const int s = b % GEMM_STAGES;
        if (b >= GEMM_STAGES) bar_wait(smem_addr(&empty[s]), (b / GEMM_STAGES + 1) & 1);
        const u32 slot = smem_addr(smem + s * GEMM_SLOT), bar = smem_addr(&full[s]);
        u32 bytes = SLAB_BYTES;
        if (fp8)
            for (int st = 0; st < GEMM_ROWS / 16; ++st) bytes += 16 * (st % 4) < (st < 4 ? g.rows[0] : g.rows[1]) ? GEMM_UNIT : 0;
        bar_expect(bar, bytes);
        bulk_copy(slot, operand + static_cast<size_t>(b) * SLAB_BYTES, SLAB_BYTES, bar);
        if (!fp8) continue;
        for (int st = 0; st < GEMM_ROWS / 16; ++st) {  // warpgroup st / 4's strip st % 4
            const bool first = st < 4;
            if (16 * (st % 4) >= (first ? g.rows[0] : g.rows[1])) continue;
            const Weight& W = first ? seg0 : seg1;
            const int strip = ((first ? g.local0[0] : g.local0[1]) + 16 * (st % 4)) / 16;
            bulk_copy(slot + SLAB_BYTES + st * GEMM_UNIT, W.base + (static_cast<size_t>(strip) * blocks + b) * GEMM_UNIT,
                      GEMM_UNIT, bar);
        }
    }
}

// The accumulator a consumer thread holds (wgmma m64n128's layout, which mma.sync m16n8k16 over 16 token octets
// shares): acc[4 j + e] is row g + 8 (e / 2) of its warp's 16, token 8 j + 2 t + e % 2.
__device__ __forceinline__ int acc_row(int i, int g) { return g + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int acc_token(int i, int t) { return 8 * (i >> 2) + 2 * t + (i & 1); }

// fp8 rows: per k-block eight wgmma steps into `part`, then the promotion.
__device__ inline void gemm_consume_fp8(float (&acc)[64], u8* smem, u64* full, u64* empty, const Weight& W,
                                        int local0, bool has_rows, int blocks, int warp, int lane) {
    const int t = lane & 3;
    const bf16* scales = reinterpret_cast<const bf16*>(W.scale) + static_cast<size_t>(local0 / ROW_BLOCK) * blocks;
    u32 af[8][4];  // zero once for a strip past the rows (not every k-block: 16 instructions an iteration)
#pragma unroll
    for (int st = 0; st < 8; ++st) af[st][0] = af[st][1] = af[st][2] = af[st][3] = 0u;
    float part[64];
    for (int b = 0; b < blocks; ++b) {
        const int s = b % GEMM_STAGES;
        bar_wait(smem_addr(&full[s]), (b / GEMM_STAGES) & 1);
        const u8* slot = smem + s * GEMM_SLOT;
        if (has_rows) widen_unit(af, slot + SLAB_BYTES + warp * GEMM_UNIT, lane);
        const float sc = bf(scales[b]);
        WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
        for (int st = 0; st < 8; ++st)
            wgmma_m64n128k16(part, af[st], smem_desc(slot + st * 256, 128, SLAB_GROUP_BYTES), st);
        WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
        // the promotion's factors while the products run: after the wait only the 64 fmas remain (loaded after the
        // wait, the unscales' shared loads stood first on that path: the fused form measured 5 % slower than
        // decode's three roundings, D74)
        const float* unscale = reinterpret_cast<const float*>(slot + SLAB_X_BYTES);
        float f[32];  // f[2 j + e]: scale x 2^-P of token 8 j + 2 t + e (exact: a bf16 scale times a power of two)
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const float2 u = *reinterpret_cast<const float2*>(unscale + 8 * j + 2 * t);
            f[2 * j] = mul_rn(sc, u.x), f[2 * j + 1] = mul_rn(sc, u.y);
        }
        wait_groups<0>();
        fence_all(part);
        fence_all(af);
#pragma unroll
        for (int j = 0; j < 16; ++j) {  // accumulators 4 j .. 4 j + 3: tokens 8 j + 2 t, + 1 of rows g, g + 8
            acc[4 * j] = fma_rn(part[4 * j], f[2 * j], acc[4 * j]);
            acc[4 * j + 1] = fma_rn(part[4 * j + 1], f[2 * j + 1], acc[4 * j + 1]);
            acc[4 * j + 2] = fma_rn(part[4 * j + 2], f[2 * j], acc[4 * j + 2]);
            acc[4 * j + 3] = fma_rn(part[4 * j + 3], f[2 * j + 1], acc[4 * j + 3]);
        }
        __syncwarp();
        if (lane == 0) bar_arrive(smem_addr(&empty[s]));
    }
}

// bf16 rows (row-major weights, no scales): per k-block eight mma.sync k16 steps per token octet, A pairs read
// from the weight in the units' k order (slab_k), B from the bf16 slab; partials added in order.
__device__ inline void gemm_consume_bf16(float (&acc)[64], u8* smem, u64* full, u64* empty, const Weight& W,
                                         int row0, int rows, int blocks, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const bf16* wr = reinterpret_cast<const bf16*>(W.base);
    const auto pair = [&](int row, int k) -> u32 {  // two consecutive weights of a row (zero past the rows)
        return row < rows ? *reinterpret_cast<const u32*>(wr + static_cast<size_t>(row0 + row) * W.cols + k) : 0u;
    };
    for (int b = 0; b < blocks; ++b) {
        const int s = b % GEMM_STAGES;
        bar_wait(smem_addr(&full[s]), (b / GEMM_STAGES) & 1);
        const u8* slot = smem + s * GEMM_SLOT;
        float part[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) part[i] = 0.0f;
        u32 a[8][4];  // the k-block's A pairs loaded before the products: one round trip, not eight
        const int k = b * K_BLOCK;
#pragma unroll
        for (int st = 0; st < 8; ++st) {
            a[st][0] = pair(g, k + slab_k(st, 0, 2 * t)), a[st][1] = pair(g + 8, k + slab_k(st, 0, 2 * t));
            a[st][2] = pair(g, k + slab_k(st, 1, 2 * t)), a[st][3] = pair(g + 8, k + slab_k(st, 1, 2 * t));
        }
#pragma unroll
        for (int st = 0; st < 8; ++st) {
#pragma unroll
            for (int j = 0; j < 16; ++j) {  // token octet j: [8-token group][step][k half][token][slot]
                const u8* b_at = slot + j * SLAB_GROUP_BYTES + st * 256 + g * 16 + 4 * t;
                const u32 bf[2] = {*reinterpret_cast<const u32*>(b_at), *reinterpret_cast<const u32*>(b_at + 128)};
                float d[4] = {part[4 * j], part[4 * j + 1], part[4 * j + 2], part[4 * j + 3]};
                mma_16816<false>(d, a[st], bf);
                part[4 * j] = d[0], part[4 * j + 1] = d[1], part[4 * j + 2] = d[2], part[4 * j + 3] = d[3];
            }
        }
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = add_rn(acc[i], part[i]);
        __syncwarp();
        if (lane == 0) bar_arrive(smem_addr(&empty[s]));
    }
}

// Consumers: named barrier 1 over the two consumer warpgroups (the producer warpgroup has left).
__device__ __forceinline__ void consumers_sync() { named_sync(1, 32 * GEMM_CONSUMER_WARPS); }

// GEMM_GATE_UP's epilogue, bf16(bf16(silu(g)) * u), split by tokens so that both warpgroups work: warpgroup 0
// (gate) finishes tokens 0-63, warpgroup 1 (up) tokens 64-127 (accumulators 4 j + e with j < 8, j >= 8); each
// hands the other half of its rows to the other through the ring's memory, [64 rows][EXCHANGE_STRIDE] floats a
// half: 72 puts a warp's 8-byte stores (rows gq, tokens 2 t, 2 t + 1) on distinct bank pairs. (One warpgroup
// finishing all 128 tokens left the SM's other 8 warps idle for ~3,100 instructions a warp: D71.)
constexpr int EXCHANGE_STRIDE = 72;
__device__ inline void gate_up_epilogue(const float (&acc)[64], float* exchange, const Buffer& out, int rows_out0,
                                        int rows, int token0, int r, int wg, int strip, int gq, int t) {
    float* given = exchange + wg * 64 * EXCHANGE_STRIDE;         // warpgroup wg's other half
    const float* taken = exchange + (1 - wg) * 64 * EXCHANGE_STRIDE;
    const bool keeps_low = wg == 0;
    consumers_sync();  // every slot read by both warpgroups
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        if ((j < 8) == keeps_low) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h)  // rows gq, gq + 8
            *reinterpret_cast<float2*>(given + (16 * strip + gq + 8 * h) * EXCHANGE_STRIDE + 8 * (j % 8) + 2 * t) =
                make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
    consumers_sync();
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        if ((i < 32) != keeps_low) continue;
        const int row = 16 * strip + acc_row(i, gq), token = acc_token(i, t);
        if (row >= rows || token0 + token >= r) continue;
        const float other = taken[row * EXCHANGE_STRIDE + token % 64];
        const float v = keeps_low ? swiglu_rn(acc[i], other) : swiglu_rn(other, acc[i]);
        *out.at<bf16>(token0 + token, rows_out0 + row) = to_bf16(v);
    }
}

__device__ inline void gemm_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    __shared__ __align__(8) u64 full[GEMM_STAGES], empty[GEMM_STAGES];
    const int op = w.opcode(), blocks = w.k() / K_BLOCK, r = chunk_rows_now(ctx, w);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const GemmTile g = gemm_tile_of(ctx, w, tile);
    if (g.token_tile * PROMPT_TOKEN_TILE >= r) return;  // past the chunk: nothing to compute (all threads)
    const Weight seg0 = ctx.weight(w.weight_first() + g.seg[0]);
    const bool fp8 = seg0.scale != nullptr;  // a row group lies in one segment; gate and up are both fp8
    const u8* slabs = ctx.buffer(fp8 ? w.buf_in() : w.buf_aux1()).base;
    if (threadIdx.x == 0) {
        for (int s = 0; s < GEMM_STAGES; ++s) {
            bar_init(smem_addr(&full[s]), 1);
            bar_init(smem_addr(&empty[s]), GEMM_CONSUMER_WARPS);
        }
        mbarrier_init_fence();
    }
    __syncthreads();
    if (warp >= GEMM_CONSUMER_WARPS) {  // the producer warpgroup gives its registers to the consumers
        WGMMA(asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n"));
        if (warp == GEMM_CONSUMER_WARPS && lane == 0) gemm_produce(smem, full, empty, ctx, w, g, slabs, fp8, blocks);
        return;
    }
    WGMMA(asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n"));
    const int wg = warp / 4, strip = warp % 4, gq = lane >> 2, t = lane & 3;
    const int local0 = wg == 0 ? g.local0[0] : g.local0[1], rows = wg == 0 ? g.rows[0] : g.rows[1];
    const Weight W = ctx.weight(w.weight_first() + (wg == 0 ? g.seg[0] : g.seg[1]));
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    if (fp8)
        gemm_consume_fp8(acc, smem, full, empty, W, local0, 16 * strip < rows, blocks, warp, lane);
    else
        gemm_consume_bf16(acc, smem, full, empty, W, local0 + 16 * strip, rows - 16 * strip, blocks, lane);

    // Epilogue: token rows of the chunk below r, output rows of the warp's strip.
    const Buffer out = ctx.buffer(w.buf_out());
    const int token0 = g.token_tile * PROMPT_TOKEN_TILE;
    if (op == OP_GEMM_GATE_UP) {
        gate_up_epilogue(acc, reinterpret_cast<float*>(smem), out, g.rows_out0, rows, token0, r, wg, strip, gq, t);
        return;
    }
    // GEMM_RESIDUAL's x_in, all loaded before the first store: the stores might alias them, so loads between
    // stores would wait one round trip each (64 a thread)
    const int col0 = g.rows_out0 + wg * (GEMM_ROWS / 2);  // the warpgroup's first output column
    bf16 x_in[64];
    if (op == OP_GEMM_RESIDUAL) {
        const Buffer residual = ctx.buffer(w.buf_aux0());
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            const int row = 16 * strip + acc_row(i, gq), token = token0 + acc_token(i, t);
            x_in[i] = row < rows && token < r ? *residual.at<bf16>(token, col0 + row) : to_bf16(0.0f);
        }
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const int row = 16 * strip + acc_row(i, gq), token = token0 + acc_token(i, t);
        if (row >= rows || token >= r) continue;
        *out.at<bf16>(token, col0 + row) = to_bf16(op == OP_GEMM_RESIDUAL ? residual_rn(x_in[i], acc[i]) : acc[i]);
    }
}

}  // namespace mk
