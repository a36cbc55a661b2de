/*
 * zpp_int.h — libzpp internals shared by its own files and zppctl; not
 * installed, not exported from the shared library.
 *
 * zppctl needs the decoded admin replies (for its tables), not only the JSON
 * that the public zpp_admin_*_json functions render.
 */
#ifndef ZPP_INT_H
#define ZPP_INT_H

#include "frame.h"
#include "zpp.h"

/* Sends an admin query (which = ZPP__REQUEST__BODY_STATUS or _JOBS) and
 * waits for its reply. Returns 0 and *out (free with zpp_reply_free) whose
 * body is the matching StatusReply/JobsReply, or a negative code with the
 * message in zpp_last_error(c). Needs no Hello. */
int zpp__admin_query(zpp_conn *c, int which, Zpp__Reply **out);

/* Render a StatusReply / JobsReply as a JSON object into a malloc'd,
 * NUL-terminated string the caller frees. Returns 0 or ZPP_ENOMEM. */
int zpp__status_json(const Zpp__StatusReply *st, char **out);
int zpp__jobs_json(const Zpp__JobsReply *jr, char **out);

/* Static lower-case name of a wire Op ("qgz_reduce_scatter"), "unknown"
 * for values outside the enum. */
const char *zpp__op_name(int op);

#endif
