// The prompt programs' small words and prepare words (docs/ISA.md "Prompt programs"): PROMPT_EMBED,
// PROMPT_NORM, PROMPT_ADVANCE, PROMPT_QKV, PROMPT_CONV (ATTN_CAUSAL: prompt_attention.cuh), and
// NORM_PREPARE / PREPARE / MTP_PREPARE / GATED_PREPARE, which write a prompt GEMM's operand slabs
// (isa/operand_layout.py). Run by the discrete build only (the megakernel refuses prompt programs:
// persistent.py). Every tile reads the chunk's position and rows r from its control lane and computes the rows
// below r; a prepare tile zeroes its rows past r.
#pragma once

#include "gdn.cuh"  // GDN_MAX_KERNEL
#include "gemv_tile.cuh"
#include "small_ops.cuh"

namespace mk {

constexpr int PROMPT_TOKEN_TILE = 128;                                 // plan.PROMPT_TOKEN_TILE
constexpr int SLAB_X_BYTES = PROMPT_TOKEN_TILE * K_BLOCK * 2;          // isa/operand_layout.py X_BYTES
constexpr int SLAB_BYTES = SLAB_X_BYTES + PROMPT_TOKEN_TILE * 4;       // isa/operand_layout.py SLAB_BYTES
constexpr int SLAB_GROUP_BYTES = MAX_ROWS * K_BLOCK * 2;               // isa/operand_layout.py GROUP_BYTES
constexpr int PREPARE_MAX_BLOCKS = 8;                                  // plan.PROMPT_PREPARE_BLOCKS
typedef unsigned short u16;

__device__ __forceinline__ int chunk_rows_now(const Ctx& ctx, const Word& w) {
    return ctx.control()[w.ctrl_base() + CTRL_ROWS];
}

// The embedding rows of prompt_tokens[0, 0..r).
__device__ inline void prompt_embed_tile(const Ctx& ctx, const Word& w, int tile) {
    embed_rows(ctx, w, tile, ctx.buffer(w.buf_in()).at<int>(0, 0), chunk_rows_now(ctx, w));
}

// position += r (in the word's lane).
__device__ inline void prompt_advance_tile(const Ctx& ctx, const Word& w) {
    if (threadIdx.x == 0) {
        int* c = ctx.control() + w.ctrl_base();
        c[CTRL_POSITION] += c[CTRL_ROWS];
    }
}

// Rows [t tile_rows, ...) below r: RMSNorm1p (weight p0, eps p1) of buf_in's rows into buf_out's, MAX_ROWS at a
// time in norm_rows' order (the GEMV prologue's). smem: norm_rows' staging area.
__device__ inline void prompt_norm_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    __shared__ float scratch[(TILE_WARPS + 1) * MAX_ROWS];
    const Buffer in = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_out());
    const int r = chunk_rows_now(ctx, w), n = w.n();
    const int r1 = min(r, (tile + 1) * w.tile_rows());
    for (int r0 = tile * w.tile_rows(); r0 < r1; r0 += MAX_ROWS)
        norm_rows([&](int i) { return in.at<bf16>(r0 + i, 0); }, [&](int i) { return out.at<bf16>(r0 + i, 0); },
                  min(MAX_ROWS, r1 - r0), n, ctx.weight(w.p(0)), w.pf(1), 0, n, scratch, smem);
}

