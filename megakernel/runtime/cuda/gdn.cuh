// GDN_CORE tile (docs/ISA.md "Other ops"): value head j, all m rows of the pass: causal conv over the ring +
// the pass's rows, silu, l2norm of q and k, the gates, the fp32 delta-rule recurrence with the state held
// in registers across the rows (read and written once a pass), and the gated RMSNorm of the head's output
// (computed once a head here rather than by every k-slice tile of out_proj).
//
// The tile is short and latency-bound (its state, 64 KB a head, is the only sizeable read), so everything
// it reads is asked for at once at its start: the raw conv inputs by async copies into shared memory, the
// conv taps and the gate inputs into registers, the state into L2 (read into registers after the conv);
// nothing waits on memory before all of it is in flight. It took ~14 us a word loading one raw input at a
// time and writing its state in 16-byte pieces 512 bytes apart (docs/DECISIONS.md D37).
//
// Threads: column v = tid % 128 of the head's dv columns, quarter q = tid / 128 holds state rows
// [32 q, 32 q + 32) of dk = 128 (layout [dv, dk] in the state buffer: a column's dk values are
// contiguous). The sums over dk are four quarter sums added in order 0..3. The conv gives thread c one
// of the tile's channels (q, k of its key head, then its value columns).
#pragma once

#include "common.cuh"
#include "gemv.cuh"

