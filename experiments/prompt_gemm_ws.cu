// The prompt GEMM, second design (issue 21, after prompt_gemm_probe.cu measured ~110 TFLOP/s): warp-specialised,
// operands in the layouts the decode path already has or a prepare step writes once, so that every load is one
// bulk copy and no lane touches device memory until it stores its results.
//
// y [R][N] (fp32) = per token r and weight row n, sum over k-blocks b in order of (scale[n / 128][b] x partial)
// x unscale[r][b], rounded as the decode GEMV rounds (mul_rn, mul_rn, add_rn). partial is the fp32 sum of the
// k-block's 128 products of widened e4m3 weights and the f16 operand (ops.f16_operand), eight wgmma k16 steps
// chained in the decode GEMV's k order: the weights are the arena's 16-row units (weight_layout.py), each warp's
// A fragment widened straight from a unit, and the operand is prepared per (128-token tile, k-block) as the
// eight steps' B matrices in that same k order (no-swizzle core matrices, 8-token groups 2 KB apart:
// isa/operand_layout.py, D71) followed by the tile's 128 unscales, 33,280 bytes, one bulk copy. By D66 each
// k-block's partial then has the decode GEMV's bits; only the order the k-blocks are added in is this kernel's
// own (one accumulator, blocks in order).
//
// A block: 128 weight rows x 128 tokens. Warps 0-7 are two consumer warpgroups (64 weight rows each, sharing
// the token tile); warp 8's lane 0 is the producer, filling a ring of STAGES slots (operand tile + the block's
// eight units of the k-block) by cp.async.bulk on `full` mbarriers; consumers free a slot on `empty`.
#include "wgmma_probe.cuh"

using mk::u32;

namespace ws {

constexpr int KB = 128;
constexpr int TOK = 128;                       // tokens a block (wgmma N)
constexpr int ROWS = 128;                      // weight rows a block: two warpgroups x 64
constexpr int X_BYTES = TOK * KB * 2;          // the eight steps' B matrices
constexpr int XU_BYTES = X_BYTES + TOK * 4;    // and the tile's unscales: one prepared (tile, k-block)
constexpr int UNIT = 16 * KB;                  // a 16-row unit
constexpr int W_BYTES = ROWS * KB;             // the block's eight units of one k-block
constexpr int SLOT = (XU_BYTES + W_BYTES + 1023) / 1024 * 1024;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = 32 * (CONSUMER_WARPS + 4);  // a whole producer warpgroup, for setmaxnreg

__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const u32 (&a)[4], unsigned long long desc,
                                                int accumulate) {
    WGMMA(asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
        : "memory"));
}

using mk::bar_arrive;
using mk::bar_expect;
using mk::bar_init;
using mk::bar_wait;
using mk::bulk_copy;
using mk::fence_all;
using mk::wait_groups;

// This warp's A fragments of the eight steps, widened from its unit in the slot.
__device__ __forceinline__ void widen(u32 (&af)[8][4], const unsigned char* slot, int warp, int lane) {
    mk::widen_unit(af, slot + XU_BYTES + warp * UNIT, lane);
}

// Steps 4 h .. 4 h + 3 of this warp's A fragments (vectors 2 h, 2 h + 1 of its unit).
__device__ __forceinline__ void widen_half(u32 (&af)[4][4], const unsigned char* slot, int warp, int lane, int h) {
    const u32 unit = mk::smem_addr(slot + XU_BYTES + warp * UNIT + 16 * lane);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint4 v = mk::load_shared16(unit + 512 * (2 * h + i));
        mk::e4m3x4_to_f16x2(v.x, af[2 * i][0], af[2 * i][2]);
        mk::e4m3x4_to_f16x2(v.y, af[2 * i][1], af[2 * i][3]);
        mk::e4m3x4_to_f16x2(v.z, af[2 * i + 1][0], af[2 * i + 1][2]);
        mk::e4m3x4_to_f16x2(v.w, af[2 * i + 1][1], af[2 * i + 1][3]);
    }
}

// Steps 4 h .. 4 h + 3 of a slot (all 128 tokens) into `part` (fresh at step 0), one commit group.
__device__ __forceinline__ void issue_steps(float (&part)[64], const u32 (&af)[4][4], const unsigned char* slot,
                                            int h) {
    WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
    for (int q = 0; q < 4; ++q)
        wgmma_m64n128k16(part, af[q], smem_desc(slot + (4 * h + q) * 256, 128, 2048), h + q > 0);
    WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
}

