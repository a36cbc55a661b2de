/*
 * hpz_store.h — the hpZ secondary partitions kept by the daemon.
 *
 * A qwZ all-gather that names an hpZ key leaves, on every hosted rank, that
 * rank's node-level slice of the gathered tensor in daemon-owned memory; a
 * later hpZ gather of the same key assembles the tensor from those slices
 * over the intra-node communicator only. The store owns that memory.
 *
 * An entry is identified by (tenant uid, job object, key) and holds: the
 * tensor's count and dtype, the slice length in elements, and one buffer per
 * hosted slot (on that slot's device) of slice * dtype size bytes.
 *
 * Life of an entry:
 *   reserve   (coll_prepare of a qwZ with a key) allocates a PENDING entry
 *             under the budgets; it is invisible to lookups;
 *   commit    (coll_finish, call succeeded) makes it the LIVE entry of its
 *             key, replacing (and releasing) the previous one;
 *   rollback  (coll_finish, call failed) frees a pending entry;
 *   lookup    (coll_prepare of an hpZ gather) finds the live entry and pins
 *             it; unpin (coll_finish) releases the pin;
 *   invalidate / drop_job remove live entries; an entry still pinned by a
 *             gather in flight is unlinked at once and freed at its last
 *             unpin.
 * Entries are reference counted (the store's link is one reference, every
 * pin another), and the owner fields are kept apart from the data.
 *
 * Shared replicas (docs/hpz-sharing.md). An entry reserved with
 * spec.shared = 1 is keyed by a content key ("sha256:" + the hex SHA-256 of
 * the tensor it holds), owned by a tenant rather than a job, and read-only
 * once committed: nothing in the store hands out a shared entry for
 * writing, and coll.c writes only into a PENDING entry it reserved. Jobs
 * attach to a shared replica (the publishing job at commit, a reader at
 * its first gather) and detach at invalidate or when they end; a replica
 * that no job is attached to stays cached until a reserve needs its room,
 * and is then evicted least-recently-used first — never while attached or
 * pinned. A tenant reads its own replicas and those of the tenants the
 * share rules (config `hpz_share`) open to it. The same content may be
 * held twice when two tenants who cannot read each other's replicas
 * publish it, or when one tenant publishes it in two layouts (devices,
 * ranks per node); a replica is found by key and layout.
 *
 * Budgets: the bytes of every entry (pending, live, or unlinked but still
 * pinned) count against the budget of each device it occupies and of its
 * tenant; a reserve that would exceed either fails with ZPP_ELIMIT before
 * anything is allocated. A key re-stored while its previous entry is live
 * needs room for both until the commit (both exist in memory then).
 * 0 means "no budget" for either limit. A shared replica counts against its
 * owner tenant (readers are not charged) and against no job. A reserve that
 * does not fit first evicts idle shared replicas (LRU) when that makes it
 * fit; it evicts nothing when it would fail anyway.
 *
 * Threads: every function runs on the loop thread. The buffers of a pinned
 * or pending entry may be read/written by the worker running the call.
 */
#ifndef ZPPD_HPZ_STORE_H
#define ZPPD_HPZ_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define HPZ_KEY_MAX 256     /* longest key, bytes, without the NUL */
#define HPZ_MAX_DEVICES 256 /* device indices 0 .. HPZ_MAX_DEVICES-1 */
#define HPZ_CONTENT_PREFIX "sha256:"
#define HPZ_CONTENT_KEY_LEN 71 /* "sha256:" + 64 lowercase hex digits */
#define HPZ_SHARE_MAX 64       /* share rules (owner, reader) */

struct hpz_store;
struct hpz_entry;

/* Creates an empty store whose memory comes from ops->store_alloc(backend,
 * device, ...). Budgets in bytes (0 = unlimited). Returns NULL when out of
 * memory. Free with hpz_store_free. */
struct hpz_store *hpz_store_new(const struct be_ops *ops, void *backend, uint64_t budget_per_device,
                                uint64_t budget_per_tenant);

/* Frees every entry (pinned or not: call it only when no call is in flight)
 * and the store. Accepts NULL. */
void hpz_store_free(struct hpz_store *st);

/* Changes the budgets (SIGHUP). Entries already stored stay, even if now
 * over budget; later reserves see the new limits. */
