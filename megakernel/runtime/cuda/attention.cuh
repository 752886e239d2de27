// Split-KV attention decode tiles (docs/ISA.md "Other ops"): ATTN_SCORES and ATTN_PV run one tile per
// (KV head, partition) for the group of query heads sharing that KV head, ATTN_MERGE one tile per run of a
// query head's columns (plan.merge_tiles_per_head). Row m of the pass attends to keys [0, position + m] cut
// into P partitions by plan.partition_bounds, so a row's partitioning depends on its own length only.
//
// ATTN_SCORES and ATTN_PV read each key and value row of their partition once for all the pass's rows and
// the group's heads: the rows of the partition (the union of the pass rows' ranges) stream through a ring
// of ATTN_CHUNK-key slots in shared memory by async copies, and tensor-core mma computes the group x rows
// queries ("query qi = head h x m + row r", up to 64, in 16-row m-tiles) against them: q.k (m16n8k16,
// the keys as the 8 columns) and P.V (the keys as the k axis). Each (query, key) score is two chains of 8
// mma steps, over dims 0..127 and 128..255 (two warps), added; each (query, dim) P.V sum runs over 16-key
// k-steps aligned to absolute key positions, keys outside the query row's own range entering with P = 0 (an exact +0 term):
// a row's results never depend on the other rows present, so an M-row pass equals M one-row passes. The
// fp32 order differs from the NumPy reference's BLAS order (NUMERICS.md: attention sums are not pinned).
#pragma once

#include "common.cuh"
#include "gemv.cuh"

namespace mk {

constexpr int ATTN_MAX_GROUP = 8;    // query heads per KV head (Qwen3.5: 6)
constexpr int ATTN_HEAD_DIM = 256;   // the tiles are specialised to head_dim 256
constexpr int ATTN_CHUNK = 64;       // keys per ring slot
constexpr int ATTN_MAX_DEPTH = 6;    // ring slots (copies_wait covers up to 6)
constexpr int ATTN_MAX_QUERIES = ATTN_MAX_GROUP * MAX_ROWS;
constexpr int ATTN_M_TILES = ATTN_MAX_QUERIES / 16;
constexpr int ATTN_N_TILES = ATTN_CHUNK / 8;  // ATTN_SCORES: a chunk's 8-key n-tiles, two warps each
static_assert(2 * ATTN_N_TILES == TILE_WARPS, "ATTN_SCORES: two warps an n-tile");
// A staged key, value or query row: 256 bf16 and 16 bytes of padding, so that the 8 rows one ldmatrix reads
// fall in distinct banks.
constexpr int ATTN_ROW_BYTES = 2 * ATTN_HEAD_DIM + 16;
constexpr int ATTN_KEYS_BYTES = ATTN_CHUNK * ATTN_ROW_BYTES;
// A ring slot: a chunk's key or value rows, then (ATTN_PV) each query's bf16 scores over the chunk's keys,
// copied with the values so that no global load sits in the chunk's chain.
constexpr int ATTN_SCORE_BYTES = 2 * ATTN_CHUNK;
constexpr int ATTN_SLOT_BYTES = ATTN_KEYS_BYTES + ATTN_MAX_QUERIES * ATTN_SCORE_BYTES;
constexpr int ATTN_P_ROW_BYTES = 2 * ATTN_CHUNK + 16;  // a query's bf16 probabilities over one chunk
// ATTN_SCORES: the halves of the dims' sums an n-tile's two warps hand each other, per chunk: [n-tile][the
// sender's half][m-tile][lane] float2.
constexpr int ATTN_XCHG_BYTES = ATTN_N_TILES * 2 * ATTN_M_TILES * 32 * 8;
// Dynamic shared memory before the ring: the queries (ATTN_SCORES) or two chunks' probabilities (ATTN_PV),
// the exchanged halves (ATTN_SCORES), the queries' global max and sum (ATTN_PV), each query's key range in
// the partition (AttnTile).
constexpr int ATTN_SMEM_FIXED = 51200;
static_assert(ATTN_SMEM_FIXED == ATTN_MAX_QUERIES * ATTN_ROW_BYTES + ATTN_XCHG_BYTES + 4 * 4 * ATTN_MAX_QUERIES,
              "ATTN_SMEM_FIXED");
static_assert(2 * ATTN_MAX_QUERIES * ATTN_P_ROW_BYTES <= ATTN_MAX_QUERIES * ATTN_ROW_BYTES, "the P buffers fit");
// The least the tiles run with: three ring slots (ATTN_PV computes a chunk's probabilities while the chunk
// before it is multiplied; megakernel/runtime/cuda_build.py tile_smem_bytes).
constexpr int ATTN_MIN_DEPTH = 3;
constexpr int ATTN_MIN_SMEM = 177152;
static_assert(ATTN_MIN_SMEM == ATTN_SMEM_FIXED + ATTN_MIN_DEPTH * ATTN_SLOT_BYTES, "ATTN_MIN_SMEM");

__device__ __forceinline__ void partition_bounds(int length, int p, int parts, int& lo, int& hi) {
    lo = static_cast<int>(static_cast<long long>(p) * length / parts);
    hi = static_cast<int>(static_cast<long long>(p + 1) * length / parts);
}

#ifndef MK_HOST_SIMT  // tests/simt/simt.h: host models of these (the warp's loads, copies in flight to their wait)
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 at) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 at) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}