namespace mk {

constexpr int GDN_DK = 128;       // key head dim (Qwen3.5: 128); the tile function is specialised to it
constexpr int GDN_MAX_COLS = 128; // value columns of one head (dv)
constexpr int GDN_MAX_KERNEL = 4; // conv kernel taps supported (Qwen3.5: 4; config.DEVICE_MAX_CONV_KERNEL)
constexpr int GDN_QUARTERS = TILE_THREADS / GDN_MAX_COLS;
constexpr int GDN_PER_THREAD = GDN_DK / GDN_QUARTERS;

constexpr int GDN_MAX_FOLD = 2 * MAX_ROWS;  // a pass's rows and the rows a speculative pass left pending

constexpr int GDN_RAW_COLS = 2 * GDN_DK + GDN_MAX_COLS;  // a tile's channels: q, k, its value columns
constexpr int GDN_MAX_RAW = GDN_MAX_KERNEL - 1 + GDN_MAX_FOLD;  // raw input rows a tile's conv reads
static_assert(GDN_RAW_COLS <= TILE_THREADS, "a conv thread per channel");

// A warp's stored state passes through shared memory so that global memory sees whole 128-byte lines (a
// lane's 32 state values are one line, but the 32 lanes' lines lie dk floats apart: written by the lanes
// directly, each 16-byte store is its own half-written sector, and those stores were the tile's largest
// cost). Eight lines at a time; rows padded to 36 floats so that the eight lanes writing one row each fall
// in distinct banks. The loads stay direct (L1 serves most second halves of their sectors): loading
// through the same transpose measured 0.4 us a word faster, but its registers cost the megakernel's GDN
// call 12-20 bytes of register saves (D37).
constexpr int GDN_TRANSPOSE_LINES = 8;
constexpr int GDN_TRANSPOSE_STRIDE = GDN_PER_THREAD + 4;
static_assert(GDN_PER_THREAD == 32 && GDN_TRANSPOSE_LINES == 8, "store_state: 8 lanes a 128-byte line");

// The conv's inputs (steps 1-2) and the state's transpose buffers (step 4) share their bytes: barriers lie
// between the conv's last read and the first transpose.
struct GdnConvInputs {
    alignas(16) bf16 raw[GDN_MAX_RAW][GDN_RAW_COLS];  // raw inputs of positions first - K + 1 .. pos + m - 1
    float taps[GDN_MAX_KERNEL][GDN_RAW_COLS];
};

struct GdnSmem {
    float q[GDN_MAX_FOLD][GDN_DK];
    float k[GDN_MAX_FOLD][GDN_DK];
    bf16 v[GDN_MAX_FOLD][GDN_MAX_COLS];  // bf16 values (the conv's output is rounded to bf16)
    alignas(16) bf16 z[MAX_ROWS][GDN_MAX_COLS];  // the gated norm's gate rows (staged)
    alignas(16) u8 norm_weight[4 * GDN_MAX_COLS];  // the gated norm's weight (staged; bf16 or fp32)
    bf16 o[MAX_ROWS][GDN_MAX_COLS];  // the recurrence's bf16 outputs, before the norm
    float beta[GDN_MAX_FOLD];
    float decay[GDN_MAX_FOLD];  // exp(g)
    float mem_part[2][GDN_QUARTERS][GDN_MAX_COLS];  // by row parity: a row's writes never meet the last row's reads
    float out_part[GDN_QUARTERS][GDN_MAX_COLS];
    union {
        GdnConvInputs conv;
        alignas(16) float transpose[TILE_WARPS][GDN_TRANSPOSE_LINES][GDN_TRANSPOSE_STRIDE];
    } x;
};

// The input channel of a tile's column c: q of key head kh, k of key head kh, then its value columns from
// v_first.
__device__ __forceinline__ int gdn_channel(int c, int dk, int kh, int key_dim, int v_first) {
    return c < dk ? kh * dk + c : c < 2 * dk ? key_dim + kh * dk + c - dk : v_first + c - 2 * dk;
}

// Async copies of n raw input rows of the tile's `width` channels into sm.x.conv.raw rows [t0, t0 + n), from
// buf's rows row0 + t, taken mod R when R > 0 (the conv ring; row0 may be negative). No wait (stage_wait).
__device__ inline void stage_raw(const Buffer& buf, int row0, int R, int n, int t0, int width, int dk, int kh,
                                 int key_dim, int v_first, GdnSmem& sm) {
    const size_t align = reinterpret_cast<size_t>(buf.base) | static_cast<size_t>(2 * buf.cols) |
                         static_cast<size_t>(2 * key_dim) | static_cast<size_t>(2 * v_first) | static_cast<size_t>(2 * width);
    const int piece = piece_bytes(align), half = piece / 2, per_row = width / half;
    for (int e = threadIdx.x; e < n * per_row; e += TILE_THREADS) {
        const int t = e / per_row, c = (e % per_row) * half;
        const int row = R > 0 ? ((row0 + t) % R + R) % R : row0 + t;
        copy_async_piece(smem_addr(&sm.x.conv.raw[t0 + t][c]), buf.at<bf16>(row, gdn_channel(c, dk, kh, key_dim, v_first)), piece);
    }
}

// Each lane's state segment (GDN_PER_THREAD floats of s) to its own `mine` (lane c's at lane 0's + c *
// stride), the warp writing whole lines: eight lanes' segments at a time go through the warp's transpose
// rows, then each line is written by 8 lanes, 16 bytes each. All lanes of the warp.
__device__ inline void store_state(float* mine, int stride, const float (&s)[GDN_PER_THREAD],
                                   float (*rows)[GDN_TRANSPOSE_STRIDE], int lane) {
    float* first = mine - lane * stride;
#pragma unroll
    for (int r = 0; r < 32 / GDN_TRANSPOSE_LINES; ++r) {
        __syncwarp();
        if (lane / 8 == r) {
#pragma unroll
            for (int i = 0; i < GDN_PER_THREAD; i += 4)
                *reinterpret_cast<float4*>(&rows[lane % 8][i]) = make_float4(s[i], s[i + 1], s[i + 2], s[i + 3]);
        }
        __syncwarp();
        *reinterpret_cast<float4*>(first + (8 * r + lane / 8) * stride + 4 * (lane % 8)) =
            *reinterpret_cast<const float4*>(&rows[lane / 8][4 * (lane % 8)]);
        *reinterpret_cast<float4*>(first + (8 * r + 4 + lane / 8) * stride + 4 * (lane % 8)) =
            *reinterpret_cast<const float4*>(&rows[4 + lane / 8][4 * (lane % 8)]);
    }
    __syncwarp();
}

// Value head j: the n rows a speculative pass left pending (ctrl; positions pos - n .. pos - 1, raw inputs
// from the conv and gate rings, no outputs), then the pass's m rows. The state is held in registers across
// the rows (read and written once a pass); the one stored is the state after the pass's rows, or after the
// pending rows only when the pass is speculative (docs/ISA.md "Speculative passes").
__device__ inline void gdn_tile(const Ctx& ctx, const Word& w, int tile, GdnSmem& sm) {
    const Weight taps = ctx.weight(w.p(0)), a_log = ctx.weight(w.p(1)), dt_bias = ctx.weight(w.p(2));
    const Weight norm_weight = ctx.weight(w.p(9));
    const int hk = w.p(3), hv = w.p(4), dk = w.p(5), dv = w.p(6), K = w.p(7), R = w.p(8);
    const float eps = w.pf(10);
    const int m = w.rows(), j = tile;
    const int per_key = hv / hk, kh = j / per_key, key_dim = hk * dk, b_col = 2 * key_dim + 2 * hv * dv + j;
    const int width = 2 * dk + dv, v_first = 2 * key_dim + j * dv, z_first = v_first + hv * dv;
    const Buffer mixed = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_out());
    const Buffer state = ctx.buffer(w.buf_aux0()), ring = ctx.buffer(w.buf_aux1()), gates = ctx.buffer(w.buf_aux2());
    const int* control = ctx.control() + w.ctrl_base();
    const int pos = control[CTRL_POSITION], pending = control[CTRL_PENDING];
    const bool speculative = control[CTRL_SPECULATIVE] != 0;
    const int first = pos - pending, count = pending + m, ring_rows = K - 1 + pending;
    const int tid = threadIdx.x;

