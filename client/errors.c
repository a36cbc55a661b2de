/*
 * errors.c — names and messages of libzpp's error codes and of the
 * algorithms a collective reply reports.
 *
 * Generated from the ZPP_ERRNO_MAP X-macro of zpp.h, so the enum, the names,
 * the messages (and the Python exceptions built from them) cannot drift
 * apart. Part of zpp_proto: the daemon uses the same strings.
 */
#include "zpp.h"

/* Static message of a ZPP_E* code; "unknown error" for anything else. */
const char *zpp_strerror(int code)
{
    switch (code) {
    case ZPP_OK:
        return "success";
#define XX(name, val, msg)                                                                         \
    case ZPP_##name:                                                                               \
        return msg;
        ZPP_ERRNO_MAP(XX)
#undef XX
    default:
        return "unknown error";
    }
}

/* Static name of a ZPP_E* code without the prefix ("EINVAL"); "OK" for 0;
 * "UNKNOWN" for anything else. */
const char *zpp_err_name(int code)
{
    switch (code) {
    case ZPP_OK:
        return "OK";
#define XX(name, val, msg)                                                                         \
    case ZPP_##name:                                                                               \
        return #name;
        ZPP_ERRNO_MAP(XX)
#undef XX
    default:
        return "UNKNOWN";
    }
}

const char *zpp_op_name(int op)
{
    switch (op) {
    case ZPP_OP_QWZ_ALLGATHER:
        return "qwz_allgather";
    case ZPP_OP_HPZ_GATHER:
        return "hpz_gather";
    case ZPP_OP_HPZ_INVALIDATE:
        return "hpz_invalidate";
    case ZPP_OP_QGZ_REDUCE_SCATTER:
        return "qgz_reduce_scatter";
    case ZPP_OP_ALLGATHER:
        return "allgather";
    case ZPP_OP_REDUCE_SCATTER:
        return "reduce_scatter";
    case ZPP_OP_BARRIER:
        return "barrier";
    default:
        return "unknown";
    }
}

/* Static short name of a zpp_algo_t ("qgz_hier"); "unknown" otherwise. */
const char *zpp_algo_name(int algo)
{
    switch (algo) {
    case ZPP_ALGO_QWZ:
        return "qwz";
    case ZPP_ALGO_HPZ:
        return "hpz";
    case ZPP_ALGO_QGZ_HIER:
        return "qgz_hier";
    case ZPP_ALGO_QGZ_FLAT:
        return "qgz_flat";
    case ZPP_ALGO_RS_EXACT:
        return "rs_exact";
    case ZPP_ALGO_AG_EXACT:
        return "ag_exact";
    case ZPP_ALGO_NONE:
        return "none";
    default:
        return "unknown";
    }
}