// PROMPT_QKV: head h = tile / spans over the chunk's rows [s tile_rows, ...) below r, s = tile mod spans (compiler/
// tiling.py qkv_tile): query head h (h < heads): [query | gate] columns of each row -> q_norm + RoPE -> buf_out,
// gate -> buf_aux0; KV head h - heads: k -> k_norm + RoPE -> K cache rows pos.., v -> V cache. The arithmetic of
// the decode GEMV's qkv epilogue (gemv_tile.cuh qkv_epilogue: a row's sum of squares as its 32-wide pieces' warp
// sums added in order, bf16 cos and sin of fp32 angles, each RoPE product and the sum rounded), a warp a row.
constexpr int QKV_MAX_HEAD_DIM = MAX_TILE_ROWS;  // the decode qkv epilogue's bound too: a head in one row group
__device__ inline void prompt_qkv_tile(const Ctx& ctx, const Word& w, int tile) {
    __shared__ float row_buf[TILE_WARPS][QKV_MAX_HEAD_DIM];
    __shared__ float rope_buf[TILE_WARPS][QKV_MAX_HEAD_DIM];  // cos [0, half), sin [half, rot)
    const int heads = w.p(3), kv_heads = w.p(4), hd = w.p(5), rot = w.p(6), half = rot / 2;
    const float eps = w.pf(0), theta = w.pf(7);
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, pieces = hd / 32;
    const int spans = (w.chunk_rows() + w.tile_rows() - 1) / w.tile_rows(), head = tile / spans;
    const int row0 = (tile % spans) * w.tile_rows(), row1 = min(r, row0 + w.tile_rows());
    const Buffer in = ctx.buffer(w.buf_in());
    const bool query = head < heads;
    const int kv = head - heads, q_cols = 2 * heads * hd, kv_cols = kv_heads * hd;
    const int src_col = query ? 2 * head * hd : q_cols + kv * hd;
    const Weight nw = ctx.weight(query ? w.p(1) : w.p(2));
    float* y = row_buf[warp];
    float* rope = rope_buf[warp];
    for (int row = row0 + warp; row < row1; row += TILE_WARPS) {
        const bf16* src = in.at<bf16>(row, src_col);
        if (query) {  // the gate half as it is
            bf16* gate = ctx.buffer(w.buf_aux0()).at<bf16>(row, head * hd);
            for (int i = lane; i < hd; i += 32) gate[i] = src[hd + i];
        } else {  // v into the cache as it is
            const bf16* v = in.at<bf16>(row, q_cols + kv_cols + kv * hd);
            bf16* dst = ctx.buffer(w.buf_aux2()).at<bf16>(pos + row, kv * hd);
            for (int i = lane; i < hd; i += 32) dst[i] = v[i];
        }
        float ss = 0.0f;
        for (int p = 0; p < pieces; ++p) {
            const float v = bf(src[32 * p + lane]);
            ss = add_rn(ss, warp_sum(mul_rn(v, v)));
        }
        const float factor = rsqrt_ref(add_rn(div_rn(ss, static_cast<float>(hd)), eps));
        for (int i = lane; i < hd; i += 32) y[i] = norm_1p(bf(src[i]), factor, nw.value(i));
        for (int j = lane; j < half; j += 32) rope_cos_sin(pos + row, j, rot, theta, rope[j], rope[half + j]);
        __syncwarp();
        bf16* dst = query ? ctx.buffer(w.buf_out()).at<bf16>(row, head * hd)
                          : ctx.buffer(w.buf_aux1()).at<bf16>(pos + row, kv * hd);
        for (int i = lane; i < hd; i += 32) {
            float out = y[i];
            if (i < rot) {
                const float c = rope[i % half], sn = rope[half + i % half];
                const float rotated = i < half ? -y[i + half] : y[i - half];
                out = round_bf16(add_rn(round_bf16(mul_rn(y[i], c)), round_bf16(mul_rn(rotated, sn))));
            }
            dst[i] = to_bf16(out);
        }
        __syncwarp();  // the row's buffers free for the warp's next row
    }
}

// Eight bf16 from p as one uint4: a 16-byte load where p allows it, else four 4-byte loads (rows of an odd number
// of 4-element groups, as tiny's in_proj rows of 2,060 columns, start 8 bytes off every other row), else by
// element.
__device__ __forceinline__ uint4 load_bf16x8(const bf16* p) {
    const size_t at = reinterpret_cast<size_t>(p);
    if ((at & 15) == 0) return *reinterpret_cast<const uint4*>(p);
    if ((at & 3) == 0) {
        const u32* q = reinterpret_cast<const u32*>(p);
        return make_uint4(q[0], q[1], q[2], q[3]);
    }
    const u16* h = reinterpret_cast<const u16*>(p);
    return make_uint4(h[0] | static_cast<u32>(h[1]) << 16, h[2] | static_cast<u32>(h[3]) << 16,
                      h[4] | static_cast<u32>(h[5]) << 16, h[6] | static_cast<u32>(h[7]) << 16);
}

