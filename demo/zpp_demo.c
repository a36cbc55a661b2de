/*
 * zpp_demo.c — zpp-demo: one ZeRO++ training step of a toy model, run by
 * several client processes against a zppd (host backend), with every
 * result checked against exact arithmetic.
 *
 * The model is L fully connected tanh layers of awkward sizes (layer i maps
 * d_i = hidden + 7i + 3 inputs to d_{i+1} outputs), bf16 weights sharded
 * flat across the W ranks as ZeRO-3 does. Each rank (a forked process):
 *   forward,  per layer: qwZ all-gather (int8, block 256) of the weights,
 *             keeping the hpZ slice under key "layer<i>"; y = tanh(W x);
 *   backward, per layer (last first): hpZ gather of the weights (must equal
 *             the qwZ output bit for bit), the layer's bf16 weight gradient,
 *             qgZ reduce-scatter (int4, mean, fp32 out) of that gradient;
 *   then hpZ invalidate of every key.
 * Weights and every rank's input are functions of fixed seeds, so each rank
 * recomputes the exact gathered weights and the exact mean of all ranks'
 * gradients for its own shard, and measures the relative L2 error of what
 * the daemon returned. The parent prints, per collective, the logical bytes,
 * the bytes that crossed virtual nodes, the ZeRO-3 figure for the same
 * step, their ratio (ZeRO++: about 0.5, 0 and 0.25) and the error.
 *
 * Exit status: 0 when every check passed; 1 when a check failed (error over
 * its bound, hpZ differing from qwZ, nonzero padding, bytes crossing nodes
 * in an hpZ gather, a byte ratio out of range); 2 on a usage error; 3 when
 * a rank could not talk to the daemon or timed out.
 *
 * Sizes and semantics follow client/include/zpp.h: count = elements of the
 * full tensor, shard = ceil(count / W); all-gathers read rank r's shard
 * [r*shard, min((r+1)*shard, count)) and write count elements;
 * reduce-scatters read count elements and write the shard, zeros past count.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zpp.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define DEMO_MAX_LAYERS 32
#define DEMO_MAX_RANKS 64
#define DEMO_MAX_HIDDEN 8192
#define DEMO_BLOCK 256 /* quantization block of the qwZ calls */
#define DEMO_QWZ_BITS 8
#define DEMO_QGZ_BITS 4
#define DEMO_ALIGN 64 /* byte alignment of each layer's slot in a buffer */
#define DEMO_CONNECT_MS 5000
#define DEMO_TIMEOUT_S 300 /* whole step, all ranks */

/* Error bounds (relative L2 against exact), documented in README.md and
 * docs/protocol.md. qwZ: int8 with blocks of 256 on Gaussian weights gives
 * about 0.7% (0.66% quantization and bf16 rounding of the output); qgZ:
 * int4 quantized twice (each rank's gradient, then the intra-node partial
 * sums) gives about 15-20% on these gradients. */
#define DEMO_QWZ_ERR_BOUND 0.01
#define DEMO_QGZ_ERR_BOUND 0.25
/* Inter-node byte ratios against ZeRO-3 (only with more than one node):
 * int8 + fp32 scale per 256 from bf16 is 0.508; int4 is 0.258. */
#define DEMO_QWZ_RATIO_MAX 0.6
#define DEMO_QGZ_RATIO_MAX 0.35

enum { C_QWZ, C_HPZ, C_QGZ, C_N };
static const char *const coll_names[C_N] = {"qwZ all-gather (int8)", "hpZ gather",
                                            "qgZ reduce-scatter (int4)"};

typedef struct {
    const char *socket;
    int ranks, nodes, layers, hidden, timeout_s;
} demo_opts;

/* What a rank sends its parent through a pipe at the end (< PIPE_BUF). */
typedef struct {
    int done;          /* 1: the rank ran the whole step */
    int failed_checks; /* checks over their bounds */
    int hpz_identical; /* 1: every hpZ gather equalled its qwZ output */
    int algo[C_N];
    uint64_t logical[C_N], intra[C_N], inter[C_N], zero3[C_N];
    double err_max[C_N];
    char first_error[256];
} rank_report;