    // 1. Every read in flight at once. Raw conv inputs of positions first - K + 1 .. pos + m - 1 (before pos
    // from the conv ring, rows mod R; the pass's own from its projection rows) -> sm.x.conv.raw; the gate
    // rows z and the norm weight for step 5.
    stage_raw(ring, first - K + 1, R, ring_rows, 0, width, dk, kh, key_dim, v_first, sm);
    stage_raw(mixed, 0, 0, m, ring_rows, width, dk, kh, key_dim, v_first, sm);
    stage_rows(mixed.at<bf16>(0, z_first), mixed.cols, &sm.z[0][0], GDN_MAX_COLS, m, dv);
    stage_bytes(norm_weight.base, sm.norm_weight, (dv * weight_bytes(norm_weight) + 15) / 16 * 16);
    copies_commit();
    const int c = tid, ch = gdn_channel(c, dk, kh, key_dim, v_first);
    const bool conv_thread = c < width;
    float tap[GDN_MAX_KERNEL];  // to shared memory below, once every other read is in flight
#pragma unroll
    for (int i = 0; i < GDN_MAX_KERNEL; ++i)
        tap[i] = conv_thread && i < K ? taps.value(static_cast<size_t>(ch) * K + i) : 0.0f;
    // The gates' inputs: b and a of pending rows from the gate ring, of the pass's rows from the projection.
    float b = 0.0f, a = 0.0f, neg_a = 0.0f, bias = 0.0f;
    if (tid < count) {
        const int p = first + tid;
        b = p < pos ? bf(*gates.at<bf16>(p % R, j)) : bf(*mixed.at<bf16>(p - pos, b_col));
        a = p < pos ? bf(*gates.at<bf16>(p % R, hv + j)) : bf(*mixed.at<bf16>(p - pos, b_col + hv));
        neg_a = a_log.value(j), bias = dt_bias.value(j);
    }
    // The state: thread tid holds column v = tid % 128's segment of dk (quarter tid / 128), read once a
    // pass and held in registers across the rows. Asked of L2 now, read after the conv.
    const int v = tid % GDN_MAX_COLS, quarter = tid / GDN_MAX_COLS, i0 = quarter * GDN_PER_THREAD;
    const int warp = tid >> 5, lane = tid & 31;
    const bool active = v < dv;  // warp-uniform: dv is a multiple of 32
    float* column = active ? state.at<float>(j, v * dk + i0) : nullptr;
    if (active) asm volatile("prefetch.global.L2 [%0];" ::"l"(column));
    // gates: beta = bf16(sigmoid(b)), g = -exp(A_log) softplus(a + dt_bias); the state decays by exp(g).
    if (tid < count) {
        sm.beta[tid] = round_bf16(sigmoid_ref(b));
        const float g = mul_rn(-expf(neg_a), softplus_ref(add_rn(a, bias)));
        sm.decay[tid] = expf(g);
    }
    if (conv_thread) {
#pragma unroll
        for (int i = 0; i < GDN_MAX_KERNEL; ++i) sm.x.conv.taps[i][c] = tap[i];
    }
    stage_wait();

