// GDN_CORE tile (docs/ISA.md "Other ops"): value head j, all m rows of the pass: causal conv over the ring +
// the pass's rows, silu, l2norm of q and k, the gates, the fp32 delta-rule recurrence with the state held
// in registers across the rows (read and written once a pass), and the gated RMSNorm of the head's output
// (computed once a head here rather than by every k-slice tile of out_proj).
//
// The tile is short and latency-bound, so everything it reads is asked for at once at its start: the raw
// conv inputs and the taps by async copies into shared memory, the gate inputs into registers, then
// the state (64 KB a head, which one SM takes ~1 us to read and ~2 us to write: experiments/gdn_floor.py)
// in its own copy group, landing while the conv and l2norm run; the state goes back after the gated norm
// in the norm's warps and meanwhile in the others. It took ~14 us a word loading one raw input at a time
// and writing its state in 16-byte pieces 512 bytes apart (docs/DECISIONS.md D37), 12.7 us before its
// rows needed no block barrier (D54), 8.3 us before the state stopped going ahead of the conv's inputs
// (D55).
//
// Threads: warp w holds value columns [8 w, 8 w + 8) of the head's dv (layout [dv, dk] in the state
// buffer: a column's dk values are contiguous, so a warp's columns are 4 KB in one piece); half-warp g of it
// columns 8 w + 4 g .. + 3, and its lane i the state rows [8 i, 8 i + 8) of dk = 128 of those four columns.
// A row's k and q are then 8 values a lane (four 16-byte loads a row; a lane holding one column's 32 rows
// made it 24, and those loads bounded the rows: D54). The sums over dk: each lane's 8 in order, then the
// 16 lanes' partial sums as a tree (gdn_columns_sum), the same tree in every build and every row, so an
// M-row pass is still M one-row passes; not the reference's order, and the delta rule's products and sums
// are fused multiply-adds (NUMERICS.md, D55). A warp's recurrence needs no other warp: a row costs no
// block barrier.
#pragma once

#include "common.cuh"
#include "gemv.cuh"