/* The toy model's geometry, the same in every rank. */
typedef struct {
    int L, W, nodes;
    int dim[DEMO_MAX_LAYERS + 1];
    uint64_t count[DEMO_MAX_LAYERS]; /* dim[i+1] * dim[i] */
    uint64_t shard[DEMO_MAX_LAYERS]; /* ceil(count / W) */
    uint64_t off_full[DEMO_MAX_LAYERS], off_shard_bf[DEMO_MAX_LAYERS],
        off_shard_f32[DEMO_MAX_LAYERS]; /* byte offsets of layer slots */
    uint64_t bytes_full, bytes_shard_bf, bytes_shard_f32;
} model_t;

/* ---- numbers --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double uniform01(uint64_t h)
{
    return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* A standard normal number that depends only on (stream, i). */
static double gauss(uint64_t stream, uint64_t i)
{
    uint64_t h1 = splitmix64(stream * 0x100000001B3ull ^ (2 * i));
    uint64_t h2 = splitmix64(h1 ^ (2 * i + 1));
    return sqrt(-2.0 * log(uniform01(h1))) * cos(2.0 * M_PI * uniform01(h2));
}

static float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> bf16, round to nearest even (the inputs here are finite). */
static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        return 0x7FC0;
    }
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Weight j of layer i, as bf16: N(0, 1/d_in). */
static uint16_t weight_bf(const model_t *m, int i, uint64_t j)
{
    return f2bf((float)(gauss(0x5EED0000ull + (uint64_t)i, j) / sqrt((double)m->dim[i])));
}

/* Relative L2 error accumulator. */
typedef struct {
    double num, den;
} rel_l2;

static void rel_add(rel_l2 *r, double got, double want)
{
    r->num += (got - want) * (got - want);
    r->den += want * want;
}

static double rel_value(const rel_l2 *r)
{
    return r->den > 0 ? sqrt(r->num / r->den) : sqrt(r->num);
}

/* ---- the model ------------------------------------------------------------- */

static uint64_t align_up(uint64_t x)
{
    return (x + DEMO_ALIGN - 1) / DEMO_ALIGN * DEMO_ALIGN;
}

static void model_init(model_t *m, int layers, int hidden, int world, int nodes)
{
    memset(m, 0, sizeof *m);
    m->L = layers;
    m->W = world;
    m->nodes = nodes;
    for (int i = 0; i <= layers; i++) {
        m->dim[i] = hidden + 7 * i + 3;
    }
    for (int i = 0; i < layers; i++) {
        m->count[i] = (uint64_t)m->dim[i + 1] * (uint64_t)m->dim[i];
        m->shard[i] = (m->count[i] + (uint64_t)world - 1) / (uint64_t)world;
        m->off_full[i] = m->bytes_full;
        m->bytes_full += align_up(m->count[i] * 2);
        m->off_shard_bf[i] = m->bytes_shard_bf;
        m->bytes_shard_bf += align_up(m->shard[i] * 2);
        m->off_shard_f32[i] = m->bytes_shard_f32;
        m->bytes_shard_f32 += align_up(m->shard[i] * 4);
    }
}

/* Input x0 and target t of rank q's one-sample batch. */
static void rank_data(const model_t *m, int q, float *x0, float *target)
{
    for (int c = 0; c < m->dim[0]; c++) {
        x0[c] =
            (float)(2.0 * uniform01(splitmix64(0xDA7A0000ull + (uint64_t)q * 1000003u + c)) - 1.0);
    }
    for (int o = 0; o < m->dim[m->L]; o++) {
        target[o] = (float)(uniform01(splitmix64(0x7A60000ull + (uint64_t)q * 1000003u + o)) - 0.5);
    }
}

/* h_out = tanh(W h_in) with W (bf16, d_out x d_in, row-major). */
static void layer_forward(const uint16_t *w, int din, int dout, const float *h_in, float *h_out)
{
    for (int o = 0; o < dout; o++) {
        const uint16_t *row = w + (uint64_t)o * din;
        float a = 0.0f;
        for (int c = 0; c < din; c++) {
            a += bf2f(row[c]) * h_in[c];
        }
        h_out[o] = tanhf(a);
    }
}

