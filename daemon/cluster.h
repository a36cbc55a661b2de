/*
 * cluster.h — jobs that span daemons: forming them through the job's
 * leader (the daemon of node 0), watching the other members with
 * heartbeats, and spreading aborts. The RPCs themselves live in peer.c;
 * this module decides what to send and what an answer means for a job.
 *
 * A job spans daemons when its ranks name a leader address in Hello. Each
 * daemon hosts one node of it: ranks [node*G, node*G + G). When its local
 * ranks have all joined, a member daemon sends Join to the leader; the
 * leader parks the Joins until every node is there, then answers each with
 * the communicator ids and the member list. Every member then sends a
 * Heartbeat to every other member each peer_heartbeat_ms; a member that
 * has not answered for peer_timeout_ms, a Join that does not complete in
 * join_timeout_ms, or an abort anywhere aborts the job on every node, with
 * a message naming the node and its address.
 */
#ifndef ZPPD_CLUSTER_H
#define ZPPD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct zppd;
struct job;

#define CLUSTER_NCCL_ID_BYTES 128

/* Starts the peer service (peer_listen; empty = no multi-node jobs).
 * Returns 0 or a negative ZPP_E* code (logged). */
int cluster_start(struct zppd *d);
/* Stops it (graceful stop, before the loop ends). */
void cluster_stop(struct zppd *d);
/* Frees what is left after the loop ended. */
void cluster_free(struct zppd *d);
/* The address other daemons reach this one at, or "" if off. */
const char *cluster_address(const struct zppd *d);

/* The job's local ranks have all joined: leader waits for the others,
 * a member joins the leader. Ends in job_cluster_ready() or an abort. */
void cluster_form(struct job *j);
/* The job is aborting here: tells the other members (once). */
void cluster_abort(struct job *j);
/* Periodic: heartbeats, join deadlines. */
void cluster_tick(struct zppd *d);
/* A device error hit the job: heartbeat every other member now, so that
 * a dead one shows at once (cluster_suspect). */
void cluster_probe(struct job *j);
/* How long a member may go unanswered before cluster_suspect names it:
 * two heartbeat periods and a second of slack. */
uint64_t cluster_silence_ms(const struct zppd *d);
/* A member that looks dead: its last heartbeat failed, or it has not
 * answered for cluster_silence_ms. 1 with "node N (address): what" in buf,
 * else 0. */
int cluster_suspect(const struct job *j, uint64_t now, char *buf, size_t len);
/* Every rank of j on this node has left between calls (job_node_idle):
 * heartbeats the other members now, saying so, and ends j here
 * (job_end_idle) if each of them has said it is idle too. May free j. */
void cluster_idle(struct job *j);
/* The job is being freed: forgets its state. */
void cluster_job_free(struct job *j);

/* job.c: the cluster formed; ids are the communicator ids from the leader
 * (n of them, CLUSTER_NCCL_ID_BYTES each; may be 0). */
void job_cluster_ready(struct job *j, const uint8_t *ids, int n);

#endif
