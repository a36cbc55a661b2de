"""torch_quant.py — block quantization written in plain PyTorch ops, timed the
way kernel_bench times the CUDA kernels (CUDA events, median of many runs
after warm-up, rotating inputs >= 256 MiB, next to a device-to-device copy
in the same run). It is the figure a user who does not have our kernels
would get. Prints rows in kernel_bench's format. Usage:
    python3 torch_quant.py [MiB]
"""
import statistics
import sys

WARMUP = 3
REPS = 15
ROT = 3
MIB = 1 << 20
BLOCK = 256


def main():
    try:
        import torch
    except ImportError:
        print("torch_quant: no torch here, skipped")
        return 0
    if not torch.cuda.is_available():
        print("torch_quant: torch sees no GPU, skipped")
        return 0
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    nbytes = mib * MIB
    dev = torch.device("cuda")
    print(f"torch_quant: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
          f"input {mib} MiB, median of {REPS} after {WARMUP} warm-up")

    def timed(fn, args):
        for i in range(WARMUP):
            fn(*args[i % ROT])
        torch.cuda.synchronize()
        ms = []
        for i in range(REPS):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*args[i % ROT])
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b))
        return statistics.median(ms)

    src = [torch.randn(nbytes // 4, device=dev) for _ in range(ROT)]
    dst = [torch.empty_like(s) for s in src]
    copy_ms = timed(lambda s, d: d.copy_(s), list(zip(src, dst)))
    copy_tbs = 2 * nbytes / (copy_ms * 1e-3) / 1e12
    print(f"{'torch copy_ D2D':<22} {'':<26} {2 * nbytes / MIB:9.1f} {copy_ms:9.4f} "
          f"{copy_tbs:8.3f} {100.0:7.1f}%")
    del src, dst

    def quant(x, qmax):
        xb = x.view(-1, BLOCK).float()
        absmax = xb.abs().amax(dim=1, keepdim=True)
        scale = absmax / qmax
        inv = torch.where(absmax > 0, qmax / absmax, torch.zeros_like(absmax))
        q = torch.round(xb * inv).clamp_(-qmax, qmax).to(torch.int8)
        return q, scale

    def dequant(q, scale, dtype):
        return (q.float() * scale).to(dtype).view(-1)

    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
        n = nbytes // (2 if dtype == torch.bfloat16 else 4)
        xs = [torch.randn(n, device=dev).to(dtype) for _ in range(ROT)]
        # bytes that must move: input + int8 codes + fp32 scales
        moved = nbytes + n + 4 * (n // BLOCK)
        ms = timed(lambda x: quant(x, 127.0), [(x,) for x in xs])
        tbs = moved / (ms * 1e-3) / 1e12
        print(f"{'torch ops quantize':<22} {name + ' int8 B=256':<26} {moved / MIB:9.1f} "
              f"{ms:9.4f} {tbs:8.3f} {100.0 * tbs / copy_tbs:7.1f}%")
        qs = [quant(x, 127.0) for x in xs]
        ms = timed(lambda q, s: dequant(q, s, dtype), qs)
        tbs = moved / (ms * 1e-3) / 1e12
        print(f"{'torch ops dequantize':<22} {name + ' int8 B=256':<26} {moved / MIB:9.1f} "
              f"{ms:9.4f} {tbs:8.3f} {100.0 * tbs / copy_tbs:7.1f}%")
        del xs, qs
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