/* delta_in = (W^T delta_out) * (1 - h_in^2). */
static void layer_backward(const uint16_t *w, int din, int dout, const float *h_in,
                           const float *delta_out, float *delta_in)
{
    for (int c = 0; c < din; c++) {
        delta_in[c] = 0.0f;
    }
    for (int o = 0; o < dout; o++) {
        const uint16_t *row = w + (uint64_t)o * din;
        for (int c = 0; c < din; c++) {
            delta_in[c] += bf2f(row[c]) * delta_out[o];
        }
    }
    for (int c = 0; c < din; c++) {
        delta_in[c] *= 1.0f - h_in[c] * h_in[c];
    }
}

/* Gradient element j of a layer: dW[o][c] = delta_out[o] * h_in[c], bf16. */
static uint16_t grad_elem(const float *delta_out, const float *h_in, int din, uint64_t j)
{
    return f2bf(delta_out[j / (uint64_t)din] * h_in[j % (uint64_t)din]);
}

/* Activations and deltas of one rank's pass. */
typedef struct {
    float *h[DEMO_MAX_LAYERS + 1];
    float *delta[DEMO_MAX_LAYERS + 1];
} pass_t;

static int pass_alloc(const model_t *m, pass_t *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i <= m->L; i++) {
        p->h[i] = calloc((size_t)m->dim[i], sizeof(float));
        p->delta[i] = calloc((size_t)m->dim[i], sizeof(float));
        if (!p->h[i] || !p->delta[i]) {
            return -1;
        }
    }
    return 0;
}

static void pass_free(const model_t *m, pass_t *p)
{
    for (int i = 0; i <= m->L; i++) {
        free(p->h[i]);
        free(p->delta[i]);
    }
}

static void output_delta(const model_t *m, pass_t *p, const float *target)
{
    const float *y = p->h[m->L];
    for (int o = 0; o < m->dim[m->L]; o++) {
        p->delta[m->L][o] = (y[o] - target[o]) * (1.0f - y[o] * y[o]);
    }
}

/* ---- one rank ------------------------------------------------------------- */

typedef struct {
    const model_t *m;
    const demo_opts *o;
    int rank;
    zpp_conn *c;
    zpp_shm *shm_wshard, *shm_wfull, *shm_whpz, *shm_grad, *shm_gshard;
    uint64_t id_wshard, id_wfull, id_whpz, id_grad, id_gshard;
    rank_report rep;
} rank_ctx;