// 16 bytes from src, or zeros where !valid (src is then not read: cp.async's source size 0).
__device__ __forceinline__ void copy_async16_or_zero(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// The two warps of warp pair `id` (1..8; 0 is __syncthreads') meet.
__device__ __forceinline__ void pair_sync(int id) {
    asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory");
}

// Two floats to and from shared memory at a shared-memory address (a warp pair's exchange).
__device__ __forceinline__ void store_shared8(u32 at, float2 v) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(at), "f"(v.x), "f"(v.y) : "memory");
}

__device__ __forceinline__ float2 load_shared8(u32 at) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(at) : "memory");
    return v;
}
#endif

// The keys (or values) of one partition's tile: rows [c0, end) of KV head kv, c0 a multiple of 16 at or
// below the first row's lo, end the last row's hi (rows past it are zeros in the ring). ATTN_PV also stages
// each query's scores over the chunk's keys (`scores`: query 0's row; the rows' stride a multiple of 8, so
// every 8-key piece is 16-byte aligned: compiler/lowering.py pads it); pieces past `end` are not copied.
struct KvStream {
    const bf16* cache;  // the cache's row 0 at KV head kv's columns
    const bf16* scores;
    int stride, score_stride, queries, c0, end, chunks, depth;
    u32 ring;
    __device__ KvStream(const Buffer& buf, int kv, int pos, int m, int part, int parts, u32 ring, int ring_bytes,
                        const bf16* scores, int score_stride, int queries)
        : cache(buf.at<bf16>(0, kv * ATTN_HEAD_DIM)), scores(scores), stride(buf.cols), score_stride(score_stride),
          queries(queries), ring(ring) {
        int lo, hi;
        partition_bounds(pos + 1, part, parts, lo, hi);
        c0 = lo / 16 * 16;
        partition_bounds(pos + m, part, parts, lo, end);
        chunks = end > c0 ? (end - c0 + ATTN_CHUNK - 1) / ATTN_CHUNK : 0;
        depth = min(ATTN_MAX_DEPTH, ring_bytes / ATTN_SLOT_BYTES);
    }
    __device__ u32 slot(int c) const { return ring + (c % depth) * ATTN_SLOT_BYTES; }
    // Chunk c into its slot (all threads), then one commit: the chunk's copy group (empty past the last).
    __device__ void stage(int c) const {
        if (c < chunks) {
            for (int i = threadIdx.x; i < ATTN_CHUNK * 32; i += TILE_THREADS) {
                const int row = i >> 5, piece = i & 31, t = c0 + c * ATTN_CHUNK + row;
                copy_async16_or_zero(slot(c) + row * ATTN_ROW_BYTES + 16 * piece,
                                     cache + static_cast<size_t>(t < end ? t : 0) * stride + 8 * piece, t < end);
            }
            if (scores != nullptr) {
                for (int i = threadIdx.x; i < queries * 8; i += TILE_THREADS) {
                    const int qi = i >> 3, t = c0 + c * ATTN_CHUNK + 8 * (i & 7);
                    if (t < end)
                        copy_async16(slot(c) + ATTN_KEYS_BYTES + qi * ATTN_SCORE_BYTES + 16 * (i & 7),
                                     scores + static_cast<size_t>(qi) * score_stride + t);
                }
            }
        }
        copies_commit();
    }
    // Fill the ring but one slot (its groups behind whatever the caller committed before).
    __device__ void start() const {
        for (int c = 0; c < depth - 1; ++c) stage(c);
    }
    // Chunks c .. c + ahead have landed and every thread is past chunk c - 1 (its slot free): all threads.
    // ATTN_PV asks for ahead = 1: it reads chunk c + 1's scores while chunk c is multiplied.
    __device__ void next(int c, int ahead = 0) const {
        copies_wait(depth - 2 - ahead);
        __syncthreads();
        stage(c + depth - 1);
    }
};