namespace mk {

constexpr int GDN_DK = 128;       // key head dim (Qwen3.5: 128); the tile function is specialised to it
constexpr int GDN_MAX_COLS = 128; // value columns of one head (dv)
constexpr int GDN_MAX_KERNEL = 4; // conv kernel taps supported (Qwen3.5: 4; config.DEVICE_MAX_CONV_KERNEL)
constexpr int GDN_WARP_COLS = 8;  // value columns a warp holds
constexpr int GDN_LANE_COLS = 4;  // of which a lane holds its half-warp's four
constexpr int GDN_LANE_DK = 8;    // over 8 rows of dk
static_assert(GDN_WARP_COLS * TILE_WARPS == GDN_MAX_COLS && 2 * GDN_LANE_COLS == GDN_WARP_COLS &&
              16 * GDN_LANE_DK == GDN_DK, "a half-warp's 16 lanes cover dk for its four columns");

constexpr int GDN_MAX_FOLD = 2 * MAX_ROWS;  // a pass's rows and the rows a speculative pass left pending

constexpr int GDN_RAW_COLS = 2 * GDN_DK + GDN_MAX_COLS;  // a tile's channels: q, k, its value columns
constexpr int GDN_MAX_RAW = GDN_MAX_KERNEL - 1 + GDN_MAX_FOLD;  // raw input rows a tile's conv reads
static_assert(GDN_RAW_COLS + 32 < TILE_THREADS && GDN_MAX_FOLD <= 32,
              "a conv thread per channel, silu(z) threads, and the last warp's lanes for the gates");

// The head's state passes through shared memory both ways, so that global memory sees each warp's 4 KB as
// whole 512-byte instructions (read or written by the lanes directly, every instruction touches many
// lines; D37 measured such stores as the tile's largest cost and such loads as its LSU stalls). It is
// copied in asynchronously after the tile's other inputs (its own copy group). 16-byte piece p (dk 4 p .. 4 p + 3) of a column
// sits at piece p ^ (p / 8 % 2) of the column's 512 bytes, so that the 8 lanes of a quarter-warp, reading
// pieces 2 i + h of one column, hit 8 distinct bank groups.
__device__ __forceinline__ int gdn_state_piece(int warp, int column, int piece) {  // a byte offset
    return warp * (GDN_WARP_COLS * GDN_DK * 4) + column * (GDN_DK * 4) + 16 * (piece ^ (piece / 8 % 2));
}

struct GdnConvInputs {
    alignas(16) bf16 raw[GDN_MAX_RAW][GDN_RAW_COLS];  // raw inputs of positions first - K + 1 .. pos + m - 1
    alignas(16) u8 taps[GDN_RAW_COLS * GDN_MAX_KERNEL * 4];  // the channels' K taps as stored (stage_taps)
};

struct GdnSmem {
    alignas(16) u8 state[GDN_MAX_COLS * GDN_DK * 4];  // the head's state (gdn_state_piece)
    alignas(16) float q[GDN_MAX_FOLD][GDN_DK];
    alignas(16) float k[GDN_MAX_FOLD][GDN_DK];
    bf16 v[GDN_MAX_FOLD][GDN_MAX_COLS];  // bf16 values (the conv's output is rounded to bf16)
    alignas(16) bf16 z[MAX_ROWS][GDN_MAX_COLS];  // the gated norm's gate rows (staged)
    float silu_z[MAX_ROWS][GDN_MAX_COLS];        // silu of z (step 2)
    alignas(16) u8 norm_weight[4 * GDN_MAX_COLS];  // the gated norm's weight (staged; bf16 or fp32)
    bf16 o[MAX_ROWS][GDN_MAX_COLS];  // the recurrence's bf16 outputs, before the norm
    float beta[GDN_MAX_FOLD];
    float decay[GDN_MAX_FOLD];  // exp(g)
    GdnConvInputs conv;
};
// Both builds give the GDN tile at least this much dynamic shared memory (cuda_build.tile_smem_bytes).
constexpr int GDN_MIN_SMEM = 115584;
static_assert(sizeof(GdnSmem) <= GDN_MIN_SMEM, "GDN_MIN_SMEM");

// The input channel of a tile's column c: q of key head kh, k of key head kh, then its value columns from
// v_first.
__device__ __forceinline__ int gdn_channel(int c, int dk, int kh, int key_dim, int v_first) {
    return c < dk ? kh * dk + c : c < 2 * dk ? key_dim + kh * dk + c - dk : v_first + c - 2 * dk;
}

// Async copies of n raw input rows of the tile's `width` channels into sm.conv.raw rows [t0, t0 + n), from
// buf's rows row0 + t, taken mod R when R > 0 (the conv ring; row0 may be negative). No wait (stage_wait).
__device__ inline void stage_raw(const Buffer& buf, int row0, int R, int n, int t0, int width, int dk, int kh,
                                 int key_dim, int v_first, GdnSmem& sm) {
    const size_t align = reinterpret_cast<size_t>(buf.base) | static_cast<size_t>(2 * buf.cols) |
                         static_cast<size_t>(2 * key_dim) | static_cast<size_t>(2 * v_first) | static_cast<size_t>(2 * width);
    const int piece = piece_bytes(align), half = piece / 2, per_row = width / half;
    const int start = R > 0 ? (row0 % R + R) % R : row0;  // n <= R rows: one wrap at most
    for (int e = threadIdx.x; e < n * per_row; e += TILE_THREADS) {
        const int t = e / per_row, c = (e % per_row) * half;
        const int row = R > 0 && start + t >= R ? start + t - R : start + t;
        copy_async_piece(smem_addr(&sm.conv.raw[t0 + t][c]), buf.at<bf16>(row, gdn_channel(c, dk, kh, key_dim, v_first)), piece);
    }
}

// Async copies of the conv taps of the tile's channels (q, k of key head kh, then `cols` value channels
// from v_first: three runs of the taps weight [conv channels, K], K values a channel as stored) into
// sm.conv.taps, in that order: tile channel c's tap i at c K + i (gdn_tap). No wait.
__device__ inline void stage_taps(const Weight& taps, int K, int dk, int kh, int key_dim, int v_first, int cols,
                                  GdnSmem& sm) {
    const int bytes = weight_bytes(taps) * K;  // a channel's taps
    const int first[3] = {kh * dk, key_dim + kh * dk, v_first}, count[3] = {dk, dk, cols};
    int at = 0;
#pragma unroll
    for (int run = 0; run < 3; ++run) {
        const u8* src = taps.base + static_cast<size_t>(first[run]) * bytes;
        const int n = count[run] * bytes;
        const int piece = piece_bytes(reinterpret_cast<size_t>(src) | static_cast<size_t>(n) | static_cast<size_t>(at));
        for (int i = threadIdx.x * piece; i < n; i += TILE_THREADS * piece)
            copy_async_piece(smem_addr(sm.conv.taps + at + i), src + i, piece);
        at += n;
    }
}

__device__ __forceinline__ float gdn_tap(const GdnSmem& sm, int dtype, int K, int channel, int i) {
    return staged_value(sm.conv.taps, dtype, channel * K + i);
}

// The warp's 4 KB of state (`from`: its first column) into its part of sm.state, as async copies: step c
// copies column c's 512 bytes. No wait.
__device__ inline void stage_state(const float* from, GdnSmem& sm, int warp, int lane) {
    const u8* src = reinterpret_cast<const u8*>(from);
#pragma unroll
    for (int c = 0; c < GDN_WARP_COLS; ++c)
        copy_async16(smem_addr(sm.state + gdn_state_piece(warp, c, lane)), src + GDN_DK * 4 * c + 16 * lane);
}

// The lane's state (its half-warp g's four columns over dk rows [8 i, 8 i + 8)) from shared memory into s.
__device__ inline void load_state(float (&s)[GDN_LANE_COLS][GDN_LANE_DK], const GdnSmem& sm, int warp, int g, int i) {
#pragma unroll
    for (int c = 0; c < GDN_LANE_COLS; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float4 f = *reinterpret_cast<const float4*>(sm.state + gdn_state_piece(warp, GDN_LANE_COLS * g + c, 2 * i + h));
            s[c][4 * h] = f.x, s[c][4 * h + 1] = f.y, s[c][4 * h + 2] = f.z, s[c][4 * h + 3] = f.w;
        }
    }
}

