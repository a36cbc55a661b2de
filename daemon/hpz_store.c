/*
 * hpz_store.c — the hpZ secondary partitions: entries keyed by (tenant, job,
 * key), reference counted, under a byte budget per device and per tenant.
 * See hpz_store.h for the life of an entry.
 *
 * Every entry (pending, live, or unlinked but still pinned) sits on one list
 * so the byte accounting and drop_job see all of them. The list is walked
 * for lookups: a job holds one entry per layer at most, a few hundred; a
 * hash index is the obvious next step if that ever shows in a profile.
 *
 * Shared replicas live on the same list, with shared = 1, job NULL once
 * live, and the jobs attached to them in a small array. Their LRU age is a
 * store-wide tick stamped at every use (publish, dedup, read).
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
    const void *job; /* shared: the publishing job while pending, then NULL */
    char key[HPZ_KEY_MAX + 1];
    /* sharing (shared = 0: a job's private entry) */
    int shared;
    int local, lidx0; /* ranks per node, local index of slot 0 */
    const void **att; /* attached jobs */
    int natt, catt;
    uint64_t last_used; /* st->tick at the last use */
    int evict_mark;     /* make_room's scratch */
    /* data */
    uint64_t count;
    int dtype;
    uint64_t slice;
    uint64_t slot_bytes; /* the slice's bytes */
    int nslots;
    int *devices;
    void **bufs;
    uint64_t *charges; /* per slot: what its allocation takes (be_ops.store_size) */
};