// PROMPT_CONV: the tile's channels (tile_rows of them) over rows 0..r-1, each output from its own K inputs: out =
// bf16(silu(bf16(sum_i raw[pos + row - K + 1 + i] * tap[i]))), taps added in order (the products rounded apart: the
// reference's and GDN_CORE's arithmetic), positions before the chunk from the conv ring (rows position mod ring);
// then, every read done, the chunk's last min(r, K - 1) raw rows into the ring. The 512 threads: CONV_VEC channels
// each (one 16-byte load and store a row) for one of 512 / (tile_rows / CONV_VEC) contiguous row spans, a window of
// the last K inputs in registers, CONV_BATCH rows' loads issued before their outputs (the stores might alias them
// otherwise, and a load's latency a row made the tile latency-bound: D71). 80 channels a tile are 128 tiles for the
// 27B, one wave (D73: 64 a tile, a channel a thread, were 160 tiles, 1.2 waves, 2-byte loads). The conv's channels
// are a multiple of 32 (key and value head dims: config.py), so a thread's 8 always exist together.
constexpr int CONV_VEC = 8;
constexpr int CONV_BATCH = 4;
__device__ inline void prompt_conv_tile(const Ctx& ctx, const Word& w, int tile) {
    const int K = w.p(1), R = w.p(2), groups = w.tile_rows() / CONV_VEC, lanes = TILE_THREADS / groups;
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int c = tile * w.tile_rows() + CONV_VEC * (threadIdx.x % groups), lane = threadIdx.x / groups;
    const bool mine = lane < lanes && c < w.n();
    const Buffer mixed = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_out()), ring = ctx.buffer(w.buf_aux1());
    if (mine) {
        const Weight taps = ctx.weight(w.p(0));
        float tap[CONV_VEC][GDN_MAX_KERNEL];
#pragma unroll
        for (int v = 0; v < CONV_VEC; ++v)
#pragma unroll
            for (int i = 0; i < GDN_MAX_KERNEL; ++i)
                tap[v][i] = i < K ? taps.value(static_cast<size_t>(c + v) * K + i) : 0.0f;
        // the inputs of the chunk's row q; before the chunk, the ring's row of position pos + q
        const auto input = [&](int q) {
            return q >= 0 ? load_bf16x8(mixed.at<bf16>(q, c))
                          : *reinterpret_cast<const uint4*>(ring.at<bf16>((((pos + q) % R) + R) % R, c));
        };
        const int span = (r + lanes - 1) / lanes, row0 = lane * span, row1 = min(r, row0 + span);
        float win[GDN_MAX_KERNEL][CONV_VEC];  // win[i]: the inputs of tap i for the next row (i < K - 1 filled ahead)
#pragma unroll
        for (int i = 0; i < GDN_MAX_KERNEL; ++i) {
            float f[CONV_VEC] = {};
            if (i < K - 1 && row0 < row1) unpack_bf16x8(input(row0 - K + 1 + i), f);
#pragma unroll
            for (int v = 0; v < CONV_VEC; ++v) win[i][v] = f[v];
        }
        for (int row = row0; row < row1; row += CONV_BATCH) {
            uint4 x[CONV_BATCH];
#pragma unroll
            for (int b = 0; b < CONV_BATCH; ++b)
                x[b] = row + b < row1 ? load_bf16x8(mixed.at<bf16>(row + b, c)) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int b = 0; b < CONV_BATCH; ++b) {
                if (row + b >= row1) break;
                float f[CONV_VEC], y[CONV_VEC];
                unpack_bf16x8(x[b], f);
#pragma unroll
                for (int i = 0; i < GDN_MAX_KERNEL; ++i)
                    if (i == K - 1)
#pragma unroll
                        for (int v = 0; v < CONV_VEC; ++v) win[i][v] = f[v];
#pragma unroll
                for (int v = 0; v < CONV_VEC; ++v) {
                    float acc = 0.0f;
#pragma unroll
                    for (int i = 0; i < GDN_MAX_KERNEL; ++i) {
                        if (i >= K) continue;
                        acc = i == 0 ? mul_rn(win[0][v], tap[v][0]) : add_rn(acc, mul_rn(win[i][v], tap[v][i]));
                    }
                    y[v] = round_bf16(silu_ref(round_bf16(acc)));
                }
                *reinterpret_cast<uint4*>(out.at<bf16>(row + b, c)) = pack_bf16x8(y);
#pragma unroll
                for (int i = 0; i + 1 < GDN_MAX_KERNEL; ++i)
#pragma unroll
                    for (int v = 0; v < CONV_VEC; ++v) win[i][v] = win[i + 1][v];
            }
        }
    }
    __syncthreads();  // the ring's rows read before the chunk's last rows overwrite them
    if (mine && lane == 0)
        for (int row = max(0, r - (K - 1)); row < r; ++row)
            *reinterpret_cast<uint4*>(ring.at<bf16>((pos + row) % R, c)) = load_bf16x8(mixed.at<bf16>(row, c));
}

