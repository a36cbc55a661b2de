/*
 * main.c — zppd's entry point. It reads like systemd's example daemon:
 * logging, configuration, backend, socket, readiness, loop. Signals and
 * the watchdog arrive through the loop (uv_signal_t, uv_timer_t), so no
 * handler touches daemon state.
 *
 *   SIGTERM/SIGINT  stop accepting, finish in-flight calls, abort the
 *                   remaining jobs, remove the socket, exit 0.
 *   SIGHUP          re-read the config file and apply the reloadable keys.
 *
 * A sticky device error (CUDA, or the host backend's fault injection) ends
 * every job with an error and exits EXIT_FATAL_DEVICE, so that systemd
 * (Restart=on-failure) starts a fresh process.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef ZPP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "cluster.h"
#include "daemon.h"
#include "gpu_start.h"
#include "hpz_store.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "zpp.h"

#define TICK_MS 100
#define EXIT_FATAL_DEVICE 3       /* a sticky device error: restart me */
#define FATAL_GRACE_US 2000000u   /* time for in-flight calls to fail and reply */
#define STOP_DEADLINE_MS 30000
#define MAX_OVERRIDES 64

int server_start_accepting(struct zppd *d);

static char *g_overrides[MAX_OVERRIDES]; /* -o key=value, re-applied on SIGHUP */
static int g_noverrides;

/* Signals that arrive before the loop's uv_signal_t handlers exist: opening
 * the GPUs may wait up to cuda_start_wait_ms. SIGHUP's default action would
 * kill zppd there (and systemd counts a death by SIGHUP as clean: no
 * restart). The handler only notes them; the GPU wait gives up on a stop,
 * and main hands both to on_signal once the loop's handlers are in place
 * (uv_signal_start replaces this handler). */
static volatile sig_atomic_t g_early_hup, g_early_stop;

static void early_signal(int signum)
{
    if (signum == SIGHUP)
        g_early_hup = 1;
    else
        g_early_stop = signum;
}

static void catch_early_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = early_signal; /* no SA_RESTART: the GPU wait's sleep ends */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

uint64_t zppd_now_ms(void)
{
    return zppd_now_us() / 1000;
}

uint64_t zppd_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void notify(const char *what)
{
#ifdef ZPP_HAVE_SYSTEMD
    sd_notify(0, what);
#else
    (void)what;
#endif
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zppd [options]\n"
            "  -c, --config FILE     config file (key = value; see deploy/zppd.conf)\n"
            "  -s, --socket PATH     Unix socket (default /run/zppd/zppd.sock)\n"
            "  -b, --backend NAME    host, cuda or auto\n"
            "  -l, --log-level LVL   error, warn, info or debug\n"
            "  -o, --set KEY=VALUE   set any config key (repeatable)\n"
            "      --check-config    read the configuration, report problems, exit\n"
            "      --print-config    print the effective configuration and exit\n"
            "  -V, --version         print the version and exit\n"
            "  -h, --help            this help\n");
}