struct hpz_store {
    const struct be_ops *ops;
    void *backend;
    uint64_t budget_device, budget_tenant;
    uint32_t max_entries_tenant; /* 0: no cap */
    struct hpz_entry *head;
    uint64_t bytes_used;
    uint64_t device_bytes[HPZ_MAX_DEVICES];
    uint64_t live_entries;
    uint64_t hits, misses;
    /* sharing */
    uint32_t share[HPZ_SHARE_MAX][2];
    uint32_t nshare;
    uint64_t tick;
    uint64_t published, deduplicated, reads, refused, evicted;
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
            st->device_bytes[e->devices[s]] -= e->charges[s];
            st->bytes_used -= e->charges[s];
        }
    }
    free(e->bufs);
    free(e->charges);
    free(e->devices);
    free(e->att);
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
        if (e->state == HPZ_LIVE && !e->shared && e->tenant == tenant && e->job == job &&
            strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static int spec_device(const struct hpz_spec *sp, int s)
{
    return sp->devices ? sp->devices[s] : s;
}

/* 1 if shared entry e holds sp's tensor in sp's layout. */
static int layout_matches(const struct hpz_entry *e, const struct hpz_spec *sp)
{
    if (e->count != sp->count || e->dtype != sp->dtype || e->slice != sp->slice ||
        e->nslots != sp->nslots || e->local != sp->local ||
        (sp->local > 0 && e->lidx0 != sp->rank0 % sp->local))
        return 0;
    for (int s = 0; s < e->nslots; s++)
        if (e->devices[s] != spec_device(sp, s))
            return 0;
    return 1;
}

/* An idle shared replica: live, no job attached, no call pinning it. */
static int evictable(const struct hpz_entry *e)
{
    return e->shared && e->state == HPZ_LIVE && e->natt == 0 && e->refs == 1;
}

static int att_find(const struct hpz_entry *e, const void *job)
{
    for (int i = 0; i < e->natt; i++)
        if (e->att[i] == job)
            return i;
    return -1;
}

/* Records job as attached to e (idempotent). */
static int att_add(struct hpz_entry *e, const void *job)
{
    if (att_find(e, job) >= 0)
        return 0;
    if (e->natt == e->catt) {
        int cap = e->catt ? e->catt * 2 : 4;
        const void **a = realloc(e->att, (size_t)cap * sizeof *a);
        if (!a)
            return ZPP_ENOMEM;
        e->att = a;
        e->catt = cap;
    }
    e->att[e->natt++] = job;
    return 0;
}

static void att_remove(struct hpz_entry *e, int i)
{
    e->att[i] = e->att[--e->natt];
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

void hpz_store_set_max_entries(struct hpz_store *st, uint32_t per_tenant)
{
    st->max_entries_tenant = per_tenant;
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
        } else if (e->shared && e->state == HPZ_LIVE) {
            int i = att_find(e, job);
            if (i >= 0)
                att_remove(e, i); /* the replica stays, idle if it was the last */
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

uint64_t hpz_store_tenant_entries(const struct hpz_store *st, uint32_t tenant)
{
    uint64_t n = 0;
    for (const struct hpz_entry *e = st->head; e; e = e->next)
        n += e->tenant == tenant && e->state == HPZ_LIVE;
    return n;
}

/* ---- eviction ------------------------------------------------------ */

/* 1 if e holds bytes on device d. */
static int on_device(const struct hpz_entry *e, int d)
{
    for (int s = 0; s < e->nslots; s++)
        if (e->devices[s] == d)
            return 1;
    return 0;
}

/* Entries of any state a tenant holds (what store_max_entries_per_tenant
 * caps), as a reserve of sp counts them: a private key stored again
 * replaces its live entry at the commit, so that one does not count (the
 * cap refuses a call that would keep one entry more, and this one keeps
 * as many; the budgets, which bound memory, do count both). */
static uint32_t tenant_all_entries(const struct hpz_store *st, const struct hpz_spec *sp)
{
    uint32_t n = 0;
    for (const struct hpz_entry *x = st->head; x; x = x->next)
        n += x->tenant == sp->tenant;
    if (n && !sp->shared && find_live(st, sp->tenant, sp->job, sp->key))
        n--;
    return n;
}

/* Evicts idle shared replicas, least recently used first, until a reserve
 * of need_dev[] bytes per device (total for tenant, and one entry more)
 * fits both budgets and the tenant's entry cap — but only if it then fits:
 * otherwise nothing is evicted and the caller's checks fail as before.
 * Candidates are chosen on a copy of the accounting, then evicted together.
 * The entry cap counts the tenant's idle replicas too, so without evicting
 * for it a tenant whose jobs had published store_max_entries_per_tenant
 * replicas could never store anything again: nothing else evicts an idle
 * replica when the byte budgets have room (an audit). */
static void make_room(struct hpz_store *st, const struct hpz_spec *sp, const uint64_t *need_dev,
                      uint64_t total)
{
    uint64_t dev[HPZ_MAX_DEVICES];
    uint32_t tenant = sp->tenant;
    uint64_t tb = hpz_store_tenant_bytes(st, tenant);
    uint32_t tn = st->max_entries_tenant ? tenant_all_entries(st, sp) : 0;
    int marked = 0;
    memcpy(dev, st->device_bytes, sizeof dev);
    for (;;) {
        int bad_dev = -1, bad_tenant = 0;
        for (int d = 0; d < HPZ_MAX_DEVICES && bad_dev < 0; d++)
            if (need_dev[d] && st->budget_device && dev[d] + need_dev[d] > st->budget_device)
                bad_dev = d;
        if (bad_dev < 0 && ((st->budget_tenant && tb + total > st->budget_tenant) ||
                            (st->max_entries_tenant && tn >= st->max_entries_tenant)))
            bad_tenant = 1;
        if (bad_dev < 0 && !bad_tenant)
            break;
        struct hpz_entry *lru = NULL;
        for (struct hpz_entry *e = st->head; e; e = e->next)
            if (evictable(e) && !e->evict_mark &&
                (bad_dev >= 0 ? on_device(e, bad_dev) : e->tenant == tenant) &&
                (!lru || e->last_used < lru->last_used))
                lru = e;
        if (!lru) { /* cannot fit: evict nothing */
            for (struct hpz_entry *e = st->head; e; e = e->next)
                e->evict_mark = 0;
            return;
        }
        lru->evict_mark = 1;
        marked++;
        for (int s = 0; s < lru->nslots; s++)
            dev[lru->devices[s]] -= lru->charges[s];
        if (lru->tenant == tenant) {
            tb -= hpz_entry_bytes(lru);
            if (tn)
                tn--;
        }
    }
    struct hpz_entry *e = st->head;
    while (e && marked) {
        struct hpz_entry *next = e->next;
        if (e->evict_mark) {
            e->evict_mark = 0;
            marked--;
            st->evicted++;
            entry_retire(st, e); /* idle: freed now */
        }
        e = next;
    }
}

/* ---- reserve / commit / rollback ------------------------------------ */

/* What a slice of `bytes` on device d is charged: what the backend's
 * allocation really takes. Before session 22 the store charged the slice's
 * bytes while the cuda backend mapped a 2 MiB granule per slot, so a
 * tenant could hold 2 MiB of every GPU per few bytes charged and fill the
 * node with count-1 all-gathers under new keys (an audit). */
static uint64_t slot_charge(const struct hpz_store *st, int d, uint64_t bytes)
{
    if (!st->ops->store_size)
        return bytes;
    size_t real = st->ops->store_size(st->backend, d, (size_t)bytes);
    return real > bytes ? real : bytes;
}

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
        uint64_t charge = slot_charge(st, d, slot_bytes);
        need_dev[d] += charge;
        total += charge;
    }
    if (sp->shared && (!hpz_content_key_ok(sp->key) || sp->local < 1 || sp->rank0 < 0)) {
        snprintf(msg, msg_len, "hpZ store: bad shared replica (key '%.80s', %d ranks per node)",
                 sp->key, sp->local);
        rc = ZPP_EINVAL;
        goto fail;
    }
    /* Budgets first: nothing is allocated for a reserve that cannot fit.
     * Idle shared replicas make room (bytes, or the tenant's entry cap)
     * when evicting them is enough. */
    make_room(st, sp, need_dev, total);
    for (int d = 0; d < HPZ_MAX_DEVICES; d++) {
        if (need_dev[d] && st->budget_device &&
            st->device_bytes[d] + need_dev[d] > st->budget_device) {
            snprintf(msg, msg_len,
                     "hpZ store budget exceeded on device %d (store_budget): key '%s' of job %s "
                     "needs %llu bytes, %llu of %llu in use",
                     d, sp->key, jid, (unsigned long long)need_dev[d],
                     (unsigned long long)st->device_bytes[d],
                     (unsigned long long)st->budget_device);
            rc = ZPP_ELIMIT;
            goto fail;
        }
    }
    if (st->max_entries_tenant) {
        uint32_t n = tenant_all_entries(st, sp);
        if (n >= st->max_entries_tenant) {
            snprintf(msg, msg_len,
                     "hpZ store: tenant %u holds %u entries (store_max_entries_per_tenant): key "
                     "'%s' of job %s refused",
                     sp->tenant, n, sp->key, jid);
            rc = ZPP_ELIMIT;
            goto fail;
        }
    }
    uint64_t tb = hpz_store_tenant_bytes(st, sp->tenant);
    if (st->budget_tenant && tb + total > st->budget_tenant) {
        snprintf(msg, msg_len,
                 "hpZ store budget of tenant %u exceeded (store_budget_per_tenant): key '%s' of "
                 "job %s needs %llu bytes, %llu of %llu in use",
                 sp->tenant, sp->key, jid, (unsigned long long)total, (unsigned long long)tb,
                 (unsigned long long)st->budget_tenant);
        rc = ZPP_ELIMIT;
        goto fail;
    }

    e = calloc(1, sizeof *e);
    if (!e || !(e->bufs = calloc((size_t)sp->nslots, sizeof *e->bufs)) ||
        !(e->devices = calloc((size_t)sp->nslots, sizeof *e->devices)) ||
        !(e->charges = calloc((size_t)sp->nslots, sizeof *e->charges))) {
        snprintf(msg, msg_len, "hpZ store: out of memory");
        rc = ZPP_ENOMEM;
        goto fail;
    }
    e->state = HPZ_PENDING;
    e->refs = 1;
    e->tenant = sp->tenant;
    e->job = sp->job;
    memcpy(e->key, sp->key, klen + 1);
    if (sp->shared) {
        e->shared = 1;
        e->local = sp->local;
        e->lidx0 = sp->rank0 % sp->local;
    }
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
        e->charges[s] = slot_charge(st, e->devices[s], slot_bytes);
        int arc = st->ops->store_alloc(st->backend, e->devices[s], (size_t)slot_bytes, &e->bufs[s]);
        if (arc != 0 || !e->bufs[s]) {
            e->bufs[s] = NULL;
            snprintf(msg, msg_len, "hpZ store: allocating %llu bytes on device %d failed",
                     (unsigned long long)slot_bytes, e->devices[s]);
            rc = arc ? arc : ZPP_ENOMEM;
            goto fail;
        }
        st->device_bytes[e->devices[s]] += e->charges[s];
        st->bytes_used += e->charges[s];
    }
    *out = e;
    return 0;

fail:
    if (e) {
        if (e->bufs && e->devices && e->charges)
            entry_destroy(st, e); /* safe: on the list only once allocated */
        else {
            free(e->bufs);
            free(e->devices);
            free(e->charges);
            free(e);
        }
    }
    return rc;
}