// Shared memory of MTP_PREPARE's tile (the staged prepare tile; the others stream in registers): norm_rows'
// staging area (MAX_ROWS rows of n / 2 columns, then the norm weight's columns), the group's bf16 rows and their
// f16 operand (MAX_ROWS x the tile's k-blocks, natural k order) and P per (row, k-block) (f16_operand's
// MAX_SLICE_BLOCKS stride); cuda_build.prompt_word_smem sizes the launch from the same terms.
__host__ __device__ constexpr int prepare_stage_bytes(int n) {
    return MAX_ROWS * (n / 2) * 2 + PREPARE_MAX_BLOCKS * K_BLOCK * 4;
}

// A row of `rows` and `x16` is padded by PREPARE_PAD elements (16 bytes): the slab writer's lanes read 8 rows x 4
// (step, half) pieces at 4-byte steps, which the padding puts on 32 different banks (unpadded, the rows' 2 KB
// multiples put every lane on one bank: D71).
constexpr int PREPARE_PAD = 8;
struct PrepareSmem {
    u8* stage;
    bf16* rows;
    bf16* x16;
    signed char* p;
    int stride;  // elements of a row of `rows` and `x16`
    __device__ PrepareSmem(u8* smem, int stage_bytes, int blocks)
        : stage(smem),
          rows(reinterpret_cast<bf16*>(smem + (stage_bytes + 127) / 128 * 128)),
          x16(rows + MAX_ROWS * (blocks * K_BLOCK + PREPARE_PAD)),
          p(reinterpret_cast<signed char*>(x16 + MAX_ROWS * (blocks * K_BLOCK + PREPARE_PAD))),
          stride(blocks * K_BLOCK + PREPARE_PAD) {}
};

// The in-block k of slab slot j of mma step s, k half c (isa/operand_layout.py step_order: the decode GEMV's
// unit order).
__device__ __forceinline__ int slab_k(int s, int c, int j) {
    return 32 * (s >> 1) + 8 * (j >> 1) + 4 * (s & 1) + 2 * c + (j & 1);
}