// s -> the warp's part of sm.state (its lanes' pieces). All lanes of the warp.
__device__ inline void state_to_shared(const float (&s)[GDN_LANE_COLS][GDN_LANE_DK], GdnSmem& sm, int warp, int g, int i) {
#pragma unroll
    for (int c = 0; c < GDN_LANE_COLS; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<float4*>(sm.state + gdn_state_piece(warp, GDN_LANE_COLS * g + c, 2 * i + h)) =
                make_float4(s[c][4 * h], s[c][4 * h + 1], s[c][4 * h + 2], s[c][4 * h + 3]);
    }
}

// The warp's part of sm.state -> its 4 KB at `to` (its first column): each instruction writes one column's
// 512 contiguous bytes. All lanes of the warp, after a barrier that follows state_to_shared.
__device__ inline void state_to_global(float* to, const GdnSmem& sm, int warp, int lane) {
    u8* dst = reinterpret_cast<u8*>(to);
#pragma unroll
    for (int c = 0; c < GDN_WARP_COLS; ++c)
        *reinterpret_cast<float4*>(dst + GDN_DK * 4 * c + 16 * lane) =
            *reinterpret_cast<const float4*>(sm.state + gdn_state_piece(warp, c, lane));
}

// The sums over a half-warp's 16 lanes of each lane's four column partials x (lane i of the half-warp): a
// transposed butterfly, each lane keeping half of what it holds at each step (columns 0, 1 or 2, 3 over
// lane bit 3; then one of two over bit 2), then plain butterflies over bits 1 and 0. Lane i returns the sum
// of column 2 (i >> 3 & 1) + (i >> 2 & 1); its four lanes i & ~3 .. i | 3 hold the same bits (a + b is
// b + a bit for bit).
__device__ __forceinline__ int gdn_sum_column(int i) { return 2 * (i >> 3 & 1) + (i >> 2 & 1); }