// What both tiles of (KV head, partition) read off their word, and their shared memory before the ring
// (reached by constant offsets from `base`, so that one pointer, not six, stays live in the chunk loops).
constexpr int ATTN_XCHG_AT = ATTN_MAX_QUERIES * ATTN_ROW_BYTES;
constexpr int ATTN_ROW_MAX_AT = ATTN_XCHG_AT + ATTN_XCHG_BYTES;
constexpr int ATTN_ROW_SUM_AT = ATTN_ROW_MAX_AT + 4 * ATTN_MAX_QUERIES;
constexpr int ATTN_LO_AT = ATTN_ROW_SUM_AT + 4 * ATTN_MAX_QUERIES;
constexpr int ATTN_HI_AT = ATTN_LO_AT + 4 * ATTN_MAX_QUERIES;
static_assert(ATTN_HI_AT + 4 * ATTN_MAX_QUERIES == ATTN_SMEM_FIXED, "the fixed part's layout");
struct AttnTile {
    int hd, parts, group, kv, part, m, queries, m_tiles, pos;
    u8* base;
    // Threads < ATTN_MAX_QUERIES fill lo and hi; the caller syncs before they are read.
    __device__ AttnTile(const Ctx& ctx, const Word& w, int tile, u8* smem)
        : hd(w.p(2)), parts(w.p(3)), group(w.p(0) / w.p(1)), kv(tile / parts), part(tile % parts), m(w.rows()),
          queries(group * m), m_tiles((queries + 15) / 16), pos(ctx.control()[w.ctrl_base() + CTRL_POSITION]),
          base(smem) {
        const int qi = threadIdx.x;
        if (qi < ATTN_MAX_QUERIES) {
            int l = 0, h = 0;
            if (qi < queries) partition_bounds(pos + qi % m + 1, part, parts, l, h);
            lo(qi) = l, hi(qi) = h;
        }
    }
    // query qi's keys in the partition: [lo(qi), hi(qi)) (empty past the last query)
    __device__ int& lo(int qi) const { return reinterpret_cast<int*>(base + ATTN_LO_AT)[qi]; }
    __device__ int& hi(int qi) const { return reinterpret_cast<int*>(base + ATTN_HI_AT)[qi]; }
    // ATTN_PV: each query's global max and sum
    __device__ float& row_max(int qi) const { return reinterpret_cast<float*>(base + ATTN_ROW_MAX_AT)[qi]; }
    __device__ float& row_sum(int qi) const { return reinterpret_cast<float*>(base + ATTN_ROW_SUM_AT)[qi]; }
    // ATTN_SCORES: where sender `half` of n-tile nt puts its lane's halves of m-tile 0 (m-tile mt: + 256 mt),
    // a shared-memory address (32 bits, not a generic pointer's 64: the tile is tight on registers)
    __device__ u32 xchg(int nt, int half, int lane) const {
        return smem_addr(base) + ATTN_XCHG_AT + ((2 * nt + half) * ATTN_M_TILES * 32 + lane) * 8;
    }
    __device__ u32 ring() const { return smem_addr(base) + ATTN_SMEM_FIXED; }
    __device__ int ring_bytes() const { return static_cast<int>(dynamic_smem_bytes()) - ATTN_SMEM_FIXED; }
    // The partition's keys or values through the ring (and for ATTN_PV the scores of query 0's row `scores`).
    __device__ KvStream stream(const Buffer& cache, const bf16* scores = nullptr, int score_stride = 0) const {
        return KvStream(cache, kv, pos, m, part, parts, ring(), ring_bytes(), scores, score_stride, queries);
    }
};

