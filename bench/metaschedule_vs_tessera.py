#!/usr/bin/env python3
"""The search against TVM's MetaSchedule, on the same machine, one after the other.

Workloads (issue 24): conv2d NHWC 1x56x56x64 (*) 3x3x64x64 (stride 1, padding 1) and a
1024^3 matmul (C[i, j] = sum_k A[i, k] B[k, j]). For each workload, MetaSchedule runs
once per MetaSchedule seed and Tessera once per Tessera seed, interleaved, each for
--trials measured candidates, 64 per round / iteration. The table gives the best
GFLOPS found after 64 and after --trials candidates, and each run's wall time.

- MetaSchedule (pinned: apache-tvm==0.27.0.post1, apache-tvm-ffi==0.1.14.post1 from
  PyPI, run under --tvm-python): `tune_tir` with its defaults (evolutionary search,
  XGBoost model, local builder and runner), target llvm with --mcpu and num-cores 2,
  TVM_NUM_THREADS=2. A measure callback stamps every measured candidate with the time
  its batch finished. The best of the first N records of the database (in measurement
  order) is then built as MetaSchedule's builder builds it and timed with TVM's time
  evaluator (median of 10 repeats of at least 100 ms).
- Tessera: `tessera tune --op ... --per-round 64 --tuner-seed S`, the auto-scheduler,
  timed as MetaSchedule's runner times (3 runs, grown to last at least 100 ms). The
  conv2d runs twice per seed: `conv2d` (kernel HWIO) and `conv2d_nhwc_packed` (the
  kernel packed as Tessera's network builds pack constant weights; MetaSchedule
  rewrites the kernel's layout itself, a layout-free buffer).
  The figure is the search's own measurement from the log (each record's best cost),
  the way `tune`'s table prints it. The default schedule's record, which every run
  logs first, is not a trial; the table gives the best of the trials, and in brackets
  the best including the default schedule (what a build would use).
- "At equal wall-clock time": Tessera's best among the candidates it had measured when
  MetaSchedule had spent its wall time for 64 trials (records carry a timestamp, in
  seconds, counted from the process start).

    python3 -m venv /tmp/tvmvenv
    /tmp/tvmvenv/bin/pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 \
        numpy psutil xgboost cloudpickle tornado
    cargo build --release -p tessera-cli
    python3 bench/metaschedule_vs_tessera.py --tvm-python /tmp/tvmvenv/bin/python \
        --bin target/release --out bench-out/ms --trials 200
"""
import argparse
import json
import os
import subprocess
import sys
import time

WORKLOADS = {
    # key (MetaSchedule's workload): name, shape, flop, Tessera's flags, Tessera's ops
    "conv2d": ("conv2d NHWC 1x56x56x64 * 3x3x64x64", "1,56,56,64,64,3,3",
               2 * 56 * 56 * 64 * 64 * 9,
               ["--number", "3", "--min-repeat-ms", "100"],
               ["conv2d", "conv2d_nhwc_packed"]),
    "matmul": ("matmul 1024^3", "1024,1024,1024", 2 * 1024 ** 3,
               ["--number", "3", "--min-repeat-ms", "100", "--run-timeout", "1"],
               ["matmul"]),
}
PER_ROUND = 64


# ---------------------------------------------------------------- MetaSchedule side
def ms_prim_func(op):
    from tvm import te, topi
    if op == "conv2d":
        data = te.placeholder((1, 56, 56, 64), name="data")
        kernel = te.placeholder((3, 3, 64, 64), name="kernel")
        out = topi.nn.conv2d_nhwc(data, kernel, 1, 1, 1)
        return te.create_prim_func([data, kernel, out])
    a = te.placeholder((1024, 1024), name="A")
    b = te.placeholder((1024, 1024), name="B")
    k = te.reduce_axis((0, 1024), name="k")
    c = te.compute((1024, 1024), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def _register_intrinsics():
    import tvm.s_tir.tensor_intrin  # noqa: F401


def ms_run(op, trials, seed, mcpu, work_dir):
    """Runs under the TVM interpreter; prints one JSON line with the results."""
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    # Registering TVM's tensor intrinsics parses hundreds of TVMScript functions: 34 s
    # on this VM, in the tuner's process and in each builder worker, which without an
    # initializer does it under the 30 s build timeout and fails every build. Done here
    # before the clock starts, and by the workers' initializer.
    import tvm.s_tir.tensor_intrin  # noqa: F401

    stamps = []  # (seconds since start, cost or None), in measurement order
    t0 = time.time()

    @derived_object
    class Stamp(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, candidates, builds, runs):
            now = time.time() - t0
            for run in runs:
                cost = None
                if run.error_msg is None and run.run_secs:
                    secs = [float(s) for s in run.run_secs]
                    cost = sum(secs) / len(secs)
                stamps.append((now, cost))

    if not os.path.exists(os.path.join(work_dir, "database_tuning_record.json")):
        callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [Stamp()]
        ms.tune_tir(tvm.IRModule({"main": ms_prim_func(op)}), ms_target(mcpu), work_dir,
                    max_trials_global=trials, num_trials_per_iter=PER_ROUND, seed=seed,
                    measure_callbacks=callbacks,
                    builder=ms.builder.LocalBuilder(initializer=_register_intrinsics))
        with open(os.path.join(work_dir, "stamps.json"), "w") as f:
            json.dump({"stamps": stamps, "wall": time.time() - t0}, f)
    stamps_file = os.path.join(work_dir, "stamps.json")
    if not os.path.exists(stamps_file):
        sys.exit(f"{work_dir} holds a database without stamps.json (an interrupted run): "
                 "remove the folder to tune again")
    with open(stamps_file) as f:
        out = json.load(f)
    out["checkpoints"] = {}
    for n in sorted({min(PER_ROUND, trials), trials}):
        out["checkpoints"][n] = ms_time_best(op, mcpu, work_dir, n)
    print("RESULT " + json.dumps(out), flush=True)


def ms_target(mcpu):
    import tvm
    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})