/* Builds the configuration: defaults, then the file, then the flags. */
static int load_config(struct zppd *d, struct zpp_config *c, int *nbad)
{
    char why[512];
    cfg_defaults(c);
    *nbad = 0;
    if (d->config_path[0] && cfg_load(c, d->config_path, nbad, why, sizeof why)) {
        ZLOG_E("config", why, NULL);
        return -1;
    }
    for (int i = 0; i < g_noverrides; i++) {
        char *eq = strchr(g_overrides[i], '=');
        char key[128];
        if (!eq || (size_t)(eq - g_overrides[i]) >= sizeof key) {
            ZLOG_E("config", "a flag is not key=value", "flag=%s", g_overrides[i]);
            return -1;
        }
        memcpy(key, g_overrides[i], (size_t)(eq - g_overrides[i]));
        key[eq - g_overrides[i]] = 0;
        if (cfg_set(c, key, eq + 1, why, sizeof why)) {
            ZLOG_E("config", why, "source=flag");
            return -1;
        }
    }
    if (cfg_check(c, why, sizeof why)) {
        ZLOG_E("config", why, NULL);
        return -1;
    }
    return 0;
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Closes every handle so that the loop ends. Closing the uv_signal_t
 * handles gives SIGTERM, SIGINT and SIGHUP their default action back, and
 * what follows (the backend's end: NCCL communicators, GPU contexts) can
 * take seconds: a second SIGTERM from an impatient operator or systemd
 * would kill zppd then, with a signal for an exit status, instead of the
 * clean exit 0 it is finishing. They are ignored from here on (SIGKILL
 * still works). */
static void close_all_handles(struct zppd *d)
{
    uv_walk(d->loop, close_handle, NULL);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

/* Lets the Abort RPCs that the shutdown queued reach the other nodes
 * (without it their jobs would learn of it only from the heartbeat
 * timeout), then closes every handle so the loop ends. */
#define STOP_GRACE_MS 300
static uv_timer_t g_grace;

static void on_grace(uv_timer_t *t)
{
    struct zppd *d = t->data;
    cluster_stop(d);
    close_all_handles(d);
}

void zppd_maybe_exit(struct zppd *d)
{
    static int finishing;
    if (!d->stopping || d->inflight || finishing)
        return;
    finishing = 1;
    ZLOG_I("main", "in-flight work done: closing sessions", "sessions=%u", d->nsessions);
    /* The metrics endpoint served /healthz ("stopping", 503) while the
     * calls in flight finished; its connections close here, with their own
     * callbacks, before the uv_walk below. */
    metrics_stop(d);
    job_abort_all(d, "zppd is shutting down");
    int multi = 0;
    for (struct job *j = d->jobs; j; j = j->next)
        multi |= j->multi;
    struct session *s = d->sessions;
    while (s) {
        struct session *next = s->next;
        sess_close(s, "zppd is shutting down");
        s = next;
    }
    server_drop_deferred(d);
    if (!multi) {
        cluster_stop(d);
        close_all_handles(d);
        return;
    }
    uv_timer_init(d->loop, &g_grace);
    g_grace.data = d;
    uv_timer_start(&g_grace, on_grace, STOP_GRACE_MS, 0);
}

static void begin_stop(struct zppd *d, const char *why)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    notify("STOPPING=1");
    ZLOG_I("main", "stopping", "why=%s inflight=%u", why, d->inflight);
    server_stop_listening(d);
    zppd_maybe_exit(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct zppd *d = h->data;
    if (signum == SIGHUP) {
        notify("RELOADING=1");
        struct zpp_config c;
        int nbad;
        int rc = load_config(d, &c, &nbad);
        if (rc == 0 && nbad) {
            /* a line it could not take would put that key back to its
             * default: the whole reload is refused instead (the lines are
             * in the log above) */
            ZLOG_W("main", "reload refused: the file has lines zppd cannot take; keeping the "
                           "running configuration",
                   "bad_lines=%d", nbad);
        } else if (rc == 0) {
            char stat[256];
            if (cfg_static_changes(&d->cfg, &c, stat, sizeof stat))
                ZLOG_W("main", "changed keys that take effect only at the next start",
                       "keys=%s", stat);
            cfg_apply_reloadable(&d->cfg, &c);
            zlog_setup(d->cfg.log_level, d->cfg.log_json);
            hpz_store_set_budget(d->store, d->cfg.store_budget, d->cfg.store_budget_per_tenant);
            hpz_store_set_max_entries(d->store, d->cfg.store_max_entries_per_tenant);
            hpz_store_set_share(d->store, d->cfg.hpz_share.pair, d->cfg.hpz_share.n);
            ZLOG_I("main", "configuration reloaded", "ignored_lines=%d", nbad);
        } else {
            ZLOG_W("main", "reload failed: keeping the running configuration", NULL);
        }
        notify("READY=1");
        return;
    }
    begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static uint64_t g_watchdog_us;

/* 1 (with a message) once the backend is poisoned by a sticky error. */
static int backend_fatal(struct zppd *d, char *why, size_t why_len)
{
#ifdef ZPP_HAVE_CUDA
    if (d->be == &be_cuda_ops)
        return be_cuda_fatal(d->be_state, why, why_len);
#endif
    if (d->be == &be_host_ops || d->be == &be_host_enqueue_ops)
        return be_host_fatal(why, why_len);
    return 0;
}

/* DESIGN.md: a sticky device error poisons the process; a daemon that
 * stays up serving errors is worse than one that exits. Fails every job
 * (clients get an error, not a hang), stops accepting, gives the calls in
 * flight a moment to fail and reply, then exits non-zero for systemd. */
static void check_fatal(struct zppd *d, uint64_t now)
{
    static uint64_t fatal_since;
    char why[384];
    if (!fatal_since) {
        if (!backend_fatal(d, why, sizeof why))
            return;
        fatal_since = now;
        ZLOG_E("main", "sticky device error: failing every job and exiting",
               "why=\"%s\" exit=%d", why, EXIT_FATAL_DEVICE);
        notify("STOPPING=1");
        server_stop_listening(d);
        for (struct job *j = d->jobs; j; j = j->next)
            job_abort(j, MET_ABORT_DEVICE, "zppd is exiting after a sticky device error: %s", why);
    }
    if (d->inflight == 0 || now - fatal_since > FATAL_GRACE_US) {
        ZLOG_E("main", "exiting after a sticky device error", "inflight=%u exit=%d", d->inflight,
               EXIT_FATAL_DEVICE);
        _exit(EXIT_FATAL_DEVICE);
    }
}

static void on_tick(uv_timer_t *t)
{
    struct zppd *d = t->data;
    static uint64_t last_wd, stop_started;
    job_tick(d);
    server_log_tick(zppd_now_ms());
    cluster_tick(d);
    uint64_t now = zppd_now_us();
    check_fatal(d, now);
    if (g_watchdog_us && now - last_wd >= g_watchdog_us / 2) {
        notify("WATCHDOG=1");
        last_wd = now;
    }
    if (d->stopping) {
        if (!stop_started)
            stop_started = now;
        else if (now - stop_started > (uint64_t)STOP_DEADLINE_MS * 1000) {
            ZLOG_E("main", "in-flight work did not end in time: exiting", "inflight=%u",
                   d->inflight);
            _exit(1);
        }
    }
}

/* One attempt at the GPUs: the cuda backend, or NULL with *drv (gpu_start.h)
 * and why. Tests set ZPPD_TEST_GPU_OPEN to a comma-separated list of driver
 * results that successive attempts report instead (the last one repeats;
 * no GPU is touched), so that CI checks this policy without a GPU. */
#define ZPPD_TEST_GPU_OPEN_ENV "ZPPD_TEST_GPU_OPEN"
static void *open_gpus_once(struct zppd *d, unsigned attempt, int *drv, char *why, size_t why_len)
{
    const char *fake = getenv(ZPPD_TEST_GPU_OPEN_ENV);
    if (fake && *fake) {
        const char *p = fake;
        for (unsigned i = 0; i < attempt && strchr(p, ','); i++)
            p = strchr(p, ',') + 1;
        *drv = atoi(p);
        if (*drv == 0)
            *drv = GPU_START_OTHER; /* a fake cannot open GPUs */
        snprintf(why, why_len, "%s: driver result %d", ZPPD_TEST_GPU_OPEN_ENV, *drv);
        return NULL;
    }
#ifdef ZPP_HAVE_CUDA
    return be_cuda_open(d->cfg.allow_legacy_ipc, drv, why, why_len);
#else
    (void)d;
    *drv = GPU_START_NO_DRIVER;
    snprintf(why, why_len, "this zppd was built without CUDA and NCCL");
    return NULL;
#endif
}

/* Opens the GPUs, waiting up to cuda_start_wait_ms for ones that are not
 * ready yet (gpu_start.h: an MPS server recovering from a client's fault
 * refuses new clients until all of that GPU's clients are gone). Returns
 * the backend, or NULL with *drv and why of the last attempt. */
static void *open_gpus(struct zppd *d, int *drv, char *why, size_t why_len)
{
    const uint64_t t0 = zppd_now_ms();
    int waiting = 0;
    for (unsigned attempt = 0;; attempt++) {
        if (g_early_stop) {
            snprintf(why, why_len, "stopped by a signal while waiting for the GPUs");
            return NULL;
        }
        void *be = open_gpus_once(d, attempt, drv, why, why_len);
        uint64_t elapsed = zppd_now_ms() - t0;
        if (be) {
            if (waiting)
                ZLOG_I("main", "the GPUs are ready", "waited_ms=%" PRIu64, elapsed);
            return be;
        }
        if (!gpu_start_again(*drv, elapsed, d->cfg.cuda_start_wait_ms)) {
            if (waiting)
                ZLOG_W("main", "stopped waiting for the GPUs", "waited_ms=%" PRIu64 " why=\"%s\"",
                       elapsed, why);
            return NULL;
        }
        if (!waiting) {
            char status[320];
            ZLOG_W("main", "the GPUs are not ready: waiting", "why=\"%s\" wait_ms=%u", why,
                   d->cfg.cuda_start_wait_ms);
            snprintf(status, sizeof status, "STATUS=waiting for the GPUs: %s", why);
            notify(status);
            /* systemd's start timeout then covers the rest of the wait and
             * the GPUs' own start after it (30 s), whatever
             * TimeoutStartSec= says */
            const uint64_t left_ms =
                d->cfg.cuda_start_wait_ms > elapsed ? d->cfg.cuda_start_wait_ms - elapsed : 0;
            snprintf(status, sizeof status, "EXTEND_TIMEOUT_USEC=%" PRIu64,
                     (left_ms + 30000u) * 1000u);
            notify(status);
            waiting = 1;
        }
        struct timespec ts = {0, (long)GPU_START_RETRY_MS * 1000000L};
        while (!g_early_stop && nanosleep(&ts, &ts) && errno == EINTR)
            ;
    }
}

/* backend = cuda: the GPUs or an error. auto: the GPUs; the host backend
 * only where this machine has none (no driver, no device), never in place
 * of GPUs that fail (gpu_start.h). */
static int pick_backend(struct zppd *d)
{
    const char *want = d->cfg.backend;
    if (d->cfg.fault_inject[0] && strcmp(want, "host")) {
        ZLOG_E("main", "fault_inject is a test switch of the host backend: set backend = host",
               "backend=%s", want);
        return -1;
    }
    if (strcmp(want, "host")) {
        char why[256];
        int drv = GPU_START_OTHER;
        void *be = open_gpus(d, &drv, why, sizeof why);
#ifdef ZPP_HAVE_CUDA
        if (be) {
            d->be = &be_cuda_ops;
            d->be_state = be;
            d->backend_name = "cuda";
            return 0;
        }
#else
        (void)be; /* a build without CUDA opens no GPU */
#endif
        if (g_early_stop)
            return -1; /* main says why */
        enum gpu_start_class c = gpu_start_classify(drv);
        if (!strcmp(want, "cuda") || c != GPU_START_NONE) {
            const char *hint = c == GPU_START_RETRY ? "not ready within cuda_start_wait_ms"
                               : strcmp(want, "cuda")
                                   ? "auto uses the host backend only where no GPU is visible; "
                                     "backend = host runs without the GPUs"
                                   : "";
            ZLOG_E("main", "the cuda backend cannot start", "why=\"%s\" backend=%s hint=\"%s\"",
                   why, want, hint);
            return -1;
        }
        ZLOG_I("main", "no usable GPU: using the host backend", "why=\"%s\"", why);
    }
    d->be = &be_host_ops;
    if (be_env_switch(BE_HOST_ENQUEUE_ENV, 0)) {
        d->be = &be_host_enqueue_ops;
        ZLOG_W("main", "the host backend runs as a device backend does (test switch)", "%s=1",
               BE_HOST_ENQUEUE_ENV);
    }
    d->be_state = NULL;
    d->backend_name = "host";
    if (d->cfg.fault_inject[0]) {
        uint64_t n = 0;
        cfg_fault_after_calls(d->cfg.fault_inject, &n); /* checked by cfg_set */
        be_host_fault_inject(n);
        ZLOG_W("main", "fault injection armed (test switch)", "fault_inject=%s",
               d->cfg.fault_inject);
    }
    return 0;
}

/* Busy polling. A client's small call is two hops across processes, and
 * each hop whose receiver sleeps in the kernel costs the wake-up: on an
 * H100 under MPS (bench/results/ipc-sync-2026-11-23-h100-spin.txt) a client
 * -> daemon -> client round trip with interprocess events took 39-41 us
 * p50 with sleeping receivers and 26-28 us with polling ones, a bare socket
 * round trip 11 us against 4. So for busy_poll_us after each request or
 * reply (zppd_busy) the loop polls (UV_RUN_NOWAIT, no sleep) before it
 * sleeps in epoll again: one core kept busy while calls keep coming, none
 * when they stop. busy_poll_us = 0 sleeps always. */
static void run_loop(struct zppd *d)
{
    for (;;) {
        if (!uv_run(d->loop, UV_RUN_ONCE))
            return;
        while (d->cfg.busy_poll_us && uv_hrtime() < d->busy_until)
            if (!uv_run(d->loop, UV_RUN_NOWAIT))
                return;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"socket", required_argument, 0, 's'},
        {"backend", required_argument, 0, 'b'}, {"log-level", required_argument, 0, 'l'},
        {"set", required_argument, 0, 'o'},     {"check-config", no_argument, 0, 'C'},
        {"print-config", no_argument, 0, 'P'},  {"version", no_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    static struct zppd d_storage;
    struct zppd *d = &d_storage;
    d->listen_fd = d->spare_fd = -1;
    int check = 0, print = 0, opt;
    static char flagbuf[4][300];
    while ((opt = getopt_long(argc, argv, "c:s:b:l:o:Vh", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (opt) {
        case 'c': snprintf(d->config_path, sizeof d->config_path, "%s", optarg); break;
        case 's': key = "socket"; break;
        case 'b': key = "backend"; break;
        case 'l': key = "log_level"; break;
        case 'o':
            if (g_noverrides == MAX_OVERRIDES) {
                fprintf(stderr, "zppd: too many -o flags\n");
                return 2;
            }
            g_overrides[g_noverrides++] = optarg;
            break;
        case 'C': check = 1; break;
        case 'P': print = 1; break;
        case 'V': printf("zppd %s\n", ZPPD_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (key) {
            if (g_noverrides == MAX_OVERRIDES) {
                fprintf(stderr, "zppd: too many flags\n");
                return 2;
            }
            char *buf = flagbuf[opt == 's' ? 0 : opt == 'b' ? 1 : 2];
            snprintf(buf, 300, "%s=%s", key, optarg);
            g_overrides[g_noverrides++] = buf;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }

    int nbad = 0;
    if (load_config(d, &d->cfg, &nbad))
        return 1;
    zlog_setup(d->cfg.log_level, d->cfg.log_json);
    if (print) {
        cfg_print(&d->cfg, stdout);
        return 0;
    }
    if (check) {
        printf("%s: %d problem line(s)\n", d->config_path[0] ? d->config_path : "(defaults)",
               nbad);
        return nbad ? 1 : 0;
    }

    char threads[16];
    snprintf(threads, sizeof threads, "%u", d->cfg.host_threads);
    setenv("UV_THREADPOOL_SIZE", threads, 1); /* before the loop's first work item */
    signal(SIGPIPE, SIG_IGN);

    catch_early_signals();

    d->loop = uv_default_loop();
    d->start_ms = zppd_now_ms();
    d->uid = (uint32_t)getuid();
    if (pick_backend(d)) {
        if (!g_early_stop)
            return 1;
        ZLOG_I("main", "stopped before start", "why=%s",
               g_early_stop == SIGTERM ? "SIGTERM" : "SIGINT");
        return 0;
    }
    d->store = hpz_store_new(d->be, d->be_state, d->cfg.store_budget,
                             d->cfg.store_budget_per_tenant);
    if (!d->store) {
        ZLOG_E("main", "cannot create the hpZ store", NULL);
        return 1;
    }
    hpz_store_set_share(d->store, d->cfg.hpz_share.pair, d->cfg.hpz_share.n);
    hpz_store_set_max_entries(d->store, d->cfg.store_max_entries_per_tenant);
    if (server_listen(d) || server_start_accepting(d))
        return 1;
    if (metrics_start(d) || cluster_start(d)) {
        server_stop_listening(d);
        return 1;
    }

    uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(d->loop, sigs[i]);
        sigs[i]->data = d;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
    uv_timer_init(d->loop, &d->tick);
    d->tick.data = d;
    uv_timer_start(&d->tick, on_tick, TICK_MS, TICK_MS);
#ifdef ZPP_HAVE_SYSTEMD
    if (sd_watchdog_enabled(0, &g_watchdog_us) <= 0)
        g_watchdog_us = 0;
#endif

    ZLOG_I("main", "zppd ready", "version=%s backend=%s socket=%s pid=%d", ZPPD_VERSION,
           d->backend_name, d->cfg.socket, (int)getpid());
    notify("READY=1");
    /* What came before the handlers above: through on_signal, as usual. */
    if (g_early_hup)
        on_signal(&d->sig_hup, SIGHUP);
    if (g_early_stop)
        on_signal(g_early_stop == SIGTERM ? &d->sig_term : &d->sig_int, g_early_stop);
    run_loop(d);

    int rc = uv_loop_close(d->loop);
    hpz_store_free(d->store);
    metrics_free(d);
    cluster_free(d);
#ifdef ZPP_HAVE_CUDA
    if (d->be_state)
        be_cuda_close(d->be_state);
#endif
    if (rc)
        ZLOG_W("main", "loop closed with handles open", "rc=%d", rc);
    ZLOG_I("main", "zppd stopped", NULL);
    return 0;
}