// Rows `group` x 8 .. + 7 of token tile t (m of them real, the rest zero) of k-blocks [b0, b0 + blocks) into the
// slabs at `slabs`: each (step, k half, token) a 16-byte chunk of 8 slots, the pair of 16-bit values at in-block
// k, k + 1 (k even) as `value_of(i, k)`; then the unscales (`unscale_of(i, b)` for row i < m, 0 past m).
template <class Value, class Unscale>
__device__ inline void write_slab_rows(u8* slabs, int t, int group, int b0, int blocks, int slab_blocks, int m,
                                       Value value_of, Unscale unscale_of) {
    const int chunks = MAX_ROWS * 16 * blocks;  // (row, step x half, k-block): a warp 8 rows x 4 (step, half)
    for (int q = threadIdx.x; q < chunks; q += TILE_THREADS) {
        const int i = q % MAX_ROWS, sc = (q / MAX_ROWS) % 16, b = q / (MAX_ROWS * 16);
        const int s = sc >> 1, c = sc & 1;
        u32 packed[4] = {0u, 0u, 0u, 0u};
        if (i < m) {
#pragma unroll
            for (int j = 0; j < 8; j += 2)  // slots j, j + 1 hold consecutive k
                packed[j / 2] = value_of(i, b * K_BLOCK + slab_k(s, c, j));
        }
        u8* slab = slabs + (static_cast<size_t>(t) * slab_blocks + b0 + b) * SLAB_BYTES;
        // [8-token group][step][k half][token][slot]: 2 KB a group, 256 bytes a step, 128 a half, 16 a token
        *reinterpret_cast<uint4*>(slab + group * SLAB_GROUP_BYTES + s * 256 + c * 128 + i * 16) =
            make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
    for (int q = threadIdx.x; q < MAX_ROWS * blocks; q += TILE_THREADS) {
        const int i = q % MAX_ROWS, b = q / MAX_ROWS;
        u8* slab = slabs + (static_cast<size_t>(t) * slab_blocks + b0 + b) * SLAB_BYTES;
        reinterpret_cast<float*>(slab + SLAB_X_BYTES)[group * MAX_ROWS + i] = i < m ? unscale_of(i, b) : 0.0f;
    }
}

// A uint4's 32-bit word w.
__device__ __forceinline__ u32 word_of(const uint4& v, int w) {
    return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

// Lane (row i, quarter u) of a streaming prepare warp: its pieces x[q] (values 32 u + 8 q .. + 7 of a k-block) are
// the slab chunks of steps 2 u and 2 u + 1 (slab_k: chunk (2 u + h, c) holds word 2 h + c of each piece) -> the
// slab of that k-block, 8-token group `group`: the 8 lanes of one u write a whole 128-byte line a store.
__device__ __forceinline__ void store_slab_chunks(u8* slab, int group, int i, int u, const uint4 (&x)[4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < 2; ++c)
            *reinterpret_cast<uint4*>(slab + group * SLAB_GROUP_BYTES + (2 * u + h) * 256 + c * 128 + i * 16) =
                make_uint4(word_of(x[0], 2 * h + c), word_of(x[1], 2 * h + c), word_of(x[2], 2 * h + c),
                           word_of(x[3], 2 * h + c));
}

// A streaming prepare warp's k-block b of its 8-token group, lane (row i, quarter u) holding the bf16 values v (zero
// for a row past the chunk, `live` false): the block's P (f16_operand's rule, a 4-lane maximum: the same P as its
// 16-lane one), the f16 values and the unscales into the f16 slabs, the values as they are (unscales 1) into the
// bf16 slabs where the GEMM has bf16 segments. slabs: the token tile's first slab.
__device__ __forceinline__ void store_operand_task(u8* f16_slabs, u8* bf16_slabs, int b, int group, int i, int u,
                                                   bool live, const uint4 (&v)[4]) {
    u32 top = max(max(piece_top(v[0]), piece_top(v[1])), max(piece_top(v[2]), piece_top(v[3])));
    top = max(top, __shfl_xor_sync(0xFFFFFFFFu, top, 1));
    top = max(top, __shfl_xor_sync(0xFFFFFFFFu, top, 2));
    const int P = p_of_top(top);
    const float two_p = two_to(P);
    const uint4 x[4] = {f16_piece(v[0], two_p), f16_piece(v[1], two_p), f16_piece(v[2], two_p), f16_piece(v[3], two_p)};
    u8* slab = f16_slabs + static_cast<size_t>(b) * SLAB_BYTES;
    store_slab_chunks(slab, group, i, u, x);
    if (u == 0) reinterpret_cast<float*>(slab + SLAB_X_BYTES)[group * MAX_ROWS + i] = live ? two_to(-P) : 0.0f;
    if (bf16_slabs != nullptr) {
        u8* raw = bf16_slabs + static_cast<size_t>(b) * SLAB_BYTES;
        store_slab_chunks(raw, group, i, u, v);
        if (u == 0) reinterpret_cast<float*>(raw + SLAB_X_BYTES)[group * MAX_ROWS + i] = live ? 1.0f : 0.0f;
    }
}

// PREPARE and NORM_PREPARE (D73): a tile is one 8-token group (rows row0 .. row0 + m - 1 real, the rest zero) over
// all the operand's k-blocks, in registers, no shared memory. Warp task (group, k-block b): lane L holds row
// i = L / 4's values 32 u .. 32 u + 31 of the block (u = L mod 4), which are exactly its slab chunks of steps 2 u,
// 2 u + 1 (store_slab_chunks), so a lane loads 64 bytes and stores 64, and the block's P is a 4-lane maximum (the
// same P as f16_operand's 16-lane one: a maximum). NORM_PREPARE first finds its rows' factors in norm_rows' order
// (row_factors) and normalises as norm_rows does: the same bits as the staged path, which took 48-84 us a word
// on 8 x 1,024-column tiles (four rounds of latency-bound tiles; D71, D73). TASKS blocks' loads go out together.
constexpr int PREPARE_TASKS = 2;
__device__ inline void stream_prepare_tile(const Ctx& ctx, const Word& w, int t, int group, int row0, int m) {
    __shared__ float scratch[(TILE_WARPS + 1) * MAX_ROWS];
    const int n = w.n(), blocks = n / K_BLOCK, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int i = lane >> 2, u = lane & 3;
    const bool norm = w.opcode() == OP_NORM_PREPARE, live = i < m;
    const Buffer in = ctx.buffer(w.buf_in());
    u8* f16_slabs = ctx.buffer(w.buf_out()).base + static_cast<size_t>(t) * blocks * SLAB_BYTES;
    u8* bf16_slabs = w.buf_aux1() == NO_BUFFER
                         ? nullptr
                         : ctx.buffer(w.buf_aux1()).base + static_cast<size_t>(t) * blocks * SLAB_BYTES;
    float rf = 0.0f;
    if (norm && m > 0) {
        const float* factor = row_factors(
            [&](int r, int c) { return reinterpret_cast<const uint4*>(in.at<bf16>(row0 + r, 0))[c]; }, m, n, w.pf(1),
            scratch);
        if (live) rf = factor[i];
    }
    const Weight nw = norm ? ctx.weight(w.p(0)) : Weight{};
    const uint4* src = reinterpret_cast<const uint4*>(in.at<bf16>(row0 + (live ? i : 0), 32 * u));
    for (int b0 = warp; b0 < blocks; b0 += PREPARE_TASKS * TILE_WARPS) {
        uint4 v[PREPARE_TASKS][4];
#pragma unroll
        for (int a = 0; a < PREPARE_TASKS; ++a)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int b = b0 + a * TILE_WARPS;
                v[a][q] = live && b < blocks ? src[b * (K_BLOCK / 8) + q] : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
        for (int a = 0; a < PREPARE_TASKS; ++a) {
            const int b = b0 + a * TILE_WARPS;
            if (b >= blocks) break;  // uniform over the warp
            if (norm && live) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    float wt[8];
                    weight8(nw.base, nw.dtype, b * K_BLOCK + 32 * u + 8 * q, wt);
                    v[a][q] = norm_piece(v[a][q], rf, wt);
                }
            }
            store_operand_task(f16_slabs, bf16_slabs, b, group, i, u, live, v[a]);
        }
    }
}