static void fail(rank_ctx *x, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "zpp-demo: rank %d: %s\n", x->rank, msg);
    if (!x->rep.first_error[0]) {
        snprintf(x->rep.first_error, sizeof x->rep.first_error, "%s", msg);
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int rank_connect(rank_ctx *x)
{
    int rc = -1;
    for (int waited = 0; waited <= DEMO_CONNECT_MS; waited += 50) {
        rc = zpp_connect(x->o->socket, &x->c);
        if (rc == 0) {
            break;
        }
        sleep_ms(50);
    }
    if (rc != 0) {
        fail(x, "cannot connect to %s: %s", x->o->socket ? x->o->socket : "(default socket)",
             zpp_strerror(rc));
        return rc;
    }
    char job_id[64];
    snprintf(job_id, sizeof job_id, "demo-%ld", (long)getppid());
    int per_node = x->m->W / x->m->nodes;
    zpp_job_desc job = {
        .job_id = job_id,
        .rank = (uint32_t)x->rank,
        .world_size = (uint32_t)x->m->W,
        .local_rank = (uint32_t)(x->rank % per_node),
        .node_count = (uint32_t)x->m->nodes,
        .gpu_uuid = "host",
    };
    zpp_hello_info info;
    rc = zpp_hello(x->c, &job, &info);
    if (rc != 0) {
        fail(x, "hello: %s: %s", zpp_err_name(rc), zpp_last_error(x->c));
    }
    return rc;
}

static int make_buffer(rank_ctx *x, uint64_t bytes, zpp_shm **shm, uint64_t *id)
{
    int rc = zpp_shm_create(bytes, shm);
    if (rc != 0) {
        fail(x, "zpp_shm_create(%llu): %s", (unsigned long long)bytes, zpp_strerror(rc));
        return rc;
    }
    memset(zpp_shm_ptr(*shm), 0, bytes);
    rc = zpp_register_shm(x->c, *shm, 0, bytes, id);
    if (rc != 0) {
        fail(x, "register %llu bytes: %s: %s", (unsigned long long)bytes, zpp_err_name(rc),
             zpp_last_error(x->c));
    }
    return rc;
}

static void record(rank_ctx *x, int k, const zpp_result *res, double err)
{
    x->rep.algo[k] = res->algo;
    x->rep.logical[k] += res->logical_bytes;
    x->rep.intra[k] += res->bytes_intra;
    x->rep.inter[k] += res->bytes_inter;
    x->rep.zero3[k] += res->bytes_zero3_inter;
    if (err > x->rep.err_max[k]) {
        x->rep.err_max[k] = err;
    }
}

/* Relative L2 of a gathered bf16 tensor against the exact weights. */
static double weights_error(const model_t *m, int i, const uint16_t *got)
{
    rel_l2 e = {0, 0};
    for (uint64_t j = 0; j < m->count[i]; j++) {
        rel_add(&e, bf2f(got[j]), bf2f(weight_bf(m, i, j)));
    }
    return rel_value(&e);
}

/* The exact mean over all ranks of gradient shard `rank` of every layer,
 * recomputed from the seeds with the gathered weights w (identical on all
 * ranks). exact[i] holds shard[i] doubles; the caller frees them. */
static int exact_grad_shards(const model_t *m, int rank, uint16_t *const *w, double **exact)
{
    pass_t p;
    float *target = malloc((size_t)m->dim[m->L] * sizeof(float));
    int rc = pass_alloc(m, &p) || !target ? -1 : 0;
    for (int i = 0; i < m->L && rc == 0; i++) {
        exact[i] = calloc(m->shard[i], sizeof(double));
        if (!exact[i]) {
            rc = -1;
        }
    }
    for (int q = 0; q < m->W && rc == 0; q++) {
        rank_data(m, q, p.h[0], target);
        for (int i = 0; i < m->L; i++) {
            layer_forward(w[i], m->dim[i], m->dim[i + 1], p.h[i], p.h[i + 1]);
        }
        output_delta(m, &p, target);
        for (int i = m->L - 1; i >= 0; i--) {
            uint64_t j0 = (uint64_t)rank * m->shard[i];
            uint64_t j1 = j0 + m->shard[i] < m->count[i] ? j0 + m->shard[i] : m->count[i];
            for (uint64_t j = j0; j < j1; j++) {
                exact[i][j - j0] += bf2f(grad_elem(p.delta[i + 1], p.h[i], m->dim[i], j));
            }
            layer_backward(w[i], m->dim[i], m->dim[i + 1], p.h[i], p.delta[i + 1], p.delta[i]);
        }
    }
    for (int i = 0; i < m->L && rc == 0; i++) {
        for (uint64_t j = 0; j < m->shard[i]; j++) {
            exact[i][j] /= m->W;
        }
    }
    pass_free(m, &p);
    free(target);
    return rc;
}

static int rank_step(rank_ctx *x)
{
    const model_t *m = x->m;
    int r = x->rank, rc;
    char key[32];
    zpp_result res;
    uint16_t *wq[DEMO_MAX_LAYERS] = {0};
    double *exact[DEMO_MAX_LAYERS] = {0};

    if ((rc = make_buffer(x, m->bytes_shard_bf, &x->shm_wshard, &x->id_wshard)) ||
        (rc = make_buffer(x, m->bytes_full, &x->shm_wfull, &x->id_wfull)) ||
        (rc = make_buffer(x, m->bytes_full, &x->shm_whpz, &x->id_whpz)) ||
        (rc = make_buffer(x, m->bytes_full, &x->shm_grad, &x->id_grad)) ||
        (rc = make_buffer(x, m->bytes_shard_f32, &x->shm_gshard, &x->id_gshard))) {
        return rc;
    }
    uint8_t *wshard = zpp_shm_ptr(x->shm_wshard), *wfull = zpp_shm_ptr(x->shm_wfull);
    uint8_t *whpz = zpp_shm_ptr(x->shm_whpz), *grad = zpp_shm_ptr(x->shm_grad);
    uint8_t *gshard = zpp_shm_ptr(x->shm_gshard);

    /* This rank's ZeRO-3 shards of the weights (zeros past count). */
    for (int i = 0; i < m->L; i++) {
        uint16_t *s = (uint16_t *)(wshard + m->off_shard_bf[i]);
        for (uint64_t k = 0; k < m->shard[i]; k++) {
            uint64_t j = (uint64_t)r * m->shard[i] + k;
            s[k] = j < m->count[i] ? weight_bf(m, i, j) : 0;
        }
    }

    pass_t p;
    float *target = malloc((size_t)m->dim[m->L] * sizeof(float));
    if (pass_alloc(m, &p) || !target) {
        fail(x, "out of memory");
        pass_free(m, &p);
        free(target);
        return ZPP_ENOMEM;
    }
    rank_data(m, r, p.h[0], target);

    /* Forward: qwZ all-gather per layer, keeping the hpZ slice. */
    for (int i = 0; i < m->L; i++) {
        snprintf(key, sizeof key, "layer%d", i);
        zpp_bufref in = {x->id_wshard, m->off_shard_bf[i]};
        zpp_bufref out = {x->id_wfull, m->off_full[i]};
        rc = zpp_qwz_allgather(x->c, in, out, m->count[i], ZPP_BF16, DEMO_QWZ_BITS, DEMO_BLOCK, key,
                               &res);
        if (rc != 0) {
            fail(x, "qwZ all-gather layer %d: %s: %s", i, zpp_err_name(rc), zpp_last_error(x->c));
            goto out;
        }
        wq[i] = (uint16_t *)(wfull + m->off_full[i]);
        double err = weights_error(m, i, wq[i]);
        record(x, C_QWZ, &res, err);
        if (!(err <= DEMO_QWZ_ERR_BOUND)) {
            fail(x, "qwZ layer %d: relative L2 error %.4f over bound %.4f", i, err,
                 DEMO_QWZ_ERR_BOUND);
            x->rep.failed_checks++;
        }
        layer_forward(wq[i], m->dim[i], m->dim[i + 1], p.h[i], p.h[i + 1]);
    }
    output_delta(m, &p, target);

    if (exact_grad_shards(m, r, wq, exact) != 0) {
        fail(x, "out of memory");
        rc = ZPP_ENOMEM;
        goto out;
    }

    /* Backward: hpZ gather, gradient, qgZ reduce-scatter, last layer first. */
    x->rep.hpz_identical = 1;
    for (int i = m->L - 1; i >= 0; i--) {
        snprintf(key, sizeof key, "layer%d", i);
        zpp_bufref hout = {x->id_whpz, m->off_full[i]};
        rc = zpp_hpz_gather(x->c, hout, m->count[i], ZPP_BF16, key, &res);
        if (rc != 0) {
            fail(x, "hpZ gather layer %d: %s: %s", i, zpp_err_name(rc), zpp_last_error(x->c));
            goto out;
        }
        const uint16_t *wh = (const uint16_t *)(whpz + m->off_full[i]);
        double err = weights_error(m, i, wh);
        record(x, C_HPZ, &res, err);
        if (memcmp(wh, wq[i], m->count[i] * 2) != 0) {
            fail(x, "hpZ gather layer %d differs from the qwZ output", i);
            x->rep.hpz_identical = 0;
            x->rep.failed_checks++;
        }
        if (res.bytes_inter != 0) {
            fail(x, "hpZ gather layer %d moved %llu bytes across nodes", i,
                 (unsigned long long)res.bytes_inter);
            x->rep.failed_checks++;
        }

        uint16_t *g = (uint16_t *)(grad + m->off_full[i]);
        for (uint64_t j = 0; j < m->count[i]; j++) {
            g[j] = grad_elem(p.delta[i + 1], p.h[i], m->dim[i], j);
        }
        layer_backward(wh, m->dim[i], m->dim[i + 1], p.h[i], p.delta[i + 1], p.delta[i]);

        zpp_bufref gin = {x->id_grad, m->off_full[i]};
        zpp_bufref gout = {x->id_gshard, m->off_shard_f32[i]};
        rc = zpp_qgz_reduce_scatter(x->c, gin, gout, m->count[i], ZPP_BF16, ZPP_FP32, DEMO_QGZ_BITS,
                                    ZPP_MEAN, &res);
        if (rc != 0) {
            fail(x, "qgZ reduce-scatter layer %d: %s: %s", i, zpp_err_name(rc),
                 zpp_last_error(x->c));
            goto out;
        }
        const float *s = (const float *)(gshard + m->off_shard_f32[i]);
        uint64_t j0 = (uint64_t)r * m->shard[i];
        rel_l2 e = {0, 0};
        uint64_t bad_pad = 0;
        for (uint64_t k = 0; k < m->shard[i]; k++) {
            if (j0 + k < m->count[i]) {
                rel_add(&e, s[k], exact[i][k]);
            } else if (s[k] != 0.0f) {
                bad_pad++;
            }
        }
        err = rel_value(&e);
        record(x, C_QGZ, &res, err);
        if (!(err <= DEMO_QGZ_ERR_BOUND)) {
            fail(x, "qgZ layer %d: relative L2 error %.4f over bound %.4f", i, err,
                 DEMO_QGZ_ERR_BOUND);
            x->rep.failed_checks++;
        }
        if (bad_pad) {
            fail(x, "qgZ layer %d: %llu output elements past count are not 0", i,
                 (unsigned long long)bad_pad);
            x->rep.failed_checks++;
        }
    }

    /* After the optimizer step the gathered copies are stale. */
    for (int i = 0; i < m->L; i++) {
        snprintf(key, sizeof key, "layer%d", i);
        rc = zpp_hpz_invalidate(x->c, key, NULL);
        if (rc != 0) {
            fail(x, "hpZ invalidate %s: %s: %s", key, zpp_err_name(rc), zpp_last_error(x->c));
            goto out;
        }
    }
    x->rep.done = 1;

out:
    for (int i = 0; i < m->L; i++) {
        free(exact[i]);
    }
    pass_free(m, &p);
    free(target);
    return rc;
}

/* A forked rank: runs the step, writes its report to fd, returns the exit
 * code (0 ok, 1 check failed, 3 could not run). */
static int rank_main(const model_t *m, const demo_opts *o, int rank, int fd)
{
    rank_ctx x;
    memset(&x, 0, sizeof x);
    x.m = m;
    x.o = o;
    x.rank = rank;
    int rc = rank_connect(&x);
    if (rc == 0) {
        rc = rank_step(&x);
    }
    uint64_t ids[] = {x.id_wshard, x.id_wfull, x.id_whpz, x.id_grad, x.id_gshard};
    for (size_t k = 0; x.c && rc == 0 && k < sizeof ids / sizeof ids[0]; k++) {
        if (ids[k] && zpp_deregister(x.c, ids[k]) != 0) {
            fail(&x, "deregister %llu: %s", (unsigned long long)ids[k], zpp_last_error(x.c));
            x.rep.failed_checks++;
        }
    }
    zpp_close(x.c);
    zpp_shm_destroy(x.shm_wshard);
    zpp_shm_destroy(x.shm_wfull);
    zpp_shm_destroy(x.shm_whpz);
    zpp_shm_destroy(x.shm_grad);
    zpp_shm_destroy(x.shm_gshard);
    ssize_t n = write(fd, &x.rep, sizeof x.rep);
    close(fd);
    if (n != (ssize_t)sizeof x.rep || !x.rep.done) {
        return 3;
    }
    return x.rep.failed_checks ? 1 : 0;
}

/* ---- the parent ------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f, "usage: zpp-demo [-s SOCKET] [--ranks N] [--nodes N] [--layers N] [--hidden N]\n"
               "                [--timeout SECONDS]\n"
               "  -s, --socket   zppd socket (default: $ZPP_SOCKET or " ZPP_DEFAULT_SOCKET ")\n"
               "  --ranks        client processes = world size (default 4)\n"
               "  --nodes        virtual nodes; must divide --ranks (default 2)\n"
               "  --layers       layers of the toy model (default 4)\n"
               "  --hidden       base layer width; layer i is (hidden+7i+10) x (hidden+7i+3)\n"
               "                 (default 1000)\n"
               "  --timeout      seconds for the whole step (default 300)\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, demo_opts *o)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'}, {"ranks", required_argument, NULL, 'r'},
        {"nodes", required_argument, NULL, 'n'},  {"layers", required_argument, NULL, 'l'},
        {"hidden", required_argument, NULL, 'H'}, {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    *o = (demo_opts){NULL, 4, 2, 4, 1000, DEMO_TIMEOUT_S};
    int ch, bad = 0;
    while ((ch = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o->socket = optarg;
            break;
        case 'r':
            bad |= parse_int(optarg, 1, DEMO_MAX_RANKS, &o->ranks);
            break;
        case 'n':
            bad |= parse_int(optarg, 1, DEMO_MAX_RANKS, &o->nodes);
            break;
        case 'l':
            bad |= parse_int(optarg, 1, DEMO_MAX_LAYERS, &o->layers);
            break;
        case 'H':
            bad |= parse_int(optarg, 1, DEMO_MAX_HIDDEN, &o->hidden);
            break;
        case 't':
            bad |= parse_int(optarg, 1, 86400, &o->timeout_s);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            bad = 1;
        }
    }
    if (optind < argc) {
        bad = 1;
    }
    if (!bad && o->ranks % o->nodes != 0) {
        fprintf(stderr, "zpp-demo: --nodes %d does not divide --ranks %d\n", o->nodes, o->ranks);
        bad = 1;
    }
    return bad ? -1 : 0;
}

static void print_table(const demo_opts *o, const model_t *m, const rank_report *rep, int n,
                        long job_pid)
{
    /* Byte figures are the daemon's for each whole call (rank 0's replies,
     * summed over layers); errors are the worst over ranks and layers. */
    const rank_report *r0 = &rep[0];
    double err[C_N] = {0};
    int identical = 1;
    for (int q = 0; q < n; q++) {
        for (int k = 0; k < C_N; k++) {
            err[k] = rep[q].err_max[k] > err[k] ? rep[q].err_max[k] : err[k];
        }
        identical &= rep[q].hpz_identical;
    }
    static const double bounds[C_N] = {DEMO_QWZ_ERR_BOUND, DEMO_QWZ_ERR_BOUND, DEMO_QGZ_ERR_BOUND};
    uint64_t params = 0;
    for (int i = 0; i < m->L; i++) {
        params += m->count[i];
    }
    printf("\nzpp-demo: job demo-%ld: %d ranks = %d virtual nodes x %d, %d layers, "
           "%llu bf16 parameters (layer 0: %d x %d)\n",
           job_pid, o->ranks, o->nodes, o->ranks / o->nodes, m->L, (unsigned long long)params,
           m->dim[1], m->dim[0]);
    printf("%-26s %-10s %14s %14s %14s %7s %10s %8s\n", "collective", "algorithm", "logical bytes",
           "inter-node", "ZeRO-3 inter", "ratio", "rel. L2", "bound");
    uint64_t tot_inter = 0, tot_zero3 = 0;
    for (int k = 0; k < C_N; k++) {
        char ratio[16];
        if (r0->zero3[k] > 0) {
            snprintf(ratio, sizeof ratio, "%.3f", (double)r0->inter[k] / (double)r0->zero3[k]);
        } else {
            snprintf(ratio, sizeof ratio, "n/a");
        }
        tot_inter += r0->inter[k];
        tot_zero3 += r0->zero3[k];
        printf("%-26s %-10s %14llu %14llu %14llu %7s %9.3f%% %7.1f%%\n", coll_names[k],
               zpp_algo_name(r0->algo[k]), (unsigned long long)r0->logical[k],
               (unsigned long long)r0->inter[k], (unsigned long long)r0->zero3[k], ratio,
               100.0 * err[k], 100.0 * bounds[k]);
    }
    if (tot_zero3 > 0) {
        printf("%-26s %-10s %14s %14llu %14llu %7.3f   (ZeRO++ 0.75M vs ZeRO-3 3M: 0.25)\n",
               "step total", "", "", (unsigned long long)tot_inter, (unsigned long long)tot_zero3,
               (double)tot_inter / (double)tot_zero3);
    } else {
        printf("(one virtual node: nothing crosses nodes, ratios do not apply)\n");
    }
    printf("hpZ == qwZ bit for bit: %s\n", identical ? "yes" : "NO");
}