// MODE: FULL computes y; the diagnostics leave stages out or change the promotion's arithmetic, to see what the
// time is made of (only FULL's y is the engine's): MMA_ONLY chains every k-block's products into one accumulator
// (no promotion), FIXED_A also widens only once; ADD_ONLY promotes by one add (acc += part), PREMUL by a
// multiply and an add (acc += part x (sc x u)), FMA by one fused multiply-add (acc = part x (sc x u) + acc).
enum Mode { FULL, MMA_ONLY, FIXED_A, ADD_ONLY, PREMUL, FMA };

__device__ __forceinline__ float promote_one(float acc, float part, float sc, float u, float f, Mode mode) {
    switch (mode) {
        case ADD_ONLY: return mk::add_rn(acc, part);
        case PREMUL: return mk::add_rn(acc, mk::mul_rn(part, f));
        case FMA: return __fmaf_rn(part, f, acc);
        default: return mk::promote_rn(acc, part, sc, u);  // the decode GEMV's rounding
    }
}

// acc[4j ..] += (sc x part[4j ..]) x unscale of tokens 8j + 2t, + 1 (rows g, g + 8), for the J token octets of
// `part`, the first at token 8 j0 (mul_rn, mul_rn, add_rn: the decode GEMV's rounding).
template <int J, Mode MODE = FULL>
__device__ __forceinline__ void promote(float* acc, const float (&part)[4 * J], float sc, const float* unscale, int j0,
                                        int t) {
#pragma unroll
    for (int j = 0; j < J; ++j) {
        const float2 u = *reinterpret_cast<const float2*>(unscale + 8 * (j0 + j) + 2 * t);
        const float fx = mk::mul_rn(sc, u.x), fy = mk::mul_rn(sc, u.y);
        acc[4 * j] = promote_one(acc[4 * j], part[4 * j], sc, u.x, fx, MODE);
        acc[4 * j + 1] = promote_one(acc[4 * j + 1], part[4 * j + 1], sc, u.y, fy, MODE);
        acc[4 * j + 2] = promote_one(acc[4 * j + 2], part[4 * j + 2], sc, u.x, fx, MODE);
        acc[4 * j + 3] = promote_one(acc[4 * j + 3], part[4 * j + 3], sc, u.y, fy, MODE);
    }
}

// A slot's eight steps for tokens 64 h .. 64 h + 63 into `part`, one commit group.
__device__ __forceinline__ void issue_half(float (&part)[32], const u32 (&af)[8][4], const unsigned char* slot, int h) {
    WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
    for (int st = 0; st < 8; ++st) wgmma_m64n64k16(part, af[st], smem_desc(slot + st * 256 + h * 16384, 128, 2048), st);
    WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
}

// The consumers' view of the ring: the tile's k-block b is the ring's load c = base + b (base: the loads of the
// block's earlier tiles), in slot c % STAGES, filled in round c / STAGES.
template <int STAGES>
struct Ring {
    unsigned char* smem;
    unsigned long long* full;
    unsigned long long* empty;
    int base;

    __device__ const unsigned char* slot(int b) const { return smem + ((base + b) % STAGES) * SLOT; }
    __device__ const float* unscale(int b) const { return reinterpret_cast<const float*>(slot(b) + X_BYTES); }
    __device__ void wait(int b) const {
        bar_wait(mk::smem_addr(&full[(base + b) % STAGES]), ((base + b) / STAGES) & 1);
    }
    __device__ void release(int b, int lane) const {  // one arrive a warp, after all its lanes' reads
        __syncwarp();
        if (lane == 0) bar_arrive(mk::smem_addr(&empty[(base + b) % STAGES]));
    }
};

template <int STAGES>
__device__ void init_ring(unsigned long long* full, unsigned long long* empty) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            bar_init(mk::smem_addr(&full[s]), 1);
            bar_init(mk::smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}

// The producer's loads of one tile: k-block b is the ring's load c = base + b; a slot is refilled once the
// consumers have released its previous round.
template <int STAGES>
__device__ void produce_tile(unsigned char* smem, unsigned long long* full, unsigned long long* empty,
                             const unsigned char* units, const unsigned char* prepared, int tile, int row_tile,
                             int blocks, int base) {
    const unsigned char* operand = prepared + static_cast<size_t>(tile) * blocks * XU_BYTES;
    const unsigned char* strips = units + static_cast<size_t>(row_tile) * (ROWS / 16) * blocks * UNIT;
    for (int b = 0; b < blocks; ++b) {
        const int c = base + b, s = c % STAGES;
        if (c >= STAGES) bar_wait(mk::smem_addr(&empty[s]), (c / STAGES + 1) & 1);
        const u32 slot = mk::smem_addr(smem + s * SLOT), bar = mk::smem_addr(&full[s]);
        bar_expect(bar, XU_BYTES + W_BYTES);
        bulk_copy(slot, operand + static_cast<size_t>(b) * XU_BYTES, XU_BYTES, bar);
        for (int st = 0; st < ROWS / 16; ++st)
            bulk_copy(slot + XU_BYTES + st * UNIT, strips + (static_cast<size_t>(st) * blocks + b) * UNIT, UNIT, bar);
    }
}