// GATED_PREPARE streamed (D73; value heads of K_BLOCK columns, the compiler's rule): a tile is one 8-token group
// over all value heads, warp task (group, head b) with stream_prepare_tile's lanes: lane (i, u) holds o's values
// 32 u .. 32 u + 31 of row i's head b and the same columns of its gate row z. The head's sum of squares keeps
// GDN_CORE's order (gdn.cuh step 5: warp lane l sums o[l], o[l + 32], .. in turn, then the warp's xor butterfly
// over l, 16 first): lane (i, u) sums for the virtual lanes l = u, u + 4, .., u + 28 (o re-read by element, an L1
// hit), runs the butterfly's levels 16, 8 and 4 among them (l keeps l mod 4) and levels 2 and 1 by shuffles
// across its row's four lanes. Then per value GDN_CORE's bf16(bf16(w bf16(o rsqrt(mean(o^2) + eps))) silu(z)),
// weight p0, eps p1, z from buf_aux0 at column p3 + the o column. (The staged tile it replaces took a (row, head) a
// warp over 1,024-column slices.)
__device__ inline void stream_gated_tile(const Ctx& ctx, const Word& w, int t, int group, int row0, int m) {
    const int n = w.n(), heads = n / K_BLOCK, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int i = lane >> 2, u = lane & 3, z_col = w.p(3);
    const bool live = i < m;
    const Buffer o_rows = ctx.buffer(w.buf_in()), gates = ctx.buffer(w.buf_aux0());
    const Weight nw = ctx.weight(w.p(0));
    const float eps = w.pf(1);
    u8* f16_slabs = ctx.buffer(w.buf_out()).base + static_cast<size_t>(t) * heads * SLAB_BYTES;
    u8* bf16_slabs = w.buf_aux1() == NO_BUFFER
                         ? nullptr
                         : ctx.buffer(w.buf_aux1()).base + static_cast<size_t>(t) * heads * SLAB_BYTES;
    const int row = row0 + (live ? i : 0);
    float wt[32];  // the norm weight's columns 32 u .. 32 u + 31 (every head's)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        float f[8];
        weight8(nw.base, nw.dtype, 32 * u + 8 * q, f);
#pragma unroll
        for (int e = 0; e < 8; ++e) wt[8 * q + e] = f[e];
    }
    for (int b = warp; b < heads; b += TILE_WARPS) {
        uint4 v[4] = {}, zv[4] = {};
        const bf16* o = o_rows.at<bf16>(row, b * K_BLOCK);
        if (live) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                v[q] = reinterpret_cast<const uint4*>(o + 32 * u)[q];
                zv[q] = load_bf16x8(gates.at<bf16>(row, z_col + b * K_BLOCK + 32 * u + 8 * q));  // in_proj's rows
            }
        }
        float part[8];  // virtual lane u + 4 j's sum of squares, o[l], o[l + 32], .. added in turn
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            part[j] = 0.0f;
            if (live)