/* Checks on the byte figures that need the whole table. */
static int check_ratios(const demo_opts *o, const rank_report *r0)
{
    int bad = 0;
    if (o->nodes < 2) {
        for (int k = 0; k < C_N; k++) {
            if (r0->inter[k] != 0) {
                fprintf(stderr, "zpp-demo: %s moved %llu bytes across nodes on one node\n",
                        coll_names[k], (unsigned long long)r0->inter[k]);
                bad++;
            }
        }
        return bad;
    }
    static const double max_ratio[C_N] = {DEMO_QWZ_RATIO_MAX, 0.0, DEMO_QGZ_RATIO_MAX};
    for (int k = 0; k < C_N; k++) {
        double ratio = r0->zero3[k] ? (double)r0->inter[k] / (double)r0->zero3[k] : -1.0;
        if (r0->zero3[k] == 0 || ratio > max_ratio[k] || (k != C_HPZ && r0->inter[k] == 0)) {
            fprintf(stderr,
                    "zpp-demo: %s: inter-node bytes %llu vs ZeRO-3 %llu: ratio out of range "
                    "(expected %s%.2f)\n",
                    coll_names[k], (unsigned long long)r0->inter[k],
                    (unsigned long long)r0->zero3[k],
                    k == C_HPZ ? "" : "0 < ratio <= ", max_ratio[k]);
            bad++;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    demo_opts o;
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    model_t m;
    model_init(&m, o.layers, o.hidden, o.ranks, o.nodes);
    long job_pid = (long)getpid();

    pid_t pids[DEMO_MAX_RANKS];
    int fds[DEMO_MAX_RANKS];
    rank_report rep[DEMO_MAX_RANKS];
    memset(rep, 0, sizeof rep);
    fflush(NULL);
    for (int q = 0; q < o.ranks; q++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("zpp-demo: pipe");
            return 3;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("zpp-demo: fork");
            return 3;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(p[0]);
            for (int j = 0; j < q; j++) {
                close(fds[j]);
            }
            int code = rank_main(&m, &o, q, p[1]);
            fflush(NULL);
            _exit(code);
        }
        close(p[1]);
        pids[q] = pid;
        fds[q] = p[0];
    }

    /* Collect the reports, then the exit codes; kill everyone at the deadline. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int worst = 0, got[DEMO_MAX_RANKS] = {0};
    for (int q = 0; q < o.ranks; q++) {
        size_t have = 0;
        while (have < sizeof rep[q]) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            long left_ms = o.timeout_s * 1000L -
                           ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L);
            struct pollfd pfd = {.fd = fds[q], .events = POLLIN};
            if (left_ms <= 0 || poll(&pfd, 1, (int)left_ms) == 0) {
                fprintf(stderr, "zpp-demo: timed out after %d s waiting for rank %d\n", o.timeout_s,
                        q);
                for (int j = 0; j < o.ranks; j++) {
                    kill(pids[j], SIGKILL);
                }
                worst = 3;
                break;
            }
            ssize_t n = read(fds[q], (char *)&rep[q] + have, sizeof rep[q] - have);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            have += (size_t)n;
        }
        got[q] = have == sizeof rep[q];
        close(fds[q]);
    }
    for (int q = 0; q < o.ranks; q++) {
        int status, code;
        waitpid(pids[q], &status, 0);
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
        if (!got[q]) {
            fprintf(stderr, "zpp-demo: rank %d ended without a report\n", q);
            code = 3;
        }
        if (code != 0) {
            fprintf(stderr, "zpp-demo: rank %d failed (exit %d)%s%s\n", q, code,
                    got[q] && rep[q].first_error[0] ? ": " : "", got[q] ? rep[q].first_error : "");
        }
        worst = code > worst ? code : worst;
    }
    if (worst == 3 || !got[0]) {
        printf("demo: FAIL (a rank could not complete the step)\n");
        return 3;
    }
    print_table(&o, &m, rep, o.ranks, job_pid);
    int bad = check_ratios(&o, &rep[0]);
    if (worst != 0 || bad) {
        printf("demo: FAIL\n");
        return 1;
    }
    printf("demo: PASS (qwZ error <= %.1f%%, qgZ error <= %.0f%%, hpZ identical to qwZ)\n",
           100.0 * DEMO_QWZ_ERR_BOUND, 100.0 * DEMO_QGZ_ERR_BOUND);
    return 0;
}
