/* sandbox MODE UID GID RWDIR... -- CMD ARGS: run CMD roughly as a
 * deployment would (scratch tool for a deploy/ check, not part of zppd).
 * MODE user: only setgroups/setgid/setuid (no caps left), no_new_privs.
 * MODE pod : + every mount read-only but /dev, /proc, /sys and the RWDIRs
 *            (readOnlyRootFilesystem), + a deny list like the runtime's
 *            default seccomp profile for a container without capabilities.
 * MODE unit: + read-only mounts as pod (ProtectSystem=strict), and an
 *            allow list of @system-service less @privileged (systemd 252),
 *            EPERM otherwise, and MemoryDenyWriteExecute as systemd 252's
 *            seccomp rules (mmap W+X, mprotect/pkey_mprotect +X, shmat
 *            SHM_EXEC) */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "unit_allow.h"

#define MAXF 1024
static struct sock_filter f[MAXF];
static int nf;
static void add(struct sock_filter x) { if (nf < MAXF) f[nf++] = x; else { fprintf(stderr, "filter too long\n"); exit(2); } }
#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG_LO(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static int ro_mounts(char **rw, int nrw)
{
    for (int i = 0; i < nrw; i++)
        if (mount(rw[i], rw[i], NULL, MS_BIND | MS_REC, NULL)) { perror(rw[i]); return -1; }
    FILE *m = fopen("/proc/self/mountinfo", "r");
    char line[4096];
    while (m && fgets(line, sizeof line, m)) {
        char mp[2048];
        if (sscanf(line, "%*s %*s %*s %*s %2047s", mp) != 1) continue;
        int keep = !strncmp(mp, "/dev", 4) || !strncmp(mp, "/proc", 5) || !strncmp(mp, "/sys", 4);
        for (int i = 0; i < nrw; i++) {
            size_t l = strlen(rw[i]);
            if (!strncmp(mp, rw[i], l) && (mp[l] == 0 || mp[l] == '/')) keep = 1;
        }
        if (keep) continue;
        struct statvfs sv;
        unsigned long fl = MS_REMOUNT | MS_BIND | MS_RDONLY;
        if (statvfs(mp, &sv) == 0) {
            if (sv.f_flag & ST_NOSUID) fl |= MS_NOSUID;
            if (sv.f_flag & ST_NODEV) fl |= MS_NODEV;
            if (sv.f_flag & ST_NOEXEC) fl |= MS_NOEXEC;
        }
        if (mount(NULL, mp, NULL, fl, NULL))
            fprintf(stderr, "sandbox: remount ro %s: %s\n", mp, strerror(errno));
    }
    if (m) fclose(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) { fprintf(stderr, "usage: sandbox user|pod|unit UID GID RWDIR... -- CMD...\n"); return 2; }
    const char *mode = argv[1];
    uid_t uid = atoi(argv[2]); gid_t gid = atoi(argv[3]);
    int i = 4; char *rw[32]; int nrw = 0;
    while (i < argc && strcmp(argv[i], "--")) if (nrw < 32) rw[nrw++] = argv[i++]; else i++;
    if (i >= argc - 1) { fprintf(stderr, "sandbox: no command\n"); return 2; }
    char **cmd = argv + i + 1;
    int pod = !strcmp(mode, "pod"), unitmps2 = !strcmp(mode, "unitmps2"), unitmps = !strcmp(mode, "unitmps") || unitmps2, unit = !strcmp(mode, "unit") || unitmps;
    if (pod || unit) {
        if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) { perror("unshare"); return 1; }
        if (ro_mounts(rw, nrw)) return 1;
    }
    if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) { perror("setuid"); return 1; }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("nnp"); return 1; }
    if (pod || unit) {
        add((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
        add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
        add((struct sock_filter)RET(SECCOMP_RET_KILL_PROCESS));
        add((struct sock_filter)LD_NR);
        if (pod) {
            static const int deny[] = {SYS_mbind, SYS_set_mempolicy, SYS_get_mempolicy, 450 /* set_mempolicy_home_node */,
                SYS_migrate_pages, SYS_move_pages, SYS_process_vm_readv, SYS_process_vm_writev, SYS_ptrace, SYS_kcmp,
                SYS_bpf, SYS_perf_event_open, SYS_unshare, SYS_setns, SYS_mount, SYS_umount2, SYS_keyctl, SYS_add_key,
                SYS_request_key, SYS_userfaultfd, SYS_fanotify_init, SYS_open_by_handle_at, SYS_name_to_handle_at,
                438 /* pidfd_getfd */, SYS_iopl, SYS_ioperm, SYS_init_module, SYS_finit_module};
            int n = sizeof deny / sizeof deny[0];
            for (int k = 0; k < n; k++) {
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, deny[k], 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
            }
            add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
        } else {
            if (unitmps) { /* RestrictAddressFamilies=AF_UNIX AF_NETLINK */
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 6));
                add((struct sock_filter)LD_ARG_LO(0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 2, 0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, unitmps2 ? 1 : 16, 1, 0));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EAFNOSUPPORT));
                add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
                add((struct sock_filter)LD_NR);
            }
            if (unitmps) { /* RestrictNamespaces=yes, RestrictRealtime=yes (roughly) */
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | ENOSYS)); /* as systemd: glibc falls back to clone */
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setns, 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4));
                add((struct sock_filter)LD_ARG_LO(0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x7E020000, 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
                add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setscheduler, 0, 6));
                add((struct sock_filter)LD_ARG_LO(1));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 2, 0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 1, 0));
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
                add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
            }
            /* MemoryDenyWriteExecute (systemd 252: seccomp) */
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 5));
            add((struct sock_filter)LD_ARG_LO(2));
            add((struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 0, 1));
            add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
            add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 1, 0));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, 0, 4));
            add((struct sock_filter)LD_ARG_LO(2));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1));
            add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
            add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_shmat, 0, 4));
            add((struct sock_filter)LD_ARG_LO(2));
            add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SHM_EXEC, 0, 1));
            add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
            add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
            const int *al = unitmps2 ? unit_allow_all : unit_allow;
            int n = unitmps2 ? (int)(sizeof unit_allow_all / sizeof unit_allow_all[0]) : (int)(sizeof unit_allow / sizeof unit_allow[0]);
            for (int k = 0; k < n; k++) {
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, al[k], 0, 1));
                add((struct sock_filter)RET(SECCOMP_RET_ALLOW));
            }
            add((struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM));
        }
        struct sock_fprog p = {.len = (unsigned short)nf, .filter = f};
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p)) { perror("seccomp"); return 1; }
    }
    execvp(cmd[0], cmd);
    perror(cmd[0]);
    return 127;
}
