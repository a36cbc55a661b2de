/*
 * qgz.cu — CUDA kernels of qgZ: step 0 (reorder the W slices into the
 * stage-major position order of Algorithm 2 and quantize, one pass), step 2
 * (decode k chunks, sum in fp32, requantize, one pass) and step 4 (decode k
 * chunks, sum, optionally divide, write the caller's output, one pass).
 * Byte-identical to kernels/qgz_ref.c; launch contract in
 * zpp_kernels_cuda.h; geometry and layout in zpp_kernels.h.
 */
#include "zk_fast.cuh"
#include "zk_rqt.cuh"

using namespace zk;

namespace
{

/* The geometry a kernel needs, by value. */
struct kgeom {
    uint64_t n, shard, piece, piece_bytes;
    int nodes, local;
    uint32_t block;
};

/* Elements of sub-chunk `stage` of slice s that exist in the gradient. */
__device__ __forceinline__ uint64_t piece_valid(const kgeom &g, uint64_t s, uint64_t stage)
{
    uint64_t start = s * g.shard;
    if (start >= g.n)
        return 0;
    uint64_t in_slice = min(g.n - start, g.shard), off = stage * g.piece;
    return off >= in_slice ? 0 : min(in_slice - off, g.piece);
}

/* Elements of DT in one 16-byte vector, and per thread. */
template <int DT> struct shape {
    static constexpr int es = dt_traits<DT>::size;
    static constexpr int ve = ZK_VEC_BYTES / es;
    static constexpr int ept = ve * ZK_NV;
};
/* The fused reduction reads codes: 16 codes per vector, 2 vectors a thread. */
#define ZK_RQ_VE 16
#ifndef ZK_RQ_NV
#define ZK_RQ_NV 1
#endif

/* Blocks of stages [k0, k0 + nstages): one team per block; chunk c (the
 * output piece at out + c * piece_bytes) is position c % W of stage
 * k0 + c / W. */
template <int DT, int BITS>
__global__ void ZK_LB_TEAM reorder_kernel(const void *x, kgeom g, int k0, uint64_t nb_total,
                                          uint8_t *out, unsigned long long *d_poisoned)
{
    __shared__ team_smem sm;
    constexpr int es = shape<DT>::es, VE = shape<DT>::ve;
    int team = (int)(g.block / shape<DT>::ept), tpc = (int)blockDim.x / team;
    int lane = (int)threadIdx.x % team, tix = (int)threadIdx.x / team;
    uint64_t w = (uint64_t)g.nodes * (uint64_t)g.local, bpc = g.piece / g.block;
    uint64_t ngroups = (nb_total + (uint64_t)tpc - 1) / (uint64_t)tpc;
    qdst d;
    d.pay_elems = g.piece;
    d.nb = bpc;
    int parity = 0;
    for (uint64_t grp = blockIdx.x; grp < ngroups; grp += gridDim.x, parity ^= 1) {
        uint64_t b = grp * (uint64_t)tpc + (uint64_t)tix;
        int active = b < nb_total;
        uint64_t c = active ? b / bpc : 0, jb = active ? b % bpc : 0;
        uint64_t p = c % w, stage = (uint64_t)k0 + c / w;
        uint64_t s = (p % (uint64_t)g.nodes) * (uint64_t)g.local + p / (uint64_t)g.nodes;
        uint64_t pv = active ? piece_valid(g, s, stage) : 0;
        const uint8_t *base = (const uint8_t *)x + (pv ? (s * g.shard + stage * g.piece) * es : 0);
        const uint8_t *src[ZK_NV];
        uint64_t valid[ZK_NV];
        raw16 r[ZK_NV];
        bool slow[ZK_NV];
#pragma unroll
        for (int j = 0; j < ZK_NV; j++) {
            uint64_t first = jb * g.block + vec_pos<ZK_CONTIG, VE, ZK_NV>(lane, j, team);
            valid[j] = first < pv ? pv - first : 0;
            src[j] = base + (valid[j] ? first * es : 0);
            r[j] = load_elems_raw<DT, VE>(src[j], valid[j], &slow[j]);
        }
        float v[ZK_NV][VE];
#pragma unroll
        for (int j = 0; j < ZK_NV; j++)
            widen_vec<DT, VE>(r[j], slow[j], src[j], valid[j], v[j]);
        d.payload = out + c * g.piece_bytes;
        d.scales = (float *)(d.payload + g.piece * BITS / 8);
        d.jb = jb;
        d.first = jb * g.block;
        if (quant_team<BITS, VE, ZK_NV, ZK_CONTIG>(v, active, lane, team, tix, d, sm, parity) &&
            d_poisoned)
            atomicAdd(d_poisoned, 1ull);
    }
}

template <int BITS>
__global__ void ZK_LB_TEAM reduce_requant_kernel(const uint8_t *in, uint64_t in_stride, int k,
                                                 uint64_t piece, uint32_t block, uint64_t pay_bytes,
                                                 uint64_t nb, uint8_t *out,
                                                 unsigned long long *d_poisoned)
{
    __shared__ team_smem sm;
    int team = (int)(block / (ZK_RQ_VE * ZK_RQ_NV)), tpc = (int)blockDim.x / team;
    int lane = (int)threadIdx.x % team, tix = (int)threadIdx.x / team;
    uint64_t ngroups = (nb + (uint64_t)tpc - 1) / (uint64_t)tpc;
    qdst d;
    d.payload = out;
    d.scales = (float *)(out + pay_bytes);
    d.pay_elems = pay_bytes * 8 / BITS;
    d.nb = nb;
    int parity = 0;
    for (uint64_t grp = blockIdx.x; grp < ngroups; grp += gridDim.x, parity ^= 1) {
        uint64_t b = grp * (uint64_t)tpc + (uint64_t)tix;
        int active = b < nb;
        uint64_t e[ZK_RQ_NV], valid[ZK_RQ_NV];
#pragma unroll
        for (int j = 0; j < ZK_RQ_NV; j++) {
            e[j] = b * block + vec_pos<ZK_CONTIG, ZK_RQ_VE, ZK_RQ_NV>(lane, j, team);
            valid[j] = active && e[j] < piece ? piece - e[j] : 0;
        }
        float acc[ZK_RQ_NV][ZK_RQ_VE];
#if ZK_B4
        /* ZK_B4: int4 sums over the biased codes (zk_arith.h) */
        if constexpr (BITS == 4)
            sum_chunks_b4<ZK_RQ_VE, ZK_RQ_NV>(in, in_stride, k, pay_bytes, block, e, valid, acc);
        else
            sum_chunks<BITS, ZK_RQ_VE, ZK_RQ_NV>(in, in_stride, k, pay_bytes, block, e, valid, acc);
#else
        sum_chunks<BITS, ZK_RQ_VE, ZK_RQ_NV>(in, in_stride, k, pay_bytes, block, e, valid, acc);
#endif
        d.jb = b;
        d.first = b * block;
        if (quant_team<BITS, ZK_RQ_VE, ZK_RQ_NV, ZK_CONTIG>(acc, active, lane, team, tix, d, sm,
                                                            parity) &&
            d_poisoned)
            atomicAdd(d_poisoned, 1ull);
    }
}

/* Flat: thread t owns the ZK_OUT_NV * 16 adjacent elements from
 * t * ZK_OUT_NV * 16: 16-byte (int8) or 8-byte (int4) code loads and one
 * scale load per chunk and vector. */
template <int ODT, int BITS>
__global__ void ZK_LB_FLAT reduce_out_kernel(const uint8_t *in, uint64_t in_stride, int k,
                                             uint64_t pay_bytes, uint32_t block, uint64_t count,
                                             int mean, float divisor, void *y)
{
    constexpr int oes = shape<ODT>::es, VE = ZK_RQ_VE;
    uint64_t nthr = (count + VE * ZK_OUT_NV - 1) / (VE * ZK_OUT_NV);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nthr; t += stride) {
        uint64_t e[ZK_OUT_NV], valid[ZK_OUT_NV];
#pragma unroll
        for (int j = 0; j < ZK_OUT_NV; j++) {
            e[j] = (t * ZK_OUT_NV + j) * VE;
            valid[j] = e[j] < count ? count - e[j] : 0;
        }
        float acc[ZK_OUT_NV][VE];
        sum_chunks<BITS, VE, ZK_OUT_NV>(in, in_stride, k, pay_bytes, block, e, valid, acc);
#pragma unroll
        for (int j = 0; j < ZK_OUT_NV; j++) {
            if (!valid[j])
                continue;
            if (mean) {
#pragma unroll
                for (int i = 0; i < VE; i++)
                    acc[j][i] = zk_fdiv(acc[j][i], divisor);
            }
            store_elems<ODT, VE>((uint8_t *)y + e[j] * oes, valid[j], acc[j]);
        }
    }
}

