// The small ops' tiles (docs/ISA.md "Other ops"): EMBED, ARGMAX, HANDOFF.
#pragma once

#include "common.cuh"

namespace mk {

// Columns [t tile_rows, ...) of the embedding rows (weight p0) of m tokens into buf_out's rows 0..m-1 (EMBED and
// the prompt programs' PROMPT_EMBED). Token ids are checked by the host before they reach the device (and ARGMAX
// only chooses defined ids).
__device__ inline void embed_rows(const Ctx& ctx, const Word& w, int tile, const int* tokens, int m) {
    const Weight table = ctx.weight(w.p(0));
    const Buffer out = ctx.buffer(w.buf_out());
    const int width = w.tile_rows(), c0 = tile * width, c1 = min(w.n(), c0 + width);
    const bf16* rows = reinterpret_cast<const bf16*>(table.base);
    for (int i = threadIdx.x; i < m * (c1 - c0); i += TILE_THREADS) {
        const int row = i / (c1 - c0), c = c0 + i % (c1 - c0);
        *out.at<bf16>(row, c) = rows[static_cast<size_t>(tokens[row]) * table.cols + c];
    }
}

// EMBED: the lane's input tokens.
__device__ inline void embed_tile(const Ctx& ctx, const Word& w, int tile) {
    embed_rows(ctx, w, tile, ctx.control() + w.ctrl_base() + CTRL_TOKENS_IN, w.rows());
}

// Row `tile`: the best of the head's per-group candidates (largest value, lowest id; -1 if none).
// FLAG_WORKING_VOCAB: candidates are rows of the session's gathered head, mapped through its id table.
__device__ inline void argmax_tile(const Ctx& ctx, const Word& w, int tile) {
    __shared__ float best_v[TILE_WARPS];
    __shared__ int best_i[TILE_WARPS];
    const Buffer cand = ctx.buffer(w.buf_in());
    const int count = w.p(0), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int* row = cand.at<int>(tile, 0);
    float v = neg_inf();
    int id = -1;
    for (int g = threadIdx.x; g < count; g += TILE_THREADS) {
        const float cv = __int_as_float(row[2 * g]);
        const int cid = row[2 * g + 1];
        if (better(cv, cid, v, id)) v = cv, id = cid;
    }
    warp_best(v, id);
    if (lane == 0) best_v[warp] = v, best_i[warp] = id;
    __syncthreads();
    if (warp == 0) {
        v = lane < TILE_WARPS ? best_v[lane] : neg_inf();
        id = lane < TILE_WARPS ? best_i[lane] : -1;
        warp_best(v, id);
        if (lane == 0) {
            // a working-vocabulary head's row -> its token id (the table the host gathered the rows by)
            if ((w.flags() & FLAG_WORKING_VOCAB) && id >= 0) id = *ctx.buffer(w.buf_aux0()).at<int>(0, id);
            ctx.control()[w.ctrl_base() + CTRL_TOKENS_OUT + tile] = id;
        }
    }
}

// step += 1; position += M; the next pass's first input token is this pass's last chosen token.
__device__ inline void handoff_tile(const Ctx& ctx, const Word& w) {
    if (threadIdx.x != 0) return;
    int* c = ctx.control() + w.ctrl_base();
    c[CTRL_STEP] += 1;
    c[CTRL_POSITION] += w.rows();
    c[CTRL_TOKENS_IN] = c[CTRL_TOKENS_OUT + w.rows() - 1];
}

}  // namespace mk