void hpz_store_set_budget(struct hpz_store *st, uint64_t per_device, uint64_t per_tenant);
/* At most n entries (private slices and replicas, any state) per tenant;
 * 0: no cap. A reserve past it first evicts the tenant's idle shared
 * replicas (LRU), as a budget does, and is ZPP_ELIMIT when that is not
 * enough; a private key stored again does not count the live entry it
 * replaces at its commit. Every store operation walks the entries, so the
 * cap also bounds what one tenant costs the others. */
void hpz_store_set_max_entries(struct hpz_store *st, uint32_t per_tenant);

/* Removes every entry of a job (the job is ending): live entries are freed
 * (or freed at their last unpin), pending ones are marked dead and freed by
 * their rollback or commit. */
void hpz_store_drop_job(struct hpz_store *st, const void *job);

/* Totals: bytes held (all entries), live entries, lookup hits and misses.
 * Any pointer may be NULL. */
void hpz_store_stats(const struct hpz_store *st, uint64_t *bytes_used, uint64_t *entries,
                     uint64_t *hits, uint64_t *misses);

/* Bytes held by the entries of one job (pending, live, and unlinked but
 * still pinned by a gather in flight). A live shared replica belongs to no
 * job (hpz_store_share_stats counts those); a pending one to its
 * publishing job. */
uint64_t hpz_store_job_bytes(const struct hpz_store *st, const void *job);

/* Bytes held on one device, and by one tenant; one tenant's live entries
 * (its private keys and the shared replicas it owns). */
uint64_t hpz_store_device_bytes(const struct hpz_store *st, int device);
uint64_t hpz_store_tenant_bytes(const struct hpz_store *st, uint32_t tenant);
uint64_t hpz_store_tenant_entries(const struct hpz_store *st, uint32_t tenant);

/* What a new entry needs. devices[s] is slot s's device index (NULL: slot
 * s is on device s, as with the host backend). */
struct hpz_spec {
    uint32_t tenant;
    const void *job;
    const char *job_id; /* for messages only; may be NULL */
    const char *key;    /* 1..HPZ_KEY_MAX bytes */
    uint64_t count;     /* elements of the whole tensor */
    int dtype;          /* ZK_FP32/ZK_FP16/ZK_BF16 */
    uint64_t slice;     /* elements kept per slot */
    int nslots;
    const int *devices;
    /* Shared replicas only (0 otherwise): key is a content key, job is the
     * publishing (or reading) job; local (ranks per node) and rank0 (the
     * rank of slot 0) complete the layout a reader must match. */
    int shared;
    int local;
    int rank0;
};

/* Reserves a pending entry: checks the budgets, then allocates nslots
 * buffers of slice * dtype size bytes (contents undefined). On success
 * *out is the entry (owned by the store; end it with hpz_store_commit or
 * hpz_store_rollback). Errors: ZPP_EINVAL (bad spec), ZPP_ELIMIT (over a
 * budget; nothing allocated), ZPP_ENOMEM; msg gets a sentence. */
int hpz_store_reserve(struct hpz_store *st, const struct hpz_spec *spec, struct hpz_entry **out,
                      char *msg, size_t msg_len);

/* Makes a pending entry the live entry of its key, releasing the entry it
 * replaces. Returns 0, or ZPP_EABORTED if its job was dropped meanwhile (the
 * entry is freed either way).
 * A shared entry is never replaced: it becomes a live read-only replica
 * with its publishing job attached, unless a replica of the same key and
 * layout that its tenant may read went live meanwhile (two publishes of
 * the same bytes at once) — then the job attaches to that one and e is
 * freed. ZPP_ENOMEM if the attachment cannot be recorded (e freed, or
 * kept as an idle replica). */
int hpz_store_commit(struct hpz_store *st, struct hpz_entry *e);

/* Frees a pending entry. Accepts NULL. */
void hpz_store_rollback(struct hpz_store *st, struct hpz_entry *e);

/* Finds and pins the live entry (tenant, job, key). Returns 0 with *out, or
 * ZPP_ENOENT. Counts a hit or a miss. Release with hpz_store_unpin. */
int hpz_store_lookup(struct hpz_store *st, uint32_t tenant, const void *job, const char *key,
                     struct hpz_entry **out);

/* Releases a pin; frees the entry if it was unlinked meanwhile. Accepts
 * NULL. */
void hpz_store_unpin(struct hpz_store *st, struct hpz_entry *e);