// Scores bf16(bf16(q . k) * scale) of the group's heads for the partition's keys -> scores rows
// (head m-major: head * M + row), then (max, sum exp(s - max)) per head -> stats columns 2p, 2p + 1.
// Warps w and w + 8 take n-tile w % 8 (8 keys) of every chunk for every m-tile, each over half the dims
// (warp w dims 0..127, warp w + 8 dims 128..255, one chain of 8 mma steps each); each hands the other the
// sums of the key column the other finishes (even keys: warp w, odd: w + 8), which adds the two halves.
__device__ inline void attn_scores_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const AttnTile sm(ctx, w, tile, smem);
    const int hd = sm.hd, group = sm.group, kv = sm.kv, part = sm.part, m = sm.m, queries = sm.queries;
    const int m_tiles = sm.m_tiles;
    const float scale = w.pf(4);
    const Buffer q = ctx.buffer(w.buf_in()), scores = ctx.buffer(w.buf_out());
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const u32 qs = smem_addr(smem);
    const KvStream kvs = sm.stream(ctx.buffer(w.buf_aux0()));
    // the queries (zeros past the last, to fill the m-tiles), in the first chunk's copy group
    for (int i = threadIdx.x; i < m_tiles * 16 * 32; i += TILE_THREADS) {
        const int qi = i >> 5, piece = i & 31, h = qi / m, r = qi % m;
        copy_async16_or_zero(qs + qi * ATTN_ROW_BYTES + 16 * piece,
                             q.at<bf16>(qi < queries ? r : 0, (kv * group + (qi < queries ? h : 0)) * hd + 8 * piece),
                             qi < queries);
    }
    kvs.start();
    // This lane finishes, per m-tile, rows g and g + 8 at key 8 nt + 2 t4 + half of each chunk. Each (query,
    // key residue mod 64) keeps a running (max, sum of exp(s - max)) over its keys in key order, rescaled when
    // the max grows; the 64 residues are combined in order at the end. Both depend on key positions only.
    const int nt = warp % ATTN_N_TILES, half = warp / ATTN_N_TILES, key = 8 * nt + 2 * t4 + half;
    bf16* const score_rows = scores.at<bf16>(kv * group * m, 0);  // query qi's row: + qi * scores.cols
    float run_max[ATTN_M_TILES][2], run_sum[ATTN_M_TILES][2];
