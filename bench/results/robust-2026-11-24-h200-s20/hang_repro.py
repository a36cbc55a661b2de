"""Session 20, call 5 (device: nvidia-h200, one NVIDIA H200, driver 580.159.04): why ranks 2 and 3 did not report in call 4's first
version of test_load_refuses_a_checkpoint_of_mixed_steps. Rank 1's
load_checkpoint raises and its process leaves (between calls: the job waits
rejoin_timeout_ms = 30 s for it); ranks 0, 2, 3 wait in the load's barrier.
Each rank reports when and how it ended; the daemon's log follows.
Run from the repository root with ZPPD_BIN and ZPP_LIB set (s20r2.sh)."""
import functools
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, "client/python")
sys.path.insert(0, "client/python/tests")
import conftest  # noqa: E402
import test_torch_cpu as T  # noqa: E402
from ranks import Job, run  # noqa: E402


def body(rank, job, path):
    t0 = time.monotonic()
    try:
        T.body_train(rank, job, {"steps": 1, "load": path})
        return f"rank {rank}: ok after {time.monotonic() - t0:.1f}s"
    except BaseException as e:  # noqa: BLE001
        return f"rank {rank}: {type(e).__name__} after {time.monotonic() - t0:.1f}s: {e}"[:400]


if __name__ == "__main__":
    d = conftest.Daemon(os.environ["ZPPD_BIN"])
    try:
        with tempfile.TemporaryDirectory(dir="/tmp") as p:
            T.train(d, "hang-a", steps=1, ckpt=p, save_at=0)
            shutil.copy(os.path.join(p, "rank-00001.pt"), os.path.join(p, "old"))
            T.train(d, "hang-b", steps=3, ckpt=p, save_at=2)
            os.replace(os.path.join(p, "old"), os.path.join(p, "rank-00001.pt"))
            try:
                for line in run(functools.partial(body, path=p), Job(socket=d.socket, job_id="hang-c", world=4, nodes=2)):
                    print(line)
            except Exception as e:  # noqa: BLE001
                print("run:", e)
    finally:
        print("---- zppd log (last 60 lines)")
        print("\n".join(d.read_log().splitlines()[-60:]))
        d.stop()