// This thread's 64 accumulators to y (accumulator i: row + 8 ((i / 2) % 2), token 8 (i / 4) + i % 2).
__device__ __forceinline__ void store_tile(float* y, const float (&acc)[64], int n, int tile, int row_tile, int warp,
                                           int g, int t) {
    const int row0 = row_tile * ROWS + 16 * warp + g, tok0 = tile * TOK + 2 * t;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const int row = row0 + 8 * (i / 2 % 2), tok = tok0 + 8 * (i / 4) + i % 2;
        y[static_cast<size_t>(tok) * n + row] = acc[i];
    }
}

// How a consumer warpgroup orders its products and promotions:
// WHOLE: per k-block the eight n128 steps, a wait, the promotion (the warpgroup's products wait for it);
// HALVES: the tokens as two n64 groups, each promoted while the other's products run;
// PIPELINED: k-block b + 1's first four steps run while b is promoted (two partials, A four steps at a time).
enum Schedule { WHOLE, HALVES, PIPELINED };

template <int STAGES, Mode MODE>
__device__ void consume_whole(float (&acc)[64], const Ring<STAGES>& ring, const float* scales, int blocks, int warp,
                              int lane, int t) {
    u32 af[8][4];
    float part[64];
    for (int b = 0; b < blocks; ++b) {
        ring.wait(b);
        const unsigned char* slot = ring.slot(b);
        if (MODE != FIXED_A || b == 0) widen(af, slot, warp, lane);
        const float sc = __ldg(scales + b);
        WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
        if constexpr (MODE == MMA_ONLY || MODE == FIXED_A) {  // every k-block chained into acc
#pragma unroll
            for (int st = 0; st < 8; ++st)
                wgmma_m64n128k16(acc, af[st], smem_desc(slot + st * 256, 128, 2048), b + st > 0);
        } else {
#pragma unroll
            for (int st = 0; st < 8; ++st) wgmma_m64n128k16(part, af[st], smem_desc(slot + st * 256, 128, 2048), st);
        }
        WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
        wait_groups<0>();
        if constexpr (MODE == MMA_ONLY || MODE == FIXED_A) {
            fence_all(acc);
            fence_all(af);
        } else {
            fence_all(part);
            fence_all(af);
            promote<16, MODE>(acc, part, sc, ring.unscale(b), 0, t);
        }
        ring.release(b, lane);
    }
}

template <int STAGES>
__device__ void consume_halves(float (&acc)[64], const Ring<STAGES>& ring, const float* scales, int blocks, int warp,
                               int lane, int t) {
    u32 af[8][4];
    float pa[32], pb[32];
    ring.wait(0);
    widen(af, ring.slot(0), warp, lane);
    issue_half(pa, af, ring.slot(0), 0);
    issue_half(pb, af, ring.slot(0), 1);
    for (int b = 0; b < blocks; ++b) {
        const float sc = __ldg(scales + b);
        wait_groups<1>();
        fence_all(pa);
        promote<8>(acc, pa, sc, ring.unscale(b), 0, t);
        wait_groups<0>();
        fence_all(pb);
        fence_all(af);
        if (b + 1 < blocks) {
            ring.wait(b + 1);
            widen(af, ring.slot(b + 1), warp, lane);
            issue_half(pa, af, ring.slot(b + 1), 0);
        }
        promote<8>(acc + 32, pb, sc, ring.unscale(b), 8, t);
        ring.release(b, lane);
        if (b + 1 < blocks) issue_half(pb, af, ring.slot(b + 1), 1);
    }
}

// k-block b's products (all in `cur`) done: start b + 1's first four steps into `next`, promote `cur`, free b's
// slot, then b + 1's last four steps.
template <int STAGES>
__device__ __forceinline__ void pipelined_step(float (&acc)[64], float (&cur)[64], float (&next)[64], u32 (&a4)[4][4],
                                               const Ring<STAGES>& ring, const float* scales, int b, int blocks,
                                               int warp, int lane, int t) {
    wait_groups<0>();
    fence_all(cur);
    fence_all(a4);
    const bool more = b + 1 < blocks;
    if (more) {
        ring.wait(b + 1);
        widen_half(a4, ring.slot(b + 1), warp, lane, 0);
        issue_steps(next, a4, ring.slot(b + 1), 0);
    }
    promote<16>(acc, cur, __ldg(scales + b), ring.unscale(b), 0, t);
    ring.release(b, lane);
    if (more) {
        wait_groups<0>();
        fence_all(a4);
        widen_half(a4, ring.slot(b + 1), warp, lane, 1);
        issue_steps(next, a4, ring.slot(b + 1), 1);
    }
}