#pragma unroll
                for (int c = 0; c < K_BLOCK; c += 32) {
                    const float x = bf(o[u + 4 * j + c]);
                    part[j] = add_rn(part[j], mul_rn(x, x));
                }
        }
#pragma unroll
        for (int half = 4; half > 0; half >>= 1)  // levels 16, 8, 4: l pairs with l + 16, l + 8, l + 4
#pragma unroll
            for (int j = 0; j < half; ++j) part[j] = add_rn(part[j], part[j + half]);
        float ss = add_rn(part[0], __shfl_xor_sync(0xFFFFFFFFu, part[0], 2));  // level 2
        ss = add_rn(ss, __shfl_xor_sync(0xFFFFFFFFu, ss, 1));                  // level 1
        if (live) {
            const float rn = rsqrt_ref(add_rn(div_rn(ss, static_cast<float>(K_BLOCK)), eps));
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float f[8], z[8], y[8];
                unpack_bf16x8(v[q], f);
                unpack_bf16x8(zv[q], z);
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    y[e] = mul_rn(round_bf16(mul_rn(wt[8 * q + e], round_bf16(mul_rn(f[e], rn)))), silu_ref(z[e]));
                v[q] = pack_bf16x8(y);
            }
        }
        store_operand_task(f16_slabs, bf16_slabs, b, group, i, u, live, v);
    }
}