    // 2. Causal conv + silu of the tile's channels, rows first .. pos + m - 1: out[r] =
    // bf16(silu(bf16(sum_i raw[r + i] * taps[i]))), taps added in order.
    if (conv_thread) {
        float* to = c < dk ? &sm.q[0][c] : c < 2 * dk ? &sm.k[0][c - dk] : nullptr;
        for (int r = 0; r < count; ++r) {
            float acc = mul_rn(bf(sm.x.conv.raw[r][c]), sm.x.conv.taps[0][c]);
            for (int i = 1; i < K; ++i) acc = add_rn(acc, mul_rn(bf(sm.x.conv.raw[r + i][c]), sm.x.conv.taps[i][c]));
            const float y = round_bf16(silu_ref(round_bf16(acc)));
            if (c < 2 * dk) to[r * GDN_DK] = y;
            else sm.v[r][c - 2 * dk] = to_bf16(y);
        }
        // The pass's raw inputs -> ring rows (pos + r) mod R (this tile read its ring rows above; other
        // tiles read only rows before pos, which the R-row rings keep apart). q/k channels by the key
        // head's first value head.
        if (c >= 2 * dk || j % per_key == 0)
            for (int r = 0; r < m; ++r) *ring.at<bf16>((pos + r) % R, ch) = sm.x.conv.raw[ring_rows + r][c];
    }
    // A speculative pass's gates -> gate ring rows (pos + r) mod R.
    if (speculative && tid < m) {
        *gates.at<bf16>((pos + tid) % R, j) = *mixed.at<bf16>(tid, b_col);
        *gates.at<bf16>((pos + tid) % R, hv + j) = *mixed.at<bf16>(tid, b_col + hv);
    }
    __syncthreads();  // the conv's inputs are read: their bytes become the transpose buffers
    float s[GDN_PER_THREAD];
    if (active) {
#pragma unroll
        for (int i = 0; i < GDN_PER_THREAD; i += 4) {
            const float4 f = *reinterpret_cast<const float4*>(column + i);
            s[i] = f.x, s[i + 1] = f.y, s[i + 2] = f.z, s[i + 3] = f.w;
        }
    }
    // 3. l2norm of q and k per row; q / sqrt(dk). Warp per (row, q or k).
    for (int pair = warp; pair < 2 * count; pair += TILE_WARPS) {
        float* x = pair < count ? sm.q[pair] : sm.k[pair - count];
        float ss = 0.0f;
        for (int i = lane; i < dk; i += 32) ss = add_rn(ss, mul_rn(x[i], x[i]));
        const float r = rsqrt_ref(add_rn(warp_sum(ss), 1e-6f));
        const float root = sqrt_rn(static_cast<float>(dk));
        __syncwarp();
        for (int i = lane; i < dk; i += 32) x[i] = pair < count ? div_rn(mul_rn(x[i], r), root) : mul_rn(x[i], r);
    }
    __syncthreads();
    // 4. The recurrence, row by row, state in registers; two barriers a row (one for a pending row). The
    // state stored is the one after the pass's rows, or after the pending rows in a speculative pass.
    for (int r = 0; r < count; ++r) {
        float(*mem_part)[GDN_MAX_COLS] = sm.mem_part[r & 1];
        float mem = 0.0f;
        if (active) {
#pragma unroll
            for (int i = 0; i < GDN_PER_THREAD; ++i) {
                s[i] = mul_rn(s[i], sm.decay[r]);
                mem = add_rn(mem, mul_rn(s[i], sm.k[r][i0 + i]));
            }
            mem_part[quarter][v] = mem;
        }
        __syncthreads();
        float o = 0.0f;
        if (active) {
            float total = mem_part[0][v];
            for (int q = 1; q < GDN_QUARTERS; ++q) total = add_rn(total, mem_part[q][v]);
            const float delta = mul_rn(sub_rn(bf(sm.v[r][v]), total), sm.beta[r]);
#pragma unroll
            for (int i = 0; i < GDN_PER_THREAD; ++i) {
                s[i] = add_rn(s[i], mul_rn(sm.k[r][i0 + i], delta));
                o = add_rn(o, mul_rn(s[i], sm.q[r][i0 + i]));
            }
        }
        if (r < pending) {  // a kept row of the last speculative pass: no output
            if (r == pending - 1 && speculative && active) store_state(column, dk, s, sm.x.transpose[warp], lane);
            continue;
        }
        // out_part: written after this row's first barrier, read after its second; the next output row
        // writes it only after its own first barrier, which every reader reaches after reading.
        if (active) sm.out_part[quarter][v] = o;
        __syncthreads();
        if (active && quarter == 0) {
            float total = sm.out_part[0][v];
            for (int q = 1; q < GDN_QUARTERS; ++q) total = add_rn(total, sm.out_part[q][v]);
            sm.o[r - pending][v] = to_bf16(total);
        }
    }
    if (!speculative && active) store_state(column, dk, s, sm.x.transpose[warp], lane);
    __syncthreads();
    // 5. The gated RMSNorm of each row's head, a warp per row: bf16(bf16(w * bf16(o * rsqrt(mean(o^2) +
    // eps))) * silu(z)), lane l holding values l, l + 32, ... (the order the GEMV prologue used).
    if (warp < m) {
        const int per_lane = dv / 32;
        float ss = 0.0f;
        for (int i = 0; i < per_lane; ++i) {
            const float o = bf(sm.o[warp][lane + 32 * i]);
            ss = add_rn(ss, mul_rn(o, o));
        }
        const float r = rsqrt_ref(add_rn(div_rn(warp_sum(ss), static_cast<float>(dv)), eps));
        for (int i = 0; i < per_lane; ++i) {
            const int d = lane + 32 * i;
            const float xn = round_bf16(mul_rn(bf(sm.o[warp][d]), r));
            const float t = round_bf16(mul_rn(staged_value(sm.norm_weight, norm_weight.dtype, d), xn));
            *out.at<bf16>(warp, j * dv + d) = to_bf16(mul_rn(t, silu_ref(bf(sm.z[warp][d]))));
        }
    }
}

}  // namespace mk
