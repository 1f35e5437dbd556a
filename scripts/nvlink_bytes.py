#!/usr/bin/env python3
"""nvlink_bytes.py — what each GPU's NVLink ports carry per collective call, gpucoll beside NCCL,
read from the driver's throughput counters (`nvidia-smi nvlink -gt d` for data payload, `-gt r`
for payload plus protocol overhead) around gpucoll-bench runs.

usage: scripts/nvlink_bytes.py [--np N] [--bench PATH] [--iters A,B] CASE...
  CASE  COLL:SIZE[:BENCH_ARG,...], e.g. allreduce:256M or reducescatter:1G:--algo,oneshot

Each case runs the bench four times: gpucoll alone and with --vs nccl, each with A and with B
timed calls (graph replay, -c 0). Subtracting the A run from the B run cancels start-up traffic;
subtracting gpucoll alone from the run with NCCL leaves NCCL's calls. For each library it prints,
per call and per GPU (the busiest GPU and the mean of the GPUs that carried traffic): data and raw
bytes sent and received as multiples of the call's size, and those bytes over the bench's time
(the mean of its out-of-place and in-place figures from the B run). The counters resolve calls
of megabytes: calls of 1 MB and less may count as nothing."""
import argparse
import os
import re
import subprocess
import sys

LINE = re.compile(r"Link\s+\d+\s*:\s*(Data|Raw)\s+(Tx|Rx)\s*:\s*(\d+)\s*KiB", re.I)
GPU = re.compile(r"^GPU\s+(\d+)\s*:")
SIZE = re.compile(r"^(\d+)([KMG]?)$", re.I)
WARMUP = 2


def snapshot():
    """{gpu: {"Data Tx": bytes, ...}} summed over that GPU's links, data and raw counters."""
    out = {}
    for kind in ("d", "r"):
        text = subprocess.run(["nvidia-smi", "nvlink", "-gt", kind], check=True, capture_output=True,
                              text=True).stdout
        gpu = None
        for line in text.splitlines():
            m = GPU.match(line.strip())
            if m:
                gpu = int(m.group(1))
                out.setdefault(gpu, {})
                continue
            m = LINE.search(line)
            if m and gpu is not None:
                key = f"{m.group(1).capitalize()} {m.group(2).capitalize()}"
                out[gpu][key] = out[gpu].get(key, 0) + int(m.group(3)) * 1024
        if not any(out.values()):
            sys.exit(f"nvlink_bytes: no per-link counters in `nvidia-smi nvlink -gt {kind}`:\n{text[:2000]}")
    return out


def minus(a, b):
    """a - b, counter by counter."""
    return {g: {k: v - b.get(g, {}).get(k, 0) for k, v in a[g].items()} for g in a}


def run_bench(args, coll, size, extra, iters, nccl):
    cmd = ["mpirun", "--bind-to", "none", "-np", str(args.np), args.bench, coll, "-b", size, "-e", size,
           "-n", str(iters), "-w", str(WARMUP), "-c", "0", "-G", "1", "-d", "bfloat16", *extra]
    if nccl:
        cmd.append("--vs")
        cmd.append("nccl")
    before = snapshot()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    after = snapshot()
    if proc.returncode != 0:
        sys.exit(f"nvlink_bytes: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    rows = [l.split() for l in proc.stdout.splitlines() if re.match(r"^\s+\d+\s", l)]
    if len(rows) != 1:
        sys.exit(f"nvlink_bytes: expected one result row from {' '.join(cmd)}:\n{proc.stdout[-3000:]}")
    row = rows[0]
    times = {"gpucoll": (float(row[5]) + float(row[9])) / 2}
    if nccl:
        times["nccl"] = (float(row[13]) + float(row[17])) / 2
    return minus(after, before), times, int(row[0])


def report(lib, per_call, bytes_, us):
    busy = {g: c for g, c in per_call.items() if c.get("Data Tx", 0) > 0 or c.get("Data Rx", 0) > 0}
    if not busy:
        print(f"  {lib:8s} no NVLink traffic counted")
        return
    cols = ["Data Tx", "Data Rx", "Raw Tx", "Raw Rx"]
    for what, pick in (("max", max), ("mean", lambda v: sum(v) / len(v))):
        vals = [pick([c.get(k, 0) for c in busy.values()]) for k in cols]
        cells = "  ".join(f"{k} {v / bytes_:6.3f}x {v / (us * 1e3):6.1f} GB/s" for k, v in zip(cols, vals))
        print(f"  {lib:8s} {what:4s} over {len(busy)} GPUs, {us:9.2f} us: {cells}")
    for g in sorted(busy):
        c = busy[g]
        print(f"    GPU {g}: " + "  ".join(f"{k} {c.get(k, 0) / 1e6:10.3f} MB" for k in cols))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--bench", default=os.path.join(os.path.dirname(__file__), "..", "build", "bench",
                                                   "gpucoll-bench"))
    p.add_argument("--iters", default="10,40", help="A,B: timed calls of the two runs (B > A)")
    p.add_argument("cases", nargs="+")
    args = p.parse_args()
    a, b = (int(x) for x in args.iters.split(","))
    if not 0 < a < b:
        sys.exit("nvlink_bytes: --iters wants A,B with 0 < A < B")
    # The operator's NVLink multicast kill switches stay set.
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    calls = 2 * 2 * (b - a)  # two placements; a graph run makes WARMUP + 2 n calls (one untimed replay)
    for case in args.cases:
        coll, size, *rest = case.split(":")
        extra = rest[0].split(",") if rest and rest[0] else []
        if not SIZE.match(size):
            sys.exit(f"nvlink_bytes: bad size {size!r} in {case!r}")
        gc_a, _, _ = run_bench(args, coll, size, extra, a, False)
        gc_b, _, _ = run_bench(args, coll, size, extra, b, False)
        both_a, _, _ = run_bench(args, coll, size, extra, a, True)
        both_b, times, nbytes = run_bench(args, coll, size, extra, b, True)
        gc = minus(gc_b, gc_a)
        nccl = minus(minus(both_b, both_a), gc)
        per = lambda d: {g: {k: v / calls for k, v in c.items()} for g, c in d.items()}
        print(f"{coll} {nbytes} bytes {' '.join(extra)} on {args.np} GPUs ({calls} calls counted per library)")
        report("gpucoll", per(gc), nbytes, times["gpucoll"])
        report("nccl", per(nccl), nbytes, times["nccl"])
        sys.stdout.flush()


if __name__ == "__main__":
    main()