int geom_ok(const struct zk_qgz_geom *g)
{
    return g && g->nodes >= 1 && g->local >= 1 && g->stages >= 1 &&
           zk_params_ok(g->bits, g->block) && g->piece % g->block == 0 &&
           g->piece_bytes == zk_chunk_bytes(g->piece, g->bits, g->block);
}

template <int DT, int BITS>
void launch_reorder(const void *x, const struct zk_qgz_geom *g, int k0, int nstages, uint8_t *out,
                    unsigned long long *d_poisoned, cudaStream_t stream)
{
    kgeom kg = {g->n, g->shard, g->piece, g->piece_bytes, g->nodes, g->local, g->block};
    {
        fq_args a = {};
        a.x = (const uint8_t *)x;
        a.out = out;
        a.nodes = g->nodes;
        a.local = g->local;
        a.k0 = k0;
        a.n = g->n;
        a.shard = g->shard;
        a.piece = g->piece;
        a.piece_bytes = g->piece_bytes;
        a.nchunks = (uint64_t)nstages * (uint64_t)g->nodes * (uint64_t)g->local;
        a.d_poisoned = d_poisoned;
        if (fqx_dispatch<DT, BITS, true>(a, g->block, g->piece / g->block, stream))
            return;
    }
    qshape sh = qshape_for(g->block, shape<DT>::ept);
    uint64_t w = (uint64_t)g->nodes * (uint64_t)g->local;
    uint64_t nb = (uint64_t)nstages * w * (g->piece / g->block);
    uint64_t groups = (nb + (uint64_t)sh.tpc - 1) / (uint64_t)sh.tpc;
    reorder_kernel<DT, BITS>
        <<<grid_for(groups), sh.threads, 0, stream>>>(x, kg, k0, nb, out, d_poisoned);
}

