#!/usr/bin/env python3
"""Time envbuild commands on every spec in specs/ with the release binary.

A spec whose committed lock holds a closure (the default) is locked next to a copy of that
lock, so `lock` times the reuse path (closure inputs unchanged, no network, no engine: a relock
with nothing changed), the one its target applies to.

Each command runs RUNS times per spec as a fresh process (what a user or CI pays): wall time
with time.perf_counter around the process, peak resident memory from the child's rusage.
Prints a table; --json writes the figures for the closing note.

    python3 bench/bench.py                 # lock, and render when the binary has it
    python3 bench/bench.py --runs 500 lock
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "envbuild")


def peak_rss_kib(argv):
    """Peak RSS of one run, measured alone (ru_maxrss of waited-for children is a max)."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(argv[0], argv)
    _, status, usage = os.wait4(pid, 0)
    return usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def measure(argv, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000)
        if p.returncode != 0:
            sys.exit(f"{' '.join(argv)} exited {p.returncode}")
    rss, _ = peak_rss_kib(argv)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 3),
        "max_ms": round(times[-1], 3),
        "peak_rss_mib": round(rss / 1024, 2),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("commands", nargs="*", default=["lock", "render"])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    help_text = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    specs = sorted(
        os.path.join(ROOT, "specs", d, "envbuild.toml")
        for d in os.listdir(os.path.join(ROOT, "specs"))
        if os.path.isfile(os.path.join(ROOT, "specs", d, "envbuild.toml"))
    )
    results = {}
    with tempfile.TemporaryDirectory() as out:
        for cmd in args.commands:
            if f"  {cmd} " not in help_text and f"\n  {cmd}" not in help_text:
                print(f"(skipping `{cmd}`: this binary has no such command)", file=sys.stderr)
                continue
            for spec in specs:
                name = os.path.basename(os.path.dirname(spec))
                out_dir = os.path.join(out, name, cmd)
                argv = [BIN, cmd, spec, "--out", out_dir]
                # A closure lock is reused when its inputs are unchanged (no network): time that
                # path, from a copy of the committed lock.
                committed = os.path.join(os.path.dirname(spec), "envbuild.lock")
                if cmd == "lock" and "[[closure]]" in open(committed).read():
                    os.makedirs(out_dir, exist_ok=True)
                    shutil.copy(os.path.join(os.path.dirname(spec), "envbuild.lock"), out_dir)
                results[f"{cmd} {name}"] = measure(argv, args.runs)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return
    width = max(len(k) for k in results) if results else 10
    print(f"{'command spec':<{width}}  {'median ms':>9}  {'p95 ms':>7}  {'max ms':>7}  {'peak RSS MiB':>12}")
    for k, r in results.items():
        print(f"{k:<{width}}  {r['median_ms']:>9.2f}  {r['p95_ms']:>7.2f}  {r['max_ms']:>7.2f}  {r['peak_rss_mib']:>12.2f}")
    print(f"({args.runs} runs each, fresh process per run, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