def ms_time_best(op, mcpu, work_dir, n):
    """The best of the first `n` records of the database (the file is in measurement
    order), built as MetaSchedule's builder builds it (the weight layout rewrite taken
    out of the function: the kernel argument arrives in the rewritten layout, as a
    network's constant weights would) and timed with TVM's time evaluator."""
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    with open(os.path.join(work_dir, "database_workload.json")) as f:
        workload = ms.database.Workload.from_json(json.loads(f.readline()))
    best = None
    with open(os.path.join(work_dir, "database_tuning_record.json")) as f:
        for line in list(f)[:n]:
            rec = ms.database.TuningRecord.from_json(json.loads(line)[1], workload)
            if not rec.run_secs:
                continue
            cost = sum(float(s) for s in rec.run_secs) / len(rec.run_secs)
            if best is None or cost < best[0]:
                best = (cost, rec)
    if best is None:
        return None
    sch = tvm.s_tir.Schedule(workload.mod)
    best[1].trace.apply_to_schedule(sch, remove_postproc=False)
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    lib = tvm.compile(mod, target=ms_target(mcpu))
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(np.random.rand(*[int(d) for d in a.shape]).astype(a.dtype), dev)
            for a in ms.arg_info.ArgInfo.from_prim_func(mod["main"])]
    f = lib.mod.time_evaluator("main", dev, number=1, repeat=10, min_repeat_ms=100)
    median = float(np.median(f(*args).results))
    flop = WORKLOADS[op][2]
    return {"search_gflops": flop / best[0] / 1e9, "timed_gflops": flop / median / 1e9}


# ---------------------------------------------------------------- Tessera side
def tessera_records(log):
    """(timestamp, cost or None, is_default) per record, in measurement order."""
    rows = []
    with open(log) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            res = r.get("result", {})
            ok = res.get("error_no", 0) == 0 and res.get("costs")
            rows.append((res.get("timestamp", 0), min(res["costs"]) if ok else None,
                         r.get("schedule", {}).get("kind") == "default"))
    return rows


def tessera_run(bin_dir, workload, op, trials, seed, log, more=()):
    _, shape, flop, extra, _ = WORKLOADS[workload]
    cmd = [os.path.join(bin_dir, "tessera"), "tune", "--op", op, "--op-shape", shape, "--pad", "same",
           "--per-round", str(PER_ROUND), "--remeasure-top", "0", "--tuner-seed",
           str(seed), "--trials", str(trials), "--log", log + ".part"] + extra + list(more)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    os.replace(log + ".part", log)
    rows = tessera_records(log)
    start = int(t0)
    out = {"wall": wall, "checkpoints": {}}
    trials_only = [r for r in rows if not r[2]]
    default = [r[1] for r in rows if r[2] and r[1]]
    for n in sorted({min(PER_ROUND, trials), trials}):
        costs = [c for _, c, _ in trials_only[:n] if c]
        best = min(costs) if costs else None
        with_default = min(costs + default) if costs or default else None
        out["checkpoints"][n] = {
            "search_gflops": flop / best / 1e9 if best else 0.0,
            "with_default_gflops": flop / with_default / 1e9 if with_default else 0.0}
    out["trial_times"] = [(ts - start, c) for ts, c, _ in trials_only]
    return out