#pragma unroll
    for (int e = 0; e < 2 * ATTN_M_TILES; ++e) run_max[e >> 1][e & 1] = neg_inf(), run_sum[e >> 1][e & 1] = 0.0f;
    const u32 kb0 = (8 * nt + (lane & 7)) * ATTN_ROW_BYTES + 16 * (lane >> 3) + ATTN_HEAD_DIM * half;
    const u32 qb = qs + (lane & 15) * ATTN_ROW_BYTES + 16 * (lane >> 4) + ATTN_HEAD_DIM * half;
    const u32 mine = sm.xchg(nt, half, lane), theirs = sm.xchg(nt, 1 - half, lane);
    for (int c = 0; c < kvs.chunks; ++c) {
        kvs.next(c);
        const u32 kb = kvs.slot(c) + kb0;
        const int t = kvs.c0 + c * ATTN_CHUNK + key;
        // one m-tile at a time, so that only its four sums are live
#pragma unroll
        for (int mt = 0; mt < ATTN_M_TILES; ++mt) {
            if (mt >= m_tiles) break;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int ks = 0; ks < ATTN_HEAD_DIM / 32; ks += 2) {  // two k-steps of 16 dims per B load
                u32 a[4], b[4];
                ldmatrix_x4(b, kb + 32 * ks);
                const u32 qa = qb + 16 * mt * ATTN_ROW_BYTES + 32 * ks;
                ldmatrix_x4(a, qa);
                mma_16816<false>(acc, a, {b[0], b[1]});
                ldmatrix_x4(a, qa + 32);
                mma_16816<false>(acc, a, {b[2], b[3]});
            }
            // acc[e]: row g + 8 (e >> 1), key 2 t4 + (e & 1) of the n-tile; this warp keeps e & 1 == half
            // (selected, not indexed by half: an index known only at run time would put acc in local memory).
            const float2 give = half ? make_float2(acc[0], acc[2]) : make_float2(acc[1], acc[3]);
            store_shared8(mine + 256 * mt, give);
            pair_sync(1 + nt);
            const float2 other = load_shared8(theirs + 256 * mt);
#pragma unroll
            for (int sel = 0; sel < 2; ++sel) {
                const int qi = 16 * mt + g + 8 * sel;
                if (t < sm.lo(qi) || t >= sm.hi(qi)) continue;  // outside the query row's keys, or past the queries
                // the two halves' sums (fp32 addition commutes: the same bits in either warp)
                const float dot = add_rn(half ? acc[1 + 2 * sel] : acc[2 * sel], sel ? other.y : other.x);
                const bf16 v = to_bf16(mul_rn(round_bf16(dot), scale));
                score_rows[static_cast<size_t>(qi) * scores.cols + t] = v;
                const float x = bf(v);
                float& mx = run_max[mt][sel];
                float& sum = run_sum[mt][sel];
                // a new max rescales the sum and adds exp(0) = 1; else the sum adds exp(x - max): one expf
                const bool grows = x > mx;
                const float e = expf(grows ? sub_rn(mx, x) : sub_rn(x, mx));
                sum = grows ? add_rn(mul_rn(sum, e), 1.0f) : add_rn(sum, e);
                mx = grows ? x : mx;
            }
        }
    }
    copies_wait(0);
    __syncthreads();  // the ring is free: it takes the residues' (max, sum) [query][64]
    float2* residues = reinterpret_cast<float2*>(smem + ATTN_SMEM_FIXED);
    static_assert(ATTN_MAX_QUERIES * ATTN_CHUNK * 8 <= ATTN_SLOT_BYTES, "the residues fit one ring slot");
    const int residue = (kvs.c0 + key) % ATTN_CHUNK;
#pragma unroll
    for (int mt = 0; mt < ATTN_M_TILES; ++mt) {
#pragma unroll
        for (int sel = 0; sel < 2; ++sel) {
            const int qi = 16 * mt + g + 8 * sel;
            if (mt < m_tiles && qi < queries) residues[qi * ATTN_CHUNK + residue] = make_float2(run_max[mt][sel], run_sum[mt][sel]);
        }
    }
    __syncthreads();
    const Buffer stats = ctx.buffer(w.buf_aux1());
    for (int qi = warp; qi < queries; qi += TILE_WARPS) {  // a warp per query: lane l combines residues l, l + 32
        const float2 lo_part = residues[qi * ATTN_CHUNK + lane], hi_part = residues[qi * ATTN_CHUNK + lane + 32];
        const float mx = warp_max(fmaxf(lo_part.x, hi_part.x));
        float sum = 0.0f;
        if (lo_part.x > neg_inf()) sum = add_rn(sum, mul_rn(lo_part.y, expf(sub_rn(lo_part.x, mx))));
        if (hi_part.x > neg_inf()) sum = add_rn(sum, mul_rn(hi_part.y, expf(sub_rn(hi_part.x, mx))));
        sum = warp_sum(sum);
        if (lane == 0) {
            const int srow = kv * group * m + qi;
            *stats.at<float>(srow, 2 * part) = mx;
            *stats.at<float>(srow, 2 * part + 1) = sum;
        }
    }
}

