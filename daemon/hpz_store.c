/*
 * hpz_store.c — the hpZ secondary partitions: entries keyed by (tenant, job,
 * key), reference counted, under a byte budget per device and per tenant.
 * See hpz_store.h for the life of an entry.
 *
 * Every entry (pending, live, or unlinked but still pinned) sits on one list
 * so the byte accounting and drop_job see all of them. The list is walked
 * for lookups: a job holds one entry per layer at most, a few hundred; a
 * hash index is the obvious next step if that ever shows in a profile.
 */
#include "hpz_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zpp.h"

enum hpz_state {
    HPZ_PENDING = 0,  /* reserved by a call in flight, invisible to lookups */
    HPZ_LIVE = 1,     /* the entry of its key */
    HPZ_UNLINKED = 2, /* invalidated/replaced while pinned: freed at unpin */
    HPZ_DEAD = 3      /* pending, but its job was dropped */
};

struct hpz_entry {
    struct hpz_entry *prev, *next;
    enum hpz_state state;
    int refs; /* the store's link (LIVE/PENDING) + one per pin */
    /* owner */
    uint32_t tenant;
    const void *job;
    char key[HPZ_KEY_MAX + 1];
    /* data */
    uint64_t count;
    int dtype;
    uint64_t slice;
    uint64_t slot_bytes;
    int nslots;
    int *devices;
    void **bufs;
};

struct hpz_store {
    const struct be_ops *ops;
    void *backend;
    uint64_t budget_device, budget_tenant;
    struct hpz_entry *head;
    uint64_t bytes_used;
    uint64_t device_bytes[HPZ_MAX_DEVICES];
    uint64_t live_entries;
    uint64_t hits, misses;
};

/* ---- helpers -------------------------------------------------------- */

static void entry_unlink_list(struct hpz_store *st, struct hpz_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        st->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->prev = e->next = NULL;
}

/* Frees the buffers and the entry, and gives its bytes back. */
static void entry_destroy(struct hpz_store *st, struct hpz_entry *e)
{
    entry_unlink_list(st, e);
    for (int s = 0; s < e->nslots; s++) {
        if (e->bufs && e->bufs[s]) {
            st->ops->store_free(st->backend, e->devices[s], e->bufs[s]);
            st->device_bytes[e->devices[s]] -= e->slot_bytes;
            st->bytes_used -= e->slot_bytes;
        }
    }
    free(e->bufs);
    free(e->devices);
    free(e);
}

static void entry_release(struct hpz_store *st, struct hpz_entry *e)
{
    if (--e->refs == 0)
        entry_destroy(st, e);
}

/* Takes a LIVE entry out of its key: it is freed now or at its last unpin. */
static void entry_retire(struct hpz_store *st, struct hpz_entry *e)
{
    e->state = HPZ_UNLINKED;
    st->live_entries--;
    entry_release(st, e);
}

