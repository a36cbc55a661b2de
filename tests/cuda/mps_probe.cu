/*
 * mps_probe.cu — zpp-mps-probe: a CUDA client that does one thing to the
 * GPU, for the scripts that check how zppd lives beside other MPS clients
 * (scripts/gpu/run_mps.sh).
 *
 *   zpp-mps-probe ping            open the GPU and run one tiny kernel
 *   zpp-mps-probe spin SECONDS    one kernel that spins for SECONDS
 *   zpp-mps-probe fault SECONDS   one kernel that writes to an unmapped
 *                                 address (a fatal fault), then stay alive
 *                                 SECONDS before exiting
 *   zpp-mps-probe recover SECONDS open the GPU and stay idle, asking its
 *                                 context every 100 ms; once that fails,
 *                                 reset the device (cudaDeviceReset) and try
 *                                 to use it again every 200 ms, for at most
 *                                 SECONDS: can a process that keeps running
 *                                 get a faulted GPU back under MPS?
 *
 * Prints one line "mps_probe MODE: ok" or "mps_probe MODE: ERROR_NAME
 * (code N): message" for the first CUDA error and exits 0 when the mode
 * did what it says (ping and spin: no error; fault: the fault was seen),
 * else 1; 2 for a usage error.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__global__ void spin_kernel(long long cycles, int *out)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
    if (threadIdx.x == 0)
        *out = 1;
}

__global__ void fault_kernel(int *p)
{
    *p = 1;
}

static int report(const char *mode, cudaError_t e)
{
    if (e == cudaSuccess)
        printf("mps_probe %s: ok\n", mode);
    else
        printf("mps_probe %s: %s (code %d): %s\n", mode, cudaGetErrorName(e), (int)e,
               cudaGetErrorString(e));
    fflush(stdout);
    return e == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "ping") && argc < 3)) {
        fprintf(stderr, "usage: zpp-mps-probe ping | spin SECONDS | fault SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    const double secs = argc > 2 ? atof(argv[2]) : 0.0;
    int *d = NULL;
    cudaError_t e = cudaMalloc((void **)&d, sizeof *d);
    if (e != cudaSuccess)
        return report(mode, e);
    if (!strcmp(mode, "ping")) {
        spin_kernel<<<1, 32>>>(0, d);
        e = cudaGetLastError();
        return report(mode, e != cudaSuccess ? e : cudaDeviceSynchronize());
    }
    if (!strcmp(mode, "spin")) {
        int clock_khz = 0;
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
        spin_kernel<<<1, 32>>>((long long)(secs * clock_khz * 1000.0), d);
        e = cudaGetLastError();
        return report(mode, e != cudaSuccess ? e : cudaDeviceSynchronize());
    }
    if (!strcmp(mode, "fault")) {
        fault_kernel<<<1, 1>>>((int *)(uintptr_t)0x10);
        e = cudaDeviceSynchronize();
        report(mode, e);
        usleep((useconds_t)(secs * 1e6));
        return e != cudaSuccess ? 0 : 1;
    }
    if (!strcmp(mode, "recover")) {
        const int tries = (int)(secs * 1000.0 / 200.0);
        for (;;) { /* idle until the context fails */
            e = cudaStreamQuery(0);
            if (e != cudaSuccess && e != cudaErrorNotReady)
                break;
            usleep(100000);
        }
        printf("mps_probe recover: the idle context failed: %s (code %d)\n", cudaGetErrorName(e),
               (int)e);
        e = cudaDeviceReset();
        printf("mps_probe recover: cudaDeviceReset: %s (code %d)\n", cudaGetErrorName(e), (int)e);
        fflush(stdout);
        for (int i = 0; i < tries; i++) {
            int *p = NULL;
            e = cudaMalloc((void **)&p, sizeof *p);
            if (e == cudaSuccess) {
                spin_kernel<<<1, 32>>>(0, p);
                e = cudaGetLastError();
                if (e == cudaSuccess)
                    e = cudaDeviceSynchronize();
                cudaFree(p);
            }
            if (e == cudaSuccess) {
                printf("mps_probe recover: the GPU works again after %d ms in the same process\n",
                       i * 200);
                return 0;
            }
            usleep(200000);
        }
        return report(mode, e);
    }
    fprintf(stderr, "zpp-mps-probe: unknown mode '%s'\n", mode);
    return 2;
}