int reorder(const void *x, int dtype, const struct zk_qgz_geom *g, int k0, int nstages,
            uint8_t *out, unsigned long long *d_poisoned, cudaStream_t stream)
{
    if (!geom_ok(g) || !dtype_ok(dtype) || k0 < 0 || k0 + nstages > g->stages ||
        (g->piece && (!out || !aligned(out))) || (g->n && !x))
        return (int)cudaErrorInvalidValue;
    if (g->piece == 0)
        return 0;
#define ZK_R(DT, B) launch_reorder<DT, B>(x, g, k0, nstages, out, d_poisoned, stream)
    if (g->bits == 8) {
        if (dtype == ZK_FP32)
            ZK_R(ZK_FP32, 8);
        else if (dtype == ZK_FP16)
            ZK_R(ZK_FP16, 8);
        else
            ZK_R(ZK_BF16, 8);
    } else {
        if (dtype == ZK_FP32)
            ZK_R(ZK_FP32, 4);
        else if (dtype == ZK_FP16)
            ZK_R(ZK_FP16, 4);
        else
            ZK_R(ZK_BF16, 4);
    }
#undef ZK_R
    return launch_status();
}

} // namespace

extern "C" int zk_qgz_reorder_quantize_cuda(const void *x, int dtype, const struct zk_qgz_geom *g,
                                            uint8_t *out, unsigned long long *d_poisoned,
                                            cudaStream_t stream)
{
    if (!g)
        return (int)cudaErrorInvalidValue;
    return reorder(x, dtype, g, 0, g->stages, out, d_poisoned, stream);
}