/* Removes the live entry of (tenant, job, key), or with key NULL every live
 * entry of the job. Returns the number of entries removed (0 is no error:
 * invalidating an absent key is idempotent). */
int hpz_store_invalidate(struct hpz_store *st, uint32_t tenant, const void *job, const char *key);

/* ---- shared replicas (docs/hpz-sharing.md) ------------------------- */

/* 1 if key is a well-formed content key: "sha256:" and 64 lowercase hex
 * digits. */
int hpz_content_key_ok(const char *key);

/* Replaces the share rules: pairs[i] = {owner uid, reader uid} lets the
 * reader's jobs read (and reuse when publishing) the owner's replicas. At
 * most HPZ_SHARE_MAX rules are kept. Attachments made under old rules
 * stay until their jobs detach. */
void hpz_store_set_share(struct hpz_store *st, const uint32_t (*pairs)[2], uint32_t n);

/* 1 if tenant reader may read replicas owned by tenant owner (itself, or a
 * share rule). */
int hpz_store_may_read(const struct hpz_store *st, uint32_t reader, uint32_t owner);

/* Finds the live shared replica sp->key in sp's layout (count, dtype,
 * slice, nslots, devices, local, rank0 % local) that sp->tenant may read,
 * and pins it (release with hpz_store_unpin); with attach also attaches
 * sp->job (a reader; idempotent). Counts a read or a refusal.
 * Errors, with a sentence in msg: ZPP_ENOENT (no replica of that key),
 * ZPP_EPERM (only replicas of tenants not shared with sp->tenant),
 * ZPP_EINVAL (readable, but in another layout), ZPP_ENOMEM. */
int hpz_store_find_shared(struct hpz_store *st, const struct hpz_spec *sp, int attach,
                          struct hpz_entry **out, char *msg, size_t msg_len);

/* Attaches job to a live shared entry the caller has pinned (a publish
 * whose bytes were already there); idempotent. Returns 0, ZPP_ENOENT if
 * the entry is no longer live, or ZPP_ENOMEM. */
int hpz_store_attach(struct hpz_store *st, struct hpz_entry *e, const void *job);

/* Detaches job from the shared replica `key` (every key with NULL). The
 * replicas stay, idle if no job is attached. Returns the number of
 * attachments removed. */
int hpz_store_detach(struct hpz_store *st, const void *job, const char *key);

/* Counters of the shared replicas (for metrics and zppctl). */
struct hpz_share_stats {
    uint64_t replicas;     /* live shared replicas */
    uint64_t bytes;        /* their bytes, all slots */
    uint64_t attachments;  /* (job, replica) attachments */
    uint64_t idle;         /* replicas no job is attached to (evictable) */
    uint64_t published;    /* replicas stored by a publish, ever */
    uint64_t deduplicated; /* publishes served by a replica already there */
    uint64_t reads;        /* hpZ gathers served from a replica */
    uint64_t refused;      /* lookups refused with ZPP_EPERM */
    uint64_t evicted;      /* idle replicas evicted to make room */
};
void hpz_store_share_stats(const struct hpz_store *st, struct hpz_share_stats *out);

/* One live shared replica, as hpz_store_shared_foreach shows it. */
struct hpz_shared_info {
    const char *key; /* valid during the callback */
    uint32_t owner;  /* tenant uid */
    uint64_t count;
    int dtype;
    int nslots;
    uint64_t bytes;
    int attachments;   /* jobs attached */
    int pins;          /* calls in flight reading it */
    uint64_t idle_for; /* store operations since its last use (LRU age) */
};

/* Calls fn for every live shared replica, newest first. fn must not
 * change the store. */
void hpz_store_shared_foreach(const struct hpz_store *st,
                              void (*fn)(const struct hpz_shared_info *info, void *arg), void *arg);

/* 1 if e is a shared replica (pending or live). */
int hpz_entry_shared(const struct hpz_entry *e);

/* Read-only views of an entry (pending or pinned). */
uint64_t hpz_entry_count(const struct hpz_entry *e);
int hpz_entry_dtype(const struct hpz_entry *e);
uint64_t hpz_entry_slice(const struct hpz_entry *e);
int hpz_entry_nslots(const struct hpz_entry *e);
uint64_t hpz_entry_bytes(const struct hpz_entry *e); /* all slots */
/* Slot s's buffer (slice * dtype size bytes), or NULL if s is out of range. */
void *hpz_entry_buf(const struct hpz_entry *e, int s);

#endif
