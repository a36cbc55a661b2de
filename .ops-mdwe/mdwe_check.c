/* Does CUDA (driver init, PTX JIT, a launch) and NCCL work under
 * MemoryDenyWriteExecute? prctl(PR_SET_MDWE) is the kernel's version of
 * the same rule (no W+X mappings, no making memory executable later). */
#include <cuda.h>
#include <nccl.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <seccomp.h>
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s; cuGetErrorString(r_, &s); printf("FAIL %s: %s\n", #x, s); return 1; } } while (0)
static const char ptx[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry k(.param .u64 p){ .reg .b64 a; .reg .b32 v; ld.param.u64 a,[p];"
    " cvta.to.global.u64 a,a; mov.u32 v,42; st.global.u32 [a],v; ret; }\n";
int main(int argc, char **argv)
{
    if (argc > 1) {
        int rc = prctl(PR_SET_MDWE, 1, 0, 0, 0);
        printf("prctl(PR_SET_MDWE) = %d\n", rc);
        if (rc) { perror("prctl"); return 2; }
        /* systemd 252's @privileged (less what @system-service never had), EPERM */
        static const char *deny[] = {"chown","fchown","fchownat","lchown","adjtimex","clock_adjtime",
            "clock_settime","settimeofday","delete_module","finit_module","init_module","ioperm","iopl",
            "pciconfig_iobase","pciconfig_read","pciconfig_write","kexec_file_load","kexec_load","reboot",
            "swapoff","swapon","_sysctl","acct","bpf","capset","chroot","fanotify_init","fanotify_mark",
            "nfsservctl","open_by_handle_at","pivot_root","quotactl","setdomainname","setfsuid","setgroups",
            "sethostname","setresuid","setreuid","setuid","vhangup", "setfsgid", "setgid", "setregid", "setresgid", NULL};
        scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
        int n = 0;
        for (int i = 0; deny[i]; i++) {
            int nr = seccomp_syscall_resolve_name(deny[i]);
            if (nr != __NR_SCMP_ERROR && !seccomp_rule_add(f, SCMP_ACT_ERRNO(1), nr, 0)) n++;
        }
        printf("seccomp: %d calls denied, load=%d\n", n, seccomp_load(f));
    }
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUdeviceptr p;
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, ptx)); CK(cuModuleGetFunction(&fn, mod, "k"));
    CK(cuMemAlloc(&p, 4)); void *args[] = {&p};
    CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, args, 0)); CK(cuCtxSynchronize());
    unsigned v = 0; CK(cuMemcpyDtoH(&v, p, 4));
    printf("kernel wrote %u\n", v);
    ncclComm_t comm; int d0 = 0;
    ncclResult_t nr = ncclCommInitAll(&comm, 1, &d0);
    printf("ncclCommInitAll: %s\n", ncclGetErrorString(nr));
    if (nr) return 1;
    float *buf; cudaStream_t st = 0;
    CK(cuMemAlloc((CUdeviceptr *)&buf, 1024 * 4));
    nr = ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, st);
    CK(cuCtxSynchronize());
    printf("ncclAllReduce: %s\n", ncclGetErrorString(nr));
    ncclCommDestroy(comm);
    printf(v == 42 && !nr ? "OK\n" : "FAIL\n");
    return v == 42 && !nr ? 0 : 1;
}