extern "C" int zk_qgz_reorder_quantize_stage_cuda(const void *x, int dtype,
                                                  const struct zk_qgz_geom *g, int stage,
                                                  uint8_t *out, unsigned long long *d_poisoned,
                                                  cudaStream_t stream)
{
    return reorder(x, dtype, g, stage, 1, out, d_poisoned, stream);
}

extern "C" int zk_reduce_requant_cuda(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                                      int bits, uint32_t block, uint8_t *out,
                                      unsigned long long *d_poisoned, cudaStream_t stream)
{
    if (!zk_params_ok(bits, block) || k < 1 || in_stride % ZK_ALIGN != 0 ||
        (piece && (!in || !out || !aligned(in) || !aligned(out))))
        return (int)cudaErrorInvalidValue;
    if (piece == 0)
        return 0;
    qshape sh = qshape_for(block, ZK_RQ_VE * ZK_RQ_NV);
    uint64_t nb = zk_num_blocks(piece, block);
    uint64_t groups = (nb + (uint64_t)sh.tpc - 1) / (uint64_t)sh.tpc;
    uint64_t pay = zk_payload_bytes(piece, bits);
    if (bits == 4 && rqt_dispatch(in, in_stride, k, piece, block, pay, nb, out, d_poisoned, stream))
        return launch_status();
    if (bits == 8
            ? frq_dispatch<8>(in, in_stride, k, piece, block, pay, nb, out, d_poisoned, stream)
            : frq_dispatch<4>(in, in_stride, k, piece, block, pay, nb, out, d_poisoned, stream))
        return launch_status();
    if (bits == 8)
        reduce_requant_kernel<8><<<grid_for(groups), sh.threads, 0, stream>>>(
            in, in_stride, k, piece, block, pay, nb, out, d_poisoned);
    else
        reduce_requant_kernel<4><<<grid_for(groups), sh.threads, 0, stream>>>(
            in, in_stride, k, piece, block, pay, nb, out, d_poisoned);
    return launch_status();
}

extern "C" int zk_reduce_out_cuda(const uint8_t *in, uint64_t in_stride, int k, uint64_t piece,
                                  int bits, uint32_t block, uint64_t count, int op, float divisor,
                                  void *y, int out_dtype, cudaStream_t stream)
{
    if (count > piece)
        count = piece;
    if (!zk_params_ok(bits, block) || k < 1 || in_stride % ZK_ALIGN != 0 || !dtype_ok(out_dtype) ||
        (op != ZK_SUM && op != ZK_MEAN) || (count && (!in || !y || !aligned(in))))
        return (int)cudaErrorInvalidValue;
    if (count == 0)
        return 0;
    uint64_t nthr = (count + ZK_RQ_VE * ZK_OUT_NV - 1) / (ZK_RQ_VE * ZK_OUT_NV);
    unsigned grid = grid_for((nthr + ZK_CTA_THREADS - 1) / ZK_CTA_THREADS);
    uint64_t pay = zk_payload_bytes(piece, bits);
    int mean = op == ZK_MEAN;
#define ZK_O(ODT, B)                                                                               \
    do {                                                                                           \
        if (!fro_dispatch<ODT, B>(in, in_stride, k, pay, block, count, mean, divisor, y, stream))  \
            reduce_out_kernel<ODT, B><<<grid, ZK_CTA_THREADS, 0, stream>>>(                        \
                in, in_stride, k, pay, block, count, mean, divisor, y);                            \
    } while (0)
    if (bits == 8) {
        if (out_dtype == ZK_FP32)
            ZK_O(ZK_FP32, 8);
        else if (out_dtype == ZK_FP16)
            ZK_O(ZK_FP16, 8);
        else
            ZK_O(ZK_BF16, 8);
    } else {
        if (out_dtype == ZK_FP32)
            ZK_O(ZK_FP32, 4);
        else if (out_dtype == ZK_FP16)
            ZK_O(ZK_FP16, 4);
        else
            ZK_O(ZK_BF16, 4);
    }
#undef ZK_O
    return launch_status();
}
