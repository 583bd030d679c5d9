#!/usr/bin/env python3
"""Two module files of one model (built before and after a change) timed in alternating
rounds on the same inputs: `tessera run --module M --input … --benchmark` for each, each
round's median per side; reported per input set: each side's best, the per-round ratio
after/before (median, min), the ratio of the minima, and the CPU steal over the run.

    python3 bench/modules_ab.py --before OLD.tsm --after NEW.tsm \
        --inputs input_ids=ids_8x384.npy,attention_mask=mask_8x384.npy [--inputs …] \
        [--rounds 5] [--repeat 3]

Each `--inputs` is one shape (comma-separated NAME=FILE.npy pairs).
"""
import argparse
import statistics
import subprocess


def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def median_ms(exe, module, inputs, repeat):
    cmd = [exe, "run", "--module", module, "--benchmark", "--repeat", str(repeat)]
    for pair in inputs.split(","):
        cmd += ["--input", pair]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    i = next(k for k, l in enumerate(lines) if "median (ms)" in l)
    return float(lines[i + 1].split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--inputs", action="append", required=True)
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    s0, t0 = steal()
    times = {x: ([], []) for x in a.inputs}
    for r in range(a.rounds):
        for x in a.inputs:
            # alternate which side goes first
            sides = [(0, a.before), (1, a.after)]
            for k, m in sides if r % 2 == 0 else sides[::-1]:
                times[x][k].append(median_ms(a.tessera, m, x, a.repeat))
            print(f"round {r + 1} {x}: before {times[x][0][-1]:.2f} ms, after {times[x][1][-1]:.2f} ms",
                  flush=True)
    s1, t1 = steal()
    print(f"steal {100.0 * (s1 - s0) / max(t1 - t0, 1):.2f}%")
    print("| inputs | after / before (median; min; minima) | minima (ms): before, after |")
    print("|---|---|---|")
    for x, (b, f) in times.items():
        ratios = [y / z for y, z in zip(f, b)]
        print(f"| {x} | {statistics.median(ratios):.2f}; {min(ratios):.2f}; {min(f) / min(b):.2f} "
              f"| {min(b):.2f}, {min(f):.2f} |")


if __name__ == "__main__":
    main()