/* A live replica of e's key and layout that e's tenant may read, or NULL. */
static struct hpz_entry *find_replica(const struct hpz_store *st, const struct hpz_spec *sp,
                                      int *denied, int *other_layout)
{
    struct hpz_entry *own = NULL, *shared = NULL;
    for (struct hpz_entry *e = st->head; e; e = e->next) {
        if (!e->shared || e->state != HPZ_LIVE || strcmp(e->key, sp->key) != 0)
            continue;
        if (!hpz_store_may_read(st, sp->tenant, e->tenant)) {
            if (denied)
                *denied = 1;
            continue;
        }
        if (!layout_matches(e, sp)) {
            if (other_layout)
                *other_layout = 1;
            continue;
        }
        if (e->tenant == sp->tenant && !own)
            own = e;
        else if (!shared)
            shared = e;
    }
    return own ? own : shared; /* the tenant's own copy first */
}

static struct hpz_spec spec_of(const struct hpz_entry *e, const void *job)
{
    struct hpz_spec sp = {.tenant = e->tenant,
                          .job = job,
                          .key = e->key,
                          .count = e->count,
                          .dtype = e->dtype,
                          .slice = e->slice,
                          .nslots = e->nslots,
                          .devices = e->devices,
                          .shared = 1,
                          .local = e->local,
                          .rank0 = e->lidx0};
    return sp;
}

