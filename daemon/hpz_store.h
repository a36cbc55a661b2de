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
 * pin another), and the owner fields are kept apart from the data so that a
 * later issue can add read-only replicas shared by content key across jobs
 * (several readers pinning one entry, none of them able to write it).
 *
 * Budgets: the bytes of every entry (pending, live, or unlinked but still
 * pinned) count against the budget of each device it occupies and of its
 * tenant; a reserve that would exceed either fails with ZPP_ELIMIT before
 * anything is allocated. A key re-stored while its previous entry is live
 * needs room for both until the commit (both exist in memory then).
 * 0 means "no budget" for either limit.
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

/* Removes every entry of a job (the job is ending): live entries are freed
 * (or freed at their last unpin), pending ones are marked dead and freed by
 * their rollback or commit. */
void hpz_store_drop_job(struct hpz_store *st, const void *job);

/* Totals: bytes held (all entries), live entries, lookup hits and misses.
 * Any pointer may be NULL. */
void hpz_store_stats(const struct hpz_store *st, uint64_t *bytes_used, uint64_t *entries,
                     uint64_t *hits, uint64_t *misses);

/* Bytes held by the entries of one job (pending, live, and unlinked but
 * still pinned by a gather in flight). */
uint64_t hpz_store_job_bytes(const struct hpz_store *st, const void *job);

/* Bytes held on one device, and by one tenant. */
uint64_t hpz_store_device_bytes(const struct hpz_store *st, int device);
uint64_t hpz_store_tenant_bytes(const struct hpz_store *st, uint32_t tenant);

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
 * entry is freed either way). */
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

/* Read-only views of an entry (pending or pinned). */
uint64_t hpz_entry_count(const struct hpz_entry *e);
int hpz_entry_dtype(const struct hpz_entry *e);
uint64_t hpz_entry_slice(const struct hpz_entry *e);
int hpz_entry_nslots(const struct hpz_entry *e);
uint64_t hpz_entry_bytes(const struct hpz_entry *e); /* all slots */
/* Slot s's buffer (slice * dtype size bytes), or NULL if s is out of range. */
void *hpz_entry_buf(const struct hpz_entry *e, int s);

#endif