__device__ __forceinline__ float gdn_columns_sum(const float (&x)[GDN_LANE_COLS], int i) {
    const bool hi8 = (i & 8) != 0, hi4 = (i & 4) != 0;
    const float keep0 = hi8 ? x[2] : x[0], keep1 = hi8 ? x[3] : x[1];
    const float send0 = hi8 ? x[0] : x[2], send1 = hi8 ? x[1] : x[3];
    const float y0 = add_rn(keep0, __shfl_xor_sync(0xffffffffu, send0, 8));
    const float y1 = add_rn(keep1, __shfl_xor_sync(0xffffffffu, send1, 8));
    float y = add_rn(hi4 ? y1 : y0, __shfl_xor_sync(0xffffffffu, hi4 ? y0 : y1, 4));
    y = add_rn(y, __shfl_xor_sync(0xffffffffu, y, 2));
    return add_rn(y, __shfl_xor_sync(0xffffffffu, y, 1));
}

// What a GDN tile reads that no launch of its pass writes: its state, the conv ring's rows before pos (both
// written by this word in earlier passes), the gated norm's weight and the conv taps, as one copy group.
// The discrete kernel issues it before griddepcontrol.wait, so that the state streams while the launch
// before finishes (D58): a launch starts only once the one before it has passed its own wait, so every
// launch before that one, and with it every earlier pass, has completed. The megakernel's tile issues the
// same reads itself, after its inputs' counters (gdn_tile, ahead = false: the conv's inputs first, D55).
__device__ inline void gdn_reads_ahead(const Ctx& ctx, const Word& w, int tile, GdnSmem& sm) {
    const int hk = w.p(3), hv = w.p(4), dk = GDN_DK, dv = w.p(6), K = w.p(7), R = w.p(8);
    const int j = tile, kh = j / (hv / hk), key_dim = hk * dk, width = 2 * dk + dv, v_first = 2 * key_dim + j * dv;
    const int* control = ctx.control() + w.ctrl_base();
    const int first = control[CTRL_POSITION] - control[CTRL_PENDING];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (GDN_WARP_COLS * warp < dv)
        stage_state(ctx.buffer(w.buf_aux0()).at<float>(j, GDN_WARP_COLS * warp * dk), sm, warp, lane);
    stage_raw(ctx.buffer(w.buf_aux1()), first - K + 1, R, K - 1 + control[CTRL_PENDING], 0, width, dk, kh, key_dim,
              v_first, sm);
    const Weight norm_weight = ctx.weight(w.p(9));
    stage_bytes(norm_weight.base, sm.norm_weight, (dv * weight_bytes(norm_weight) + 15) / 16 * 16);
    stage_taps(ctx.weight(w.p(0)), K, dk, kh, key_dim, v_first, dv, sm);
    copies_commit();
}