static int commit_shared(struct hpz_store *st, struct hpz_entry *e)
{
    const void *job = e->job;
    struct hpz_spec sp = spec_of(e, job);
    struct hpz_entry *there = find_replica(st, &sp, NULL, NULL);
    if (there) { /* published meanwhile by another call: keep one copy */
        entry_release(st, e);
        there->last_used = ++st->tick;
        st->deduplicated++;
        return att_add(there, job);
    }
    /* Attached first: a replica that goes live must have its publisher
     * attached, or the caller would be told "not published" about a live,
     * readable replica counted against its budget (an audit). */
    if (att_add(e, job) != 0) {
        entry_release(st, e);
        return ZPP_ENOMEM;
    }
    e->state = HPZ_LIVE;
    e->job = NULL;
    e->last_used = ++st->tick;
    st->live_entries++;
    st->published++;
    return 0;
}

int hpz_store_commit(struct hpz_store *st, struct hpz_entry *e)
{
    if (e->state == HPZ_DEAD) {
        entry_release(st, e);
        return ZPP_EABORTED;
    }
    if (e->shared)
        return commit_shared(st, e);
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
        if (e->state == HPZ_LIVE && !e->shared && e->tenant == tenant && e->job == job &&
            (!key || strcmp(e->key, key) == 0)) {
            entry_retire(st, e);
            n++;
        }
        e = next;
    }
    return n;
}

/* ---- shared replicas ------------------------------------------------ */