template <int STAGES>
__device__ void consume_pipelined(float (&acc)[64], const Ring<STAGES>& ring, const float* scales, int blocks,
                                  int warp, int lane, int t) {
    float p0[64], p1[64];
    u32 a4[4][4];
    ring.wait(0);
    widen_half(a4, ring.slot(0), warp, lane, 0);
    issue_steps(p0, a4, ring.slot(0), 0);
    wait_groups<0>();
    fence_all(a4);
    widen_half(a4, ring.slot(0), warp, lane, 1);
    issue_steps(p0, a4, ring.slot(0), 1);
    for (int b = 0; b < blocks; b += 2) {  // two steps a trip, so that p0 and p1 keep static names
        pipelined_step(acc, p0, p1, a4, ring, scales, b, blocks, warp, lane, t);
        if (b + 1 < blocks) pipelined_step(acc, p1, p0, a4, ring, scales, b + 1, blocks, warp, lane, t);
    }
}

// One tile a block (the grid is the tiles, a row tile's token tiles adjacent so that they share its weights in L2).
template <int STAGES, Schedule SCHEDULE, Mode MODE = FULL>
__device__ void gemm(const unsigned char* units, const float* scale, const unsigned char* prepared, float* y, int n,
                     int k, int rows) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const int blocks = k / KB, tiles = rows / TOK;
    const int tile = blockIdx.x % tiles, row_tile = blockIdx.x / tiles;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    init_ring<STAGES>(full, empty);

    // 12 warps put three on an SM sub-partition's 16,384 registers: 168 each at launch; the producer warpgroup
    // gives its share to the two consumer warpgroups (2 x 232 + 40 = 504 a sub-partition's lane)
    if (warp >= CONSUMER_WARPS) {  // the producer
        WGMMA(asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n"));
        if (warp == CONSUMER_WARPS && lane == 0)
            produce_tile<STAGES>(smem, full, empty, units, prepared, tile, row_tile, blocks, 0);
        return;
    }

    WGMMA(asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n"));
    // a consumer: warpgroup wg's warp j has strip 4 wg + j (rows 16 (4 wg + j) + g, + 8 of the block's 128)
    const int g = lane / 4, t = lane % 4;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const Ring<STAGES> ring{smem, full, empty, 0};
    const float* scales = scale + static_cast<size_t>(row_tile) * blocks;
    if constexpr (SCHEDULE == PIPELINED)
        consume_pipelined(acc, ring, scales, blocks, warp, lane, t);
    else if constexpr (SCHEDULE == HALVES)
        consume_halves(acc, ring, scales, blocks, warp, lane, t);
    else
        consume_whole<STAGES, MODE>(acc, ring, scales, blocks, warp, lane, t);
    store_tile(y, acc, n, tile, row_tile, warp, g, t);
}

// Persistent: a block an SM walks the tiles i = blockIdx.x, + gridDim.x, ...; the ring runs on across tiles, so
// the producer loads the next tile's first k-blocks while the consumers promote and store the last ones.
template <int STAGES>
__device__ void gemm_persistent(const unsigned char* units, const float* scale, const unsigned char* prepared,
                                float* y, int n, int k, int rows) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const int blocks = k / KB, tiles = rows / TOK, count = tiles * (n / ROWS);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    init_ring<STAGES>(full, empty);
    if (warp >= CONSUMER_WARPS) {
        WGMMA(asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n"));
        if (warp == CONSUMER_WARPS && lane == 0)
            for (int i = blockIdx.x, base = 0; i < count; i += gridDim.x, base += blocks)
                produce_tile<STAGES>(smem, full, empty, units, prepared, i % tiles, i / tiles, blocks, base);
        return;
    }
    WGMMA(asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n"));
    const int g = lane / 4, t = lane % 4;
    for (int i = blockIdx.x, base = 0; i < count; i += gridDim.x, base += blocks) {
        float acc[64];
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = 0.0f;
        const Ring<STAGES> ring{smem, full, empty, base};
        consume_whole<STAGES, FULL>(acc, ring, scale + static_cast<size_t>(i / tiles) * blocks, blocks, warp, lane, t);
        store_tile(y, acc, n, i % tiles, i / tiles, warp, g, t);
    }
}

}  // namespace ws

// The prepare step: bf16 activations x [R][K] -> the operand as the GEMM reads it, per (128-token tile, k-block)
// the f16 operand (gemv.cuh f16_operand's rule: one power of two 2^P per row and k-block, x' = f16(x 2^P)) in
// the eight steps' core matrices, then the tile's 2^-P. A block per (tile, k-block), 256 threads: a half-warp
// holds one token's 128 values (a lane 8), and drops each of its four k pairs at its slot in shared memory
// (the pair k = 8 p + 2 q .. + 1 of piece p = 4 i + t is step 2 i + q / 2, half q % 2, slot 2 t); then
// the block copies its 33,280 bytes out in 16-byte stores.
extern "C" __global__ void __launch_bounds__(256) prompt_prepare(const __nv_bfloat16* x, unsigned char* prepared,
                                                                 int k) {
    __shared__ __align__(16) unsigned char tile[ws::XU_BYTES];
    const int blocks = k / ws::KB, t_index = blockIdx.x / blocks, b = blockIdx.x % blocks;
    const int half = threadIdx.x / 16, p = threadIdx.x % 16, i = p / 4, t = p % 4;
    const u32 lanes = 0xFFFFu << (threadIdx.x & 16);
    for (int n = half; n < ws::TOK; n += 16) {
        const size_t row = static_cast<size_t>(t_index) * ws::TOK + n;
        const uint4 v = reinterpret_cast<const uint4*>(x + row * k + static_cast<size_t>(b) * ws::KB)[p];
        const int P = mk::block_p(mk::piece_top(v), lanes);
        const uint4 h = mk::f16_piece(v, mk::two_to(P));
        const u32 pairs[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // element offset: 8-token group 1024, step 128, half 64, token 8, slot
            const int at = (n / 8) * 1024 + (2 * i + q / 2) * 128 + (q % 2) * 64 + (n % 8) * 8 + 2 * t;
            *reinterpret_cast<u32*>(tile + 2 * at) = pairs[q];
        }
        if (p == 0) reinterpret_cast<float*>(tile + ws::X_BYTES)[n] = mk::two_to(-P);
    }
    __syncthreads();
    uint4* out = reinterpret_cast<uint4*>(prepared + static_cast<size_t>(blockIdx.x) * ws::XU_BYTES);
    for (int j = threadIdx.x; j < ws::XU_BYTES / 16; j += blockDim.x) out[j] = reinterpret_cast<const uint4*>(tile)[j];
}

#define PROMPT_GEMM(NAME, STAGES, ...)                                                                      \
    extern "C" __global__ void __launch_bounds__(ws::THREADS, 1)                                                  \
        NAME(const unsigned char* units, const float* scale, const unsigned char* prepared, float* y, int n, int k, \
             int rows) {                                                                                          \
        ws::gemm<STAGES, __VA_ARGS__>(units, scale, prepared, y, n, k, rows);                                          \
    }

PROMPT_GEMM(prompt_gemm_ws2, 2, ws::WHOLE)
PROMPT_GEMM(prompt_gemm_ws3, 3, ws::WHOLE)
PROMPT_GEMM(prompt_gemm_ws4, 4, ws::WHOLE)
PROMPT_GEMM(prompt_gemm_ws3h, 3, ws::HALVES)
PROMPT_GEMM(prompt_gemm_ws4h, 4, ws::HALVES)
PROMPT_GEMM(prompt_gemm_ws3p, 3, ws::PIPELINED)
PROMPT_GEMM(prompt_gemm_ws4p, 4, ws::PIPELINED)
PROMPT_GEMM(prompt_gemm_ws3_mma_only, 3, ws::WHOLE, ws::MMA_ONLY)
PROMPT_GEMM(prompt_gemm_ws3_fixed_a, 3, ws::WHOLE, ws::FIXED_A)
PROMPT_GEMM(prompt_gemm_ws3_add_only, 3, ws::WHOLE, ws::ADD_ONLY)
PROMPT_GEMM(prompt_gemm_ws3_premul, 3, ws::WHOLE, ws::PREMUL)
PROMPT_GEMM(prompt_gemm_ws3_fma, 3, ws::WHOLE, ws::FMA)

// ws3 on a persistent grid (one block an SM: prompt_gemm_probe.py launches the SM count).
extern "C" __global__ void __launch_bounds__(ws::THREADS, 1)
    prompt_gemm_ws3_persistent(const unsigned char* units, const float* scale, const unsigned char* prepared, float* y,
                               int n, int k, int rows) {
    ws::gemm_persistent<3>(units, scale, prepared, y, n, k, rows);
}