// The global (max, sum) of one score row from its P partition statistics, partitions added in order. (All
// 32 partitions loaded before the first is used took ATTN_PV 34.3 -> 29.6 us at 32k alone, but 744 more
// instructions made the megakernel ~1 % slower at 1k, where its attention tiles wait for instructions: D56.)
__device__ inline void combined_stats(const float* st, int parts, float& mx, float& total) {
    mx = neg_inf();
    for (int p = 0; p < parts; ++p) mx = fmaxf(mx, st[2 * p]);
    total = 0.0f;
    for (int p = 0; p < parts; ++p)
        if (st[2 * p] > neg_inf()) total = add_rn(total, mul_rn(st[2 * p + 1], expf(sub_rn(st[2 * p], mx))));
}

// P = bf16(exp(s - max) / sum) for the partition's keys (the row's global max and sum); fp32 P.V -> partial
// rows, columns [p hd, (p + 1) hd). Warp w computes dims [16 w, 16 w + 16) of every query. A chunk's scores
// come with its values (KvStream::stage); its probabilities are computed while the chunk before it is
// multiplied, into the other of two P buffers.
__device__ inline void attn_pv_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const AttnTile sm(ctx, w, tile, smem);
    const int hd = sm.hd, group = sm.group, kv = sm.kv, part = sm.part, m = sm.m, queries = sm.queries;
    const int m_tiles = sm.m_tiles, parts = sm.parts;
    const Buffer scores = ctx.buffer(w.buf_in()), stats = ctx.buffer(w.buf_aux1()), partial = ctx.buffer(w.buf_out());
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const u32 probs = smem_addr(smem);  // [2][query][chunk key] bf16, rows of ATTN_P_ROW_BYTES
    const KvStream kvs = sm.stream(ctx.buffer(w.buf_aux0()), scores.at<bf16>(kv * group * m, 0), scores.cols);
    kvs.start();
    if (threadIdx.x < queries) {
        float mx, total;
        combined_stats(stats.at<float>(kv * group * m + threadIdx.x, 0), parts, mx, total);
        sm.row_max(threadIdx.x) = mx, sm.row_sum(threadIdx.x) = total;
    }
    // Chunk c's probabilities into P buffer c & 1 (0 outside a query row's own keys): thread i takes key i % 64
    // of queries i / 64, i / 64 + 8, .. Its scores have landed and every thread is past the last reads of that
    // buffer. The m-tiles' rows past the queries are left as they are: an mma row's sums read only its own row
    // of P, and those rows' sums are never stored.
    const int pkey = threadIdx.x % ATTN_CHUNK, pquery = threadIdx.x / ATTN_CHUNK;
    static_assert(TILE_THREADS / ATTN_CHUNK == 8, "probabilities: 8 queries a round");
    auto probabilities = [&](int c) {
        const u8* staged = smem + ATTN_SMEM_FIXED + (c % kvs.depth) * ATTN_SLOT_BYTES + ATTN_KEYS_BYTES;
        bf16* pr = reinterpret_cast<bf16*>(smem + (c & 1) * ATTN_MAX_QUERIES * ATTN_P_ROW_BYTES);
        const int t = kvs.c0 + c * ATTN_CHUNK + pkey;
#pragma unroll 1
        for (int qi = pquery; qi < queries; qi += TILE_THREADS / ATTN_CHUNK) {
            float p = 0.0f;
            if (t >= sm.lo(qi) && t < sm.hi(qi)) {
                const float s = bf(reinterpret_cast<const bf16*>(staged + qi * ATTN_SCORE_BYTES)[pkey]);
                p = round_bf16(div_rn(expf(sub_rn(s, sm.row_max(qi))), sm.row_sum(qi)));
            }
            pr[qi * (ATTN_P_ROW_BYTES / 2) + pkey] = to_bf16(p);
        }
    };
    float acc[ATTN_M_TILES][2][4];