int hpz_content_key_ok(const char *key)
{
    size_t plen = sizeof HPZ_CONTENT_PREFIX - 1;
    if (!key || strlen(key) != HPZ_CONTENT_KEY_LEN || strncmp(key, HPZ_CONTENT_PREFIX, plen) != 0)
        return 0;
    for (const char *p = key + plen; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

void hpz_store_set_share(struct hpz_store *st, const uint32_t (*pairs)[2], uint32_t n)
{
    if (n > HPZ_SHARE_MAX)
        n = HPZ_SHARE_MAX;
    for (uint32_t i = 0; i < n; i++) {
        st->share[i][0] = pairs[i][0];
        st->share[i][1] = pairs[i][1];
    }
    st->nshare = n;
}

int hpz_store_may_read(const struct hpz_store *st, uint32_t reader, uint32_t owner)
{
    if (reader == owner)
        return 1;
    for (uint32_t i = 0; i < st->nshare; i++)
        if (st->share[i][0] == owner && st->share[i][1] == reader)
            return 1;
    return 0;
}

int hpz_store_find_shared(struct hpz_store *st, const struct hpz_spec *sp, int attach,
                          struct hpz_entry **out, char *msg, size_t msg_len)
{
    int denied = 0, other_layout = 0;
    const char *jid = sp->job_id ? sp->job_id : "?";
    struct hpz_entry *e = sp->key ? find_replica(st, sp, &denied, &other_layout) : NULL;
    if (!e) {
        if (other_layout) {
            snprintf(msg, msg_len,
                     "shared hpZ replica %.80s is published, but not for %llu elements of "
                     "dtype %d on this job's devices and %d ranks per node",
                     sp->key, (unsigned long long)sp->count, sp->dtype, sp->local);
            return ZPP_EINVAL;
        }
        if (denied) {
            st->refused += attach ? 1 : 0; /* a publish makes its own copy instead */
            snprintf(msg, msg_len,
                     "shared hpZ replica %.80s belongs to another tenant, which does not share "
                     "it with tenant %u (config hpz_share)",
                     sp->key ? sp->key : "", sp->tenant);
            return ZPP_EPERM;
        }
        snprintf(msg, msg_len, "shared hpZ replica %.80s is not published (job %.48s)",
                 sp->key ? sp->key : "", jid);
        return ZPP_ENOENT;
    }
    if (attach && att_add(e, sp->job) != 0) {
        snprintf(msg, msg_len, "hpZ store: out of memory attaching job %.48s", jid);
        return ZPP_ENOMEM;
    }
    e->refs++;
    e->last_used = ++st->tick;
    if (attach)
        st->reads++;
    *out = e;
    return 0;
}

int hpz_store_attach(struct hpz_store *st, struct hpz_entry *e, const void *job)
{
    if (!e->shared || e->state != HPZ_LIVE)
        return ZPP_ENOENT;
    int rc = att_add(e, job);
    if (rc == 0) {
        e->last_used = ++st->tick;
        st->deduplicated++;
    }
    return rc;
}

int hpz_store_detach(struct hpz_store *st, const void *job, const char *key)
{
    int n = 0;
    for (struct hpz_entry *e = st->head; e; e = e->next) {
        if (!e->shared || e->state != HPZ_LIVE || (key && strcmp(e->key, key) != 0))
            continue;
        int i = att_find(e, job);
        if (i >= 0) {
            att_remove(e, i);
            n++;
        }
    }
    return n;
}

void hpz_store_share_stats(const struct hpz_store *st, struct hpz_share_stats *out)
{
    memset(out, 0, sizeof *out);
    for (const struct hpz_entry *e = st->head; e; e = e->next) {
        if (!e->shared || e->state != HPZ_LIVE)
            continue;
        out->replicas++;
        out->bytes += hpz_entry_bytes(e);
        out->attachments += (uint64_t)e->natt;
        if (e->natt == 0)
            out->idle++;
    }
    out->published = st->published;
    out->deduplicated = st->deduplicated;
    out->reads = st->reads;
    out->refused = st->refused;
    out->evicted = st->evicted;
}

void hpz_store_shared_foreach(const struct hpz_store *st,
                              void (*fn)(const struct hpz_shared_info *info, void *arg), void *arg)
{
    for (const struct hpz_entry *e = st->head; e; e = e->next) {
        if (!e->shared || e->state != HPZ_LIVE)
            continue;
        struct hpz_shared_info in = {.key = e->key,
                                     .owner = e->tenant,
                                     .count = e->count,
                                     .dtype = e->dtype,
                                     .nslots = e->nslots,
                                     .bytes = hpz_entry_bytes(e),
                                     .attachments = e->natt,
                                     .pins = e->refs - 1,
                                     .idle_for = st->tick - e->last_used};
        fn(&in, arg);
    }
}

/* ---- views ---------------------------------------------------------- */

int hpz_entry_shared(const struct hpz_entry *e)
{
    return e->shared;
}

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
    uint64_t b = 0;
    for (int s = 0; s < e->nslots; s++)
        b += e->charges ? e->charges[s] : e->slot_bytes;
    return b;
}

void *hpz_entry_buf(const struct hpz_entry *e, int s)
{
    return s >= 0 && s < e->nslots ? e->bufs[s] : NULL;
}