// Value head j: the n rows a speculative pass left pending (ctrl; positions pos - n .. pos - 1, raw inputs
// from the conv and gate rings, no outputs), then the pass's m rows. The state is held in registers across
// the rows (read and written once a pass); the one stored is the state after the pass's rows, or after the
// pending rows only when the pass is speculative (docs/ISA.md "Speculative passes"). `ahead`: the caller
// issued gdn_reads_ahead (its copy group then lands with the conv's inputs, before the conv).
__device__ inline void gdn_tile(const Ctx& ctx, const Word& w, int tile, GdnSmem& sm, bool ahead) {
    tile_stamp(0, true);  // the phase probe's stamps (common.cuh; nothing unless MEGAKERNEL_TILE_STAMPS)
    const Weight taps = ctx.weight(w.p(0)), a_log = ctx.weight(w.p(1)), dt_bias = ctx.weight(w.p(2));
    const int hk = w.p(3), hv = w.p(4), dk = GDN_DK, dv = w.p(6), K = w.p(7), R = w.p(8);
    const int m = w.rows(), j = tile;
    const int per_key = hv / hk, kh = j / per_key, key_dim = hk * dk, b_col = 2 * key_dim + 2 * hv * dv + j;
    const int width = 2 * dk + dv, v_first = 2 * key_dim + j * dv, z_first = v_first + hv * dv;
    const Buffer mixed = ctx.buffer(w.buf_in());
    const Buffer state = ctx.buffer(w.buf_aux0()), ring = ctx.buffer(w.buf_aux1()), gates = ctx.buffer(w.buf_aux2());
    const int* control = ctx.control() + w.ctrl_base();
    const int pos = control[CTRL_POSITION], pending = control[CTRL_PENDING];
    const bool speculative = control[CTRL_SPECULATIVE] != 0;
    const int first = pos - pending, count = pending + m, ring_rows = K - 1 + pending;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // This lane's state: half-warp g's columns 8 warp + 4 g .. + 3, dk rows [8 i, 8 i + 8).
    const int g = lane / 16, seg = lane % 16, sum_column = GDN_WARP_COLS * warp + GDN_LANE_COLS * g + gdn_sum_column(seg);
    const bool active = GDN_WARP_COLS * warp < dv;  // warp-uniform: dv is a multiple of 8
    float* columns = active ? state.at<float>(j, GDN_WARP_COLS * warp * dk) : nullptr;  // the warp's 4 KB

    // 1. Every read in flight at once, the conv's first: the raw conv inputs of positions first - K + 1 ..
    // pos + m - 1 (before pos from the conv ring, rows mod R; the pass's own from its projection rows) ->
    // sm.conv.raw, the gate rows z, the norm weight and the taps for steps 2 and 5 (the ring's rows, the norm
    // weight and the taps read ahead where `ahead`), the gates' inputs into the registers of the last warp,
    // which computes the gates during step 2, off the conv's path; then the state -> sm.state, its own copy
    // group, which lands while the conv and l2norm run (asked for first, the state's 64 KB went ahead of
    // everything the conv waits for: tile_phases --gdn, D55). The taps by async copies too: loaded into
    // registers, their conversion held the copies behind them for a round trip, and the gates computed before
    // the conv held every warp at its barrier (Nsight Compute, D60).
    const int ch = gdn_channel(tid, dk, kh, key_dim, v_first);
    const bool conv_thread = tid < width;
    if (!ahead) stage_raw(ring, first - K + 1, R, ring_rows, 0, width, dk, kh, key_dim, v_first, sm);
    stage_raw(mixed, 0, 0, m, ring_rows, width, dk, kh, key_dim, v_first, sm);
    stage_rows(mixed.at<bf16>(0, z_first), mixed.cols, &sm.z[0][0], GDN_MAX_COLS, m, dv);
    if (!ahead) {
        const Weight norm_weight = ctx.weight(w.p(9));
        stage_bytes(norm_weight.base, sm.norm_weight, (dv * weight_bytes(norm_weight) + 15) / 16 * 16);
        stage_taps(taps, K, dk, kh, key_dim, v_first, dv, sm);
    }
    copies_commit();
    // The gates' inputs: b and a of pending rows from the gate ring, of the pass's rows from the projection.
    const int gate_row = tid - (TILE_THREADS - 32);  // the last warp's lanes, a row each
    float b = 0.0f, a = 0.0f, neg_a = 0.0f, bias = 0.0f;
    if (gate_row >= 0 && gate_row < count) {
        const int p = first + gate_row;
        b = p < pos ? bf(*gates.at<bf16>(p % R, j)) : bf(*mixed.at<bf16>(p - pos, b_col));
        a = p < pos ? bf(*gates.at<bf16>(p % R, hv + j)) : bf(*mixed.at<bf16>(p - pos, b_col + hv));
        neg_a = a_log.value(j), bias = dt_bias.value(j);
    }
    if (active && !ahead) stage_state(columns, sm, warp, lane);
    copies_commit();  // the newest group (empty when ahead): waited for before the rows
    tile_stamp(8);  // every read issued
    copies_wait(1);  // every group but the state's
    __syncthreads();
    tile_stamp(9);  // every read but the state's landed

    // 2. Causal conv + silu, rows first .. pos + m - 1: out[r] = bf16(silu(bf16(sum_i raw[r + i] *
    // taps[i]))), taps added in order; a thread per channel. The threads past the channels take silu of the
    // gated norm's gate rows z, off step 5's path, and the last warp the gates: beta = bf16(sigmoid(b)),
    // g = -exp(A_log) softplus(a + dt_bias); the state decays by exp(g).
    if (conv_thread) {
        float tap[GDN_MAX_KERNEL];
#pragma unroll
        for (int i = 0; i < GDN_MAX_KERNEL; ++i) tap[i] = i < K ? gdn_tap(sm, taps.dtype, K, tid, i) : 0.0f;
        float* to = tid < dk ? &sm.q[0][tid] : tid < 2 * dk ? &sm.k[0][tid - dk] : nullptr;
        for (int r = 0; r < count; ++r) {
            float acc = mul_rn(bf(sm.conv.raw[r][tid]), tap[0]);
#pragma unroll
            for (int i = 1; i < GDN_MAX_KERNEL; ++i)
                if (i < K) acc = add_rn(acc, mul_rn(bf(sm.conv.raw[r + i][tid]), tap[i]));
            const float y = round_bf16(silu_ref(round_bf16(acc)));
            if (tid < 2 * dk) to[r * GDN_DK] = y;
            else sm.v[r][tid - 2 * dk] = to_bf16(y);
        }
        // The pass's raw inputs -> ring rows (pos + r) mod R (this tile read its ring rows above; other
        // tiles read only rows before pos, which the R-row rings keep apart). q/k channels by the key head's
        // first value head.
        if (tid >= 2 * dk || j % per_key == 0) {
            for (int r = 0, row = pos % R; r < m; ++r, row = row + 1 == R ? 0 : row + 1)
                *ring.at<bf16>(row, ch) = sm.conv.raw[ring_rows + r][tid];
        }
    } else if (gate_row < 0) {
        for (int c = tid - width; c < dv; c += TILE_THREADS - 32 - width)
            for (int r = 0; r < m; ++r) sm.silu_z[r][c] = silu_ref(bf(sm.z[r][c]));
    } else if (gate_row < count) {
        sm.beta[gate_row] = round_bf16(sigmoid_ref(b));
        const float g = mul_rn(-expf(neg_a), softplus_ref(add_rn(a, bias)));
        sm.decay[gate_row] = expf(g);
    }
    // A speculative pass's gates -> gate ring rows (pos + r) mod R.
    if (speculative && tid < m) {
        *gates.at<bf16>((pos + tid) % R, j) = *mixed.at<bf16>(tid, b_col);
        *gates.at<bf16>((pos + tid) % R, hv + j) = *mixed.at<bf16>(tid, b_col + hv);
    }
    __syncthreads();
    // 3. l2norm of q and k per row, a warp per (row, q or k), lane l summing values l, l + 32, ...; q /
    // sqrt(dk).
    for (int pair = warp; pair < 2 * count; pair += TILE_WARPS) {
        float* x = pair < count ? sm.q[pair] : sm.k[pair - count];
        float ss = 0.0f;
#pragma unroll
        for (int i = lane; i < GDN_DK; i += 32) ss = add_rn(ss, mul_rn(x[i], x[i]));
        const float r = rsqrt_ref(add_rn(warp_sum(ss), 1e-6f));
        const float root = sqrt_rn(static_cast<float>(dk));
#pragma unroll
        for (int i = lane; i < GDN_DK; i += 32) x[i] = pair < count ? div_rn(mul_rn(x[i], r), root) : mul_rn(x[i], r);
    }
    __syncthreads();
    tile_stamp(1);  // conv and l2norm done

    // 4. The recurrence, row by row, state in registers, each warp on its own columns: no block barrier
    // until the outputs are all in. The state stored is the one after the pass's rows, or after the pending
    // rows in a speculative pass.
    if (active) {
        float s[GDN_LANE_COLS][GDN_LANE_DK];
        copies_wait(0);  // the warp's state, copied by its own lanes
        __syncwarp();
        load_state(s, sm, warp, g, seg);
        for (int r = 0; r < count; ++r) {
            const float decay = sm.decay[r];
            const float4 k0 = *reinterpret_cast<const float4*>(&sm.k[r][GDN_LANE_DK * seg]);
            const float4 k1 = *reinterpret_cast<const float4*>(&sm.k[r][GDN_LANE_DK * seg + 4]);
            const float k[GDN_LANE_DK] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
            float part[GDN_LANE_COLS];
#pragma unroll
            for (int c = 0; c < GDN_LANE_COLS; ++c) {
                float mem = 0.0f;
#pragma unroll
                for (int e = 0; e < GDN_LANE_DK; ++e) {
                    s[c][e] = mul_rn(s[c][e], decay);
                    mem = fma_rn(s[c][e], k[e], mem);
                }
                part[c] = mem;
            }
            // delta of the lane's summed column, then every lane its four columns' deltas
            const float mine = mul_rn(sub_rn(bf(sm.v[r][sum_column]), gdn_columns_sum(part, seg)), sm.beta[r]);
            const float4 q0 = *reinterpret_cast<const float4*>(&sm.q[r][GDN_LANE_DK * seg]);
            const float4 q1 = *reinterpret_cast<const float4*>(&sm.q[r][GDN_LANE_DK * seg + 4]);
            const float qv[GDN_LANE_DK] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
            for (int c = 0; c < GDN_LANE_COLS; ++c) {
                const float delta = __shfl_sync(0xffffffffu, mine, 16 * g + 8 * (c >> 1) + 4 * (c & 1) + (seg & 3));
                float o = 0.0f;
#pragma unroll
                for (int e = 0; e < GDN_LANE_DK; ++e) {
                    s[c][e] = fma_rn(k[e], delta, s[c][e]);
                    o = fma_rn(s[c][e], qv[e], o);
                }
                part[c] = o;
            }
            if (r < pending) {  // a kept row of the last speculative pass: no output
                if (r == pending - 1 && speculative) {
                    state_to_shared(s, sm, warp, g, seg);
                    __syncwarp();
                    state_to_global(columns, sm, warp, lane);
                }
                continue;
            }
            const float o = gdn_columns_sum(part, seg);
            if ((seg & 3) == 0) sm.o[r - pending][sum_column] = to_bf16(o);
        }
        if (!speculative) state_to_shared(s, sm, warp, g, seg);  // to global memory after the norm (step 6)
    }
    __syncthreads();
    tile_stamp(3);  // the rows done, their state in shared memory
    // 5. The gated RMSNorm of each row's head, a warp per row: bf16(bf16(w * bf16(o * rsqrt(mean(o^2) +
    // eps))) * silu(z)), lane l holding values l, l + 32, ... (the order the GEMV prologue used). Its word
    // fields are read here, not held in registers across the recurrence.
    if (warp < m) {
        const Buffer out = ctx.buffer(w.buf_out());
        const int norm_dtype = ctx.weight(w.p(9)).dtype;
        const float eps = w.pf(10);
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
            const float t = round_bf16(mul_rn(staged_value(sm.norm_weight, norm_dtype, d), xn));
            *out.at<bf16>(warp, j * dv + d) = to_bf16(mul_rn(t, sm.silu_z[warp][d]));
        }
    }
    // 6. The state to global memory: 64 KB, which the SM takes ~2 us to send (experiments/gdn_floor.py), so
    // the norm's warps send theirs after the norm and the others meanwhile.
    if (active && !speculative) state_to_global(columns, sm, warp, lane);
    tile_stamp(4, true);
}

}  // namespace mk