def best_by(times, seconds, flop):
    costs = [c for t, c in times if c and t <= seconds]
    return flop / min(costs) / 1e9 if costs else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tvm-python", required=False,
                    help="a Python with apache-tvm 0.27.0.post1 installed")
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--out", default="bench-out/ms")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seeds", default="1,2,3", help="Tessera's tuner seeds")
    ap.add_argument("--ms-seeds", default="1", help="MetaSchedule's seeds")
    ap.add_argument("--only", choices=sorted(WORKLOADS))
    ap.add_argument("--mcpu", default="znver3")
    ap.add_argument("--tessera-flag", action="append", default=[], metavar="FLAG",
                    help="one more flag for each `tessera tune` (repeatable), e.g. "
                    "--tessera-flag=--model-from --tessera-flag=LOG")
    ap.add_argument("--ms-worker", nargs=3, metavar=("OP", "SEED", "WORKDIR"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ms_worker:
        op, seed, work_dir = args.ms_worker
        ms_run(op, args.trials, int(seed), args.mcpu, work_dir)
        return
    if not args.tvm_python:
        sys.exit("--tvm-python is required: a Python with apache-tvm==0.27.0.post1")
    os.makedirs(args.out, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    ms_seeds = [int(s) for s in args.ms_seeds.split(",")]
    env = dict(os.environ, TVM_NUM_THREADS="2")
    results = {}
    for key, (name, _, flop, _, ts_ops) in WORKLOADS.items():
        if args.only and key != args.only:
            continue
        ms_out, ts_out = [], {op: [] for op in ts_ops}
        for i in range(max(len(seeds), len(ms_seeds))):
            if i < len(ms_seeds):
                ms_out.append(ms_cached(args, key, ms_seeds[i], env))
                print(f"{name}: MetaSchedule seed {ms_seeds[i]}: {ms_out[-1]['wall']:.0f} s",
                      file=sys.stderr, flush=True)
            for op in ts_ops if i < len(seeds) else []:
                cache = os.path.join(args.out, f"tessera_{op}_{seeds[i]}.json")
                if not os.path.exists(cache):
                    log = os.path.join(args.out, f"tessera_{op}_{seeds[i]}.jsonl")
                    with open(cache, "w") as f:
                        json.dump(tessera_run(args.bin, key, op, args.trials, seeds[i], log,
                                              args.tessera_flag), f)
                with open(cache) as f:
                    ts_out[op].append(json.load(f))
                print(f"{name}: Tessera {op} seed {seeds[i]}: {ts_out[op][-1]['wall']:.0f} s",
                      file=sys.stderr, flush=True)
        results[key] = (name, flop, ms_out, ts_out)
    report(results, seeds, args.trials)


def ms_cached(args, key, seed, env):
    """One MetaSchedule run (its database kept in the out folder), and its results."""
    cache = os.path.join(args.out, f"ms_{key}_{seed}.json")
    if not os.path.exists(cache):
        work = os.path.join(args.out, f"ms_{key}_{seed}")
        cmd = [args.tvm_python, __file__, "--trials", str(args.trials),
               "--mcpu", args.mcpu, "--ms-worker", key, str(seed), work]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            sys.exit(f"MetaSchedule failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        with open(cache, "w") as f:
            f.write(line[0][len("RESULT "):])
    with open(cache) as f:
        return json.load(f)


def at_trial(times, n):
    """Seconds since the start when the `n`-th trial was measured."""
    return times[min(n, len(times)) - 1][0]


def report(results, seeds, trials):
    checkpoints = sorted({min(PER_ROUND, trials), trials})
    seed_list = " / ".join(map(str, seeds))
    print("Best GFLOPS after N trials. MetaSchedule: its best program timed with the time "
          "evaluator (its own measurement in brackets). Tessera: the search's best "
          "(with the default schedule's record in brackets). Seconds since the start.\n")
    print(f"| workload | Tessera op | trials | MetaSchedule | Tessera, seeds {seed_list} |")
    print("|---|---|---|---|---|")
    for name, flop, ms_out, ts_out in results.values():
        for op, runs in ts_out.items():
            for n in checkpoints:
                ms_cells = [f"{m['checkpoints'][str(n)]['timed_gflops']:.1f} "
                            f"({m['checkpoints'][str(n)]['search_gflops']:.1f}), "
                            f"{at_trial(m['stamps'], n):.0f} s" for m in ms_out]
                ts_cells = [f"{t['checkpoints'][str(n)]['search_gflops']:.1f} "
                            f"({t['checkpoints'][str(n)]['with_default_gflops']:.1f}), "
                            f"{at_trial(t['trial_times'], n):.0f} s" for t in runs]
                print(f"| {name} | {op} | {n} | {'; '.join(ms_cells)} | {'; '.join(ts_cells)} |")
    print("\nAt equal wall-clock time: Tessera's best (trials only) among what it had "
          "measured when MetaSchedule had measured N trials\n")
    print(f"| workload | Tessera op | MetaSchedule trials | seconds | Tessera, seeds {seed_list} |")
    print("|---|---|---|---|---|")
    for name, flop, ms_out, ts_out in results.values():
        for op, runs in ts_out.items():
            for m in ms_out:
                for n in checkpoints:
                    secs = at_trial(m["stamps"], n)
                    cells = [f"{best_by(t['trial_times'], secs, flop):.1f}" for t in runs]
                    print(f"| {name} | {op} | {n} | {secs:.0f} | {' / '.join(cells)} |")


if __name__ == "__main__":
    main()