static struct hpz_entry *find_live(const struct hpz_store *st, uint32_t tenant, const void *job,
                                   const char *key)
{
    for (struct hpz_entry *e = st->head; e; e = e->next)
        if (e->state == HPZ_LIVE && e->tenant == tenant && e->job == job &&
            strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------ */

struct hpz_store *hpz_store_new(const struct be_ops *ops, void *backend, uint64_t budget_per_device,
                                uint64_t budget_per_tenant)
{
    if (!ops || !ops->store_alloc || !ops->store_free)
        return NULL;
    struct hpz_store *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->ops = ops;
    st->backend = backend;
    st->budget_device = budget_per_device;
    st->budget_tenant = budget_per_tenant;
    return st;
}

void hpz_store_free(struct hpz_store *st)
{
    if (!st)
        return;
    while (st->head)
        entry_destroy(st, st->head);
    free(st);
}

void hpz_store_set_budget(struct hpz_store *st, uint64_t per_device, uint64_t per_tenant)
{
    st->budget_device = per_device;
    st->budget_tenant = per_tenant;
}

void hpz_store_drop_job(struct hpz_store *st, const void *job)
{
    struct hpz_entry *e = st->head;
    while (e) {
        struct hpz_entry *next = e->next; /* e may be freed below */
        if (e->job == job) {
            if (e->state == HPZ_LIVE)
                entry_retire(st, e);
            else if (e->state == HPZ_PENDING)
                e->state = HPZ_DEAD;
        }
        e = next;
    }
}

/* ---- statistics ----------------------------------------------------- */

void hpz_store_stats(const struct hpz_store *st, uint64_t *bytes_used, uint64_t *entries,
                     uint64_t *hits, uint64_t *misses)
{
    if (bytes_used)
        *bytes_used = st->bytes_used;
    if (entries)
        *entries = st->live_entries;
    if (hits)
        *hits = st->hits;
    if (misses)
        *misses = st->misses;
}

uint64_t hpz_store_job_bytes(const struct hpz_store *st, const void *job)
{
    uint64_t b = 0;
    for (const struct hpz_entry *e = st->head; e; e = e->next)
        if (e->job == job)
            b += hpz_entry_bytes(e);
    return b;
}

uint64_t hpz_store_device_bytes(const struct hpz_store *st, int device)
{
    return device >= 0 && device < HPZ_MAX_DEVICES ? st->device_bytes[device] : 0;
}

uint64_t hpz_store_tenant_bytes(const struct hpz_store *st, uint32_t tenant)
{
    uint64_t b = 0;
    for (const struct hpz_entry *e = st->head; e; e = e->next)
        if (e->tenant == tenant)
            b += hpz_entry_bytes(e);
    return b;
}

/* ---- reserve / commit / rollback ------------------------------------ */

int hpz_store_reserve(struct hpz_store *st, const struct hpz_spec *sp, struct hpz_entry **out,
                      char *msg, size_t msg_len)
{
    int rc = 0;
    struct hpz_entry *e = NULL;
    uint64_t need_dev[HPZ_MAX_DEVICES] = {0};
    size_t esize = zk_dtype_size(sp->dtype);
    size_t klen = sp->key ? strlen(sp->key) : 0;
    const char *jid = sp->job_id ? sp->job_id : "?";

    if (klen == 0 || klen > HPZ_KEY_MAX || esize == 0 || sp->nslots < 1 || sp->slice == 0 ||
        sp->slice > UINT64_MAX / esize) {
        snprintf(msg, msg_len, "hpZ store: bad entry (key length %zu, dtype %d, %d slots)", klen,
                 sp->dtype, sp->nslots);
        rc = ZPP_EINVAL;
        goto fail;
    }
    uint64_t slot_bytes = sp->slice * esize;
    uint64_t total = 0;
    for (int s = 0; s < sp->nslots; s++) {
        int d = sp->devices ? sp->devices[s] : s;
        if (d < 0 || d >= HPZ_MAX_DEVICES) {
            snprintf(msg, msg_len, "hpZ store: device index %d out of range", d);
            rc = ZPP_EINVAL;
            goto fail;
        }
        need_dev[d] += slot_bytes;
        total += slot_bytes;
    }
    /* Budgets first: nothing is allocated for a reserve that cannot fit. */
    for (int d = 0; d < HPZ_MAX_DEVICES; d++) {
        if (need_dev[d] && st->budget_device &&
            st->device_bytes[d] + need_dev[d] > st->budget_device) {
            snprintf(msg, msg_len,
                     "hpZ store budget exceeded on device %d: key '%s' of job %s needs %llu "
                     "bytes, %llu of %llu in use",
                     d, sp->key, jid, (unsigned long long)need_dev[d],
                     (unsigned long long)st->device_bytes[d],
                     (unsigned long long)st->budget_device);
            rc = ZPP_ELIMIT;
            goto fail;
        }
    }
    uint64_t tb = hpz_store_tenant_bytes(st, sp->tenant);
    if (st->budget_tenant && tb + total > st->budget_tenant) {
        snprintf(msg, msg_len,
                 "hpZ store budget of tenant %u exceeded: key '%s' of job %s needs %llu bytes, "
                 "%llu of %llu in use",
                 sp->tenant, sp->key, jid, (unsigned long long)total, (unsigned long long)tb,
                 (unsigned long long)st->budget_tenant);
        rc = ZPP_ELIMIT;
        goto fail;
    }

    e = calloc(1, sizeof *e);
    if (!e || !(e->bufs = calloc((size_t)sp->nslots, sizeof *e->bufs)) ||
        !(e->devices = calloc((size_t)sp->nslots, sizeof *e->devices))) {
        snprintf(msg, msg_len, "hpZ store: out of memory");
        rc = ZPP_ENOMEM;
        goto fail;
    }
    e->state = HPZ_PENDING;
    e->refs = 1;
    e->tenant = sp->tenant;
    e->job = sp->job;
    memcpy(e->key, sp->key, klen + 1);
    e->count = sp->count;
    e->dtype = sp->dtype;
    e->slice = sp->slice;
    e->slot_bytes = slot_bytes;
    e->nslots = sp->nslots;
    /* On the list before allocating: entry_destroy then accounts exactly. */
    e->next = st->head;
    if (st->head)
        st->head->prev = e;
    st->head = e;
    for (int s = 0; s < sp->nslots; s++) {
        e->devices[s] = sp->devices ? sp->devices[s] : s;
        int arc = st->ops->store_alloc(st->backend, e->devices[s], (size_t)slot_bytes, &e->bufs[s]);
        if (arc != 0 || !e->bufs[s]) {
            e->bufs[s] = NULL;
            snprintf(msg, msg_len, "hpZ store: allocating %llu bytes on device %d failed",
                     (unsigned long long)slot_bytes, e->devices[s]);
            rc = arc ? arc : ZPP_ENOMEM;
            goto fail;
        }
        st->device_bytes[e->devices[s]] += slot_bytes;
        st->bytes_used += slot_bytes;
    }
    *out = e;
    return 0;

fail:
    if (e) {
        if (e->bufs && e->devices)
            entry_destroy(st, e); /* safe: on the list only once allocated */
        else {
            free(e->bufs);
            free(e->devices);
            free(e);
        }
    }
    return rc;
}

int hpz_store_commit(struct hpz_store *st, struct hpz_entry *e)
{
    if (e->state == HPZ_DEAD) {
        entry_release(st, e);
        return ZPP_EABORTED;
    }
    struct hpz_entry *old = find_live(st, e->tenant, e->job, e->key);
    if (old)
        entry_retire(st, old);
    e->state = HPZ_LIVE;
    st->live_entries++;
    return 0;
}

void hpz_store_rollback(struct hpz_store *st, struct hpz_entry *e)
{
    if (!e)
        return;
    entry_release(st, e);
}

/* ---- lookup / pin / invalidate -------------------------------------- */

int hpz_store_lookup(struct hpz_store *st, uint32_t tenant, const void *job, const char *key,
                     struct hpz_entry **out)
{
    struct hpz_entry *e = key ? find_live(st, tenant, job, key) : NULL;
    if (!e) {
        st->misses++;
        return ZPP_ENOENT;
    }
    st->hits++;
    e->refs++;
    *out = e;
    return 0;
}

void hpz_store_unpin(struct hpz_store *st, struct hpz_entry *e)
{
    if (!e)
        return;
    entry_release(st, e);
}

int hpz_store_invalidate(struct hpz_store *st, uint32_t tenant, const void *job, const char *key)
{
    int n = 0;
    struct hpz_entry *e = st->head;
    while (e) {
        struct hpz_entry *next = e->next;
        if (e->state == HPZ_LIVE && e->tenant == tenant && e->job == job &&
            (!key || strcmp(e->key, key) == 0)) {
            entry_retire(st, e);
            n++;
        }
        e = next;
    }
    return n;
}

/* ---- views ---------------------------------------------------------- */

uint64_t hpz_entry_count(const struct hpz_entry *e)
{
    return e->count;
}

int hpz_entry_dtype(const struct hpz_entry *e)
{
    return e->dtype;
}

uint64_t hpz_entry_slice(const struct hpz_entry *e)
{
    return e->slice;
}

int hpz_entry_nslots(const struct hpz_entry *e)
{
    return e->nslots;
}

uint64_t hpz_entry_bytes(const struct hpz_entry *e)
{
    return e->slot_bytes * (uint64_t)e->nslots;
}

void *hpz_entry_buf(const struct hpz_entry *e, int s)
{
    return s >= 0 && s < e->nslots ? e->bufs[s] : NULL;
}
