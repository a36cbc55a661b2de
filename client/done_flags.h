/*
 * done_flags.h — libzpp's done flags (proto: Hello.flags_nfds; docs/cuda.md,
 * "Done flags"), the part that needs no CUDA: blocks of 32-bit flags in a
 * sealed memfd, the values each call promises, and the watcher thread that
 * raises a block's flags itself once its daemon can no longer write them.
 *
 * A connection with done flags sends its block's memfd and the write end of
 * a fresh pipe in its Hello. zppd's stream writes flag i after each call
 * that named event slot i; the client's stream waits for the flag. zppd
 * holds the pipe's write end until nothing of its will write the flags
 * again: it closes it once the session's streams have passed their last
 * write, or its process ends. The watcher sleeps in poll() on the read
 * ends and, when one hangs up, raises every flag of that block to the last
 * value promised on it: a stream that waits on a call answered by a zppd
 * that then died goes on instead of waiting for good. Raising a flag the
 * daemon has already written changes nothing (values only grow, compared
 * cyclically).
 *
 * On the flags (HelloReply.flag_sync: no interprocess event at all) the
 * block's second half holds ready flags too, ready flag i right after the
 * done flags (proto: byte 256 + 4 i), which the client's streams write
 * before each call and zppd's gate reads.
 *
 * Blocks are never unmapped (a stream may still be about to read one, and
 * a CUDA registration is per process anyway): a closed connection's block
 * returns to a process-wide pool once its pipe has hung up and, where its
 * ready flags were used, every ready write has landed (a late one from an
 * old stream must not lower a flag a new connection's call waits on), and
 * values keep growing across the connections that use it.
 *
 * Lost calls' outputs: the owner notes where each slot's call in flight
 * writes (zpp__dflags_note, before it arms the slot). When the pipe hangs
 * up with a flag short of its promised value, that call's work will never
 * run: the watcher hands every such range to the block's on_lost (libzpp's
 * CUDA side fills them with 0xFF bytes, NaN in every float type) and only
 * then raises the flags, so a stream that goes on reads NaN, never a
 * silently stale or half-written tensor. A connection that closes, or a
 * buffer deregistered, forgets its notes first: the memory may be freed.
 */
#ifndef ZPP_DONE_FLAGS_H
#define ZPP_DONE_FLAGS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ZPP_DFLAGS_N 64      /* flags per block: ZPP_MAX_EVENTS */
#define ZPP_DFLAGS_BYTES 4096 /* the memfd's size: one page */

typedef struct zpp_dflags {
    uint32_t *flags; /* ZPP_DFLAGS_N done flags at the start of the mapping, then the ready flags */
    int memfd;       /* sealed against shrinking and growing */
    void *user;      /* the owner's per-block state (zpp_cuda.c: 1 once registered) */
    _Atomic uint32_t want[ZPP_DFLAGS_N]; /* the last value promised on each flag */
    _Atomic uint32_t next;               /* the last value handed out */
    _Atomic int hup;   /* the pipe of the current session hung up: nothing writes them now */
    _Atomic int ready_used; /* the current connection writes the ready flags (want[] values) */
    /* lost calls' outputs: slot i's call in flight writes [lost_at[i], +lost_len[i])
     * (0: nothing noted); on_lost(lost_ctx, ...) fills them (set by the owner
     * before the block is watched; NULL: not filled) */
    _Atomic uint64_t lost_at[ZPP_DFLAGS_N];
    _Atomic uint64_t lost_len[ZPP_DFLAGS_N];
    void (*on_lost)(void *ctx, const uint64_t *at, const uint64_t *len, int n);
    void *lost_ctx;
    /* the watcher's (under its lock) */
    int rfd;    /* the watched pipe's read end, -1 */
    int in_use; /* a connection holds the block */
    struct zpp_dflags *next_blk;
} zpp_dflags;

/* A block for a new connection: from the pool, or a fresh memfd page.
 * 0 and *out, or a ZPP_E* code. */
int zpp__dflags_get(zpp_dflags **out);

/* A fresh pipe for a Hello: *rfd to hand to zpp__dflags_watch once the
 * daemon took the flags (else close it), *wfd to send and then close.
 * 0 or ZPP_EIO. */
int zpp__dflags_pipe(int *rfd, int *wfd);

/* Watches rfd (taken; the block's previous pipe must have hung up or never
 * been watched) for b's current session. 0, or ZPP_EIO when no watcher
 * thread could start (rfd closed; b->hup set, so waits raise their flags
 * themselves). */
int zpp__dflags_watch(zpp_dflags *b, int rfd);

/* The value of the next call on flag slot: promised (want) before it is
 * sent, so that a hang-up from now on raises the flag to it. */
uint32_t zpp__dflags_arm(zpp_dflags *b, int slot);

/* The output range of the call about to be armed on slot (len 0: none to
 * fill should it be lost). Call before zpp__dflags_arm. */
void zpp__dflags_note(zpp_dflags *b, int slot, uint64_t at, uint64_t len);

/* Forgets the notes of every slot whose range meets [lo, hi): that memory
 * may be freed. Waits for a hang-up being handled. */
void zpp__dflags_forget(zpp_dflags *b, uint64_t lo, uint64_t hi);

/* After a stream wait on flag slot for value v was enqueued: if the
 * session's pipe has hung up, nothing else may raise it, so raise it here. */
void zpp__dflags_after_wait(zpp_dflags *b, int slot, uint32_t v);

/* Raises flag slot to v unless it is there already (cyclic >=). */
void zpp__dflags_raise(zpp_dflags *b, int slot, uint32_t v);

/* 1 once flag slot has reached v (cyclic >=). */
int zpp__dflags_reached(const zpp_dflags *b, int slot, uint32_t v);

/* The connection is done with b: its notes are forgotten, and it returns
 * to the pool once its pipe has hung up (at once if it was never watched or
 * has hung up). */
void zpp__dflags_put(zpp_dflags *b);

/* Tests: blocks in the pool, and blocks a connection or a pipe still holds. */
void zpp__dflags_counts(int *pooled, int *held);

#endif