// Rows [8 q, 8 q + 8) of the chunk (one 8-token group of token tile t = q / 16), k-blocks [b0, b1) of the operand
// (prepare_tile in compiler/tiling.py). PREPARE, NORM_PREPARE and GATED_PREPARE stream whole rows in registers
// (stream_prepare_tile, stream_gated_tile: b0 = 0, all blocks); MTP_PREPARE stages its slice: the rows normalised
// whole by norm_rows -> the f16 operand (f16_operand's rule, per row and k-block) -> the group's words of the f16
// slabs (buf_out); the bf16 rows -> the bf16 slabs (buf_aux1, unscales 1) when the GEMM has bf16 weight segments.
// Rows past r are zero in both; a tile of a token tile past the chunk writes nothing.
__device__ inline void prepare_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    __shared__ float scratch[(TILE_WARPS + 1) * MAX_ROWS];
    const int op = w.opcode(), n = w.n(), slab_blocks = n / K_BLOCK, per_tile = w.tile_rows();
    const int groups_k = (slab_blocks + per_tile - 1) / per_tile, row_tile = tile / groups_k;
    const int t = row_tile / (PROMPT_TOKEN_TILE / MAX_ROWS), group = row_tile % (PROMPT_TOKEN_TILE / MAX_ROWS);
    const int b0 = (tile % groups_k) * per_tile, blocks = min(per_tile, slab_blocks - b0);
    const int c0 = b0 * K_BLOCK, c1 = c0 + blocks * K_BLOCK, r = chunk_rows_now(ctx, w);
    if (t * PROMPT_TOKEN_TILE >= r) return;  // a tile past the chunk: the GEMM reads none of it
    const int row0 = row_tile * MAX_ROWS, m = max(0, min(MAX_ROWS, r - row0));
    if (op == OP_PREPARE || op == OP_NORM_PREPARE) return stream_prepare_tile(ctx, w, t, group, row0, m);
    if (op == OP_GATED_PREPARE) return stream_gated_tile(ctx, w, t, group, row0, m);
    // MTP_PREPARE: [RMSNorm(embed(token)) | RMSNorm(hidden)], the embedding half first
    u8* f16_slabs = ctx.buffer(w.buf_out()).base;
    u8* bf16_slabs = w.buf_aux1() == NO_BUFFER ? nullptr : ctx.buffer(w.buf_aux1()).base;
    const PrepareSmem sm(smem, prepare_stage_bytes(n), blocks);
    if (m > 0) {
        const Weight embed = ctx.weight(w.p(0));
        const int h = n / 2;
        const int* tokens = ctx.buffer(w.buf_aux0()).at<int>(0, 0);
        if (c0 < h)
            norm_rows([&](int i) { return reinterpret_cast<const bf16*>(embed.base) +
                                          static_cast<size_t>(tokens[row0 + i]) * h; },
                      [&](int i) { return sm.rows + i * sm.stride; }, m, h, ctx.weight(w.p(1)), w.pf(3), c0,
                      min(c1, h), scratch, sm.stage);
        if (c1 > h)
            norm_rows([&](int i) { return ctx.buffer(w.buf_in()).at<bf16>(row0 + i, 0); },
                      [&](int i) { return sm.rows + i * sm.stride + max(h - c0, 0); }, m, h,
                      ctx.weight(w.p(2)), w.pf(3), max(c0, h) - h, c1 - h, scratch, sm.stage);
        f16_operand(sm.rows, sm.stride, sm.x16, sm.stride, m, blocks, sm.p);
        __syncthreads();
    }
    const u16* x16 = reinterpret_cast<const u16*>(sm.x16);
    const u16* raw = reinterpret_cast<const u16*>(sm.rows);
    const int stride = sm.stride;
    const signed char* p = sm.p;
    // a pair of consecutive values (k even) as one 32-bit word
    write_slab_rows(f16_slabs, t, group, b0, blocks, slab_blocks, m,
                    [&](int i, int k) { return *reinterpret_cast<const u32*>(x16 + i * stride + k); },
                    [&](int i, int b) { return two_to(-p[i * MAX_SLICE_BLOCKS + b]); });
    if (bf16_slabs != nullptr)
        write_slab_rows(bf16_slabs, t, group, b0, blocks, slab_blocks, m,
                        [&](int i, int k) { return *reinterpret_cast<const u32*>(raw + i * stride + k); },
                        [](int, int) { return 1.0f; });
}

}  // namespace mk