#pragma unroll
    for (int mt = 0; mt < ATTN_M_TILES; ++mt)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[mt][e >> 2][e & 3] = 0.0f;
    copies_wait(kvs.depth - 2);  // chunk 0
    __syncthreads();
    if (kvs.chunks > 0) probabilities(0);
    for (int c = 0; c < kvs.chunks; ++c) {
        kvs.next(c, 1);
        if (c + 1 < kvs.chunks) probabilities(c + 1);
        const u32 pc = probs + (c & 1) * ATTN_MAX_QUERIES * ATTN_P_ROW_BYTES;
        const u32 vb = kvs.slot(c) + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ATTN_ROW_BYTES + 2 * (16 * warp + 8 * (lane >> 4));
#pragma unroll
        for (int ks = 0; ks < ATTN_CHUNK / 16; ++ks) {
            u32 b[4];  // values: keys 16 ks.. as the k axis, dims 16 warp .. + 7 (b0, b1) and + 8 .. + 15 (b2, b3)
            ldmatrix_x4_trans(b, vb + 16 * ks * ATTN_ROW_BYTES);
#pragma unroll
            for (int mt = 0; mt < ATTN_M_TILES; ++mt) {
                if (mt >= m_tiles) break;
                u32 a[4];
                ldmatrix_x4(a, pc + (16 * mt + (lane & 15)) * ATTN_P_ROW_BYTES + 16 * (lane >> 4) + 32 * ks);
                mma_16816<false>(acc[mt][0], a, {b[0], b[1]});
                mma_16816<false>(acc[mt][1], a, {b[2], b[3]});
            }
        }
    }
    copies_wait(0);
#pragma unroll
    for (int mt = 0; mt < ATTN_M_TILES; ++mt) {
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            const int qi = 16 * mt + g + 8 * ((e >> 1) & 1), d = 16 * warp + 8 * (e >> 2) + 2 * t4;
            if (mt < m_tiles && qi < queries)
                *reinterpret_cast<float2*>(partial.at<float>(kv * group * m + qi, part * hd + d)) =
                    make_float2(acc[mt][e >> 2][e & 3], acc[mt][e >> 2][(e & 3) + 1]);
        }
    }
}

// Head h's columns [c0, c0 + cols) (the word's tiles / heads runs of a head's hd columns: compiler/tiling.py
// merge_tile): the P partition outputs added in order -> bf16 o; out = bf16(o * bf16(sigmoid(gate))). A thread
// loads up to ATTN_MERGE_BATCH partitions of an element before it adds the first, so that the element costs one
// trip to memory, not one per partition the compiler leaves unhoisted (the adds' order is unchanged).
constexpr int ATTN_MERGE_BATCH = 32;  // partitions a thread loads before it adds any
__device__ inline void attn_merge_tile(const Ctx& ctx, const Word& w, int tile) {
    const int hd = w.p(1), parts = w.p(2), m = w.rows(), per_head = w.tiles() / w.p(0);
    const int h = tile / per_head, cols = hd / per_head, c0 = tile % per_head * cols;
    const Buffer partial = ctx.buffer(w.buf_in()), gate = ctx.buffer(w.buf_aux0()), out = ctx.buffer(w.buf_out());
    for (int i = threadIdx.x; i < m * cols; i += TILE_THREADS) {
        const int row = i / cols, d = c0 + i % cols;
        const float* src = partial.at<float>(h * m + row, d);
        const bf16 gate_raw = *gate.at<bf16>(row, h * hd + d);
        float o = 0.0f;
        for (int p0 = 0; p0 < parts; p0 += ATTN_MERGE_BATCH) {
            float v[ATTN_MERGE_BATCH];
#pragma unroll
            for (int j = 0; j < ATTN_MERGE_BATCH; ++j) v[j] = p0 + j < parts ? src[(p0 + j) * hd] : 0.0f;
#pragma unroll
            for (int j = 0; j < ATTN_MERGE_BATCH; ++j)
                if (p0 + j < parts) o = p0 + j == 0 ? v[j] : add_rn(o, v[j]);
        }
        const float g = round_bf16(sigmoid_ref(bf(gate_raw)));
        *out.at<bf16>(row, h * hd + d) = to_bf16(mul_rn(round_bf16(o), g));
    }
}

}  // namespace mk
