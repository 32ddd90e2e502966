"""Benchmark: envbuild's conda closure on a channel the size of conda-forge's linux-64.

No real channel is reachable where envbuild is developed, so this writes a synthetic one whose
repodata.json has conda-forge's scale (default 600,000 records, about 300 MB: conda-forge's
linux-64 repodata.json held roughly that many in 2025), with realistic record fields and
dependency fan-out, plus the packages the committed example specs/conda-forge-torch210 needs.
It then runs `envbuild lock --upgrade` on that example with the channel alias pointed at the
file:// channel and reports wall time and peak memory, and the reused lock's time. The peak is
the kernel's (the maximum resident set, from GNU time); /proc/PID/status is sampled
every 20 ms for its split: `RssAnon` (the heap: records, index, solver) and `RssFile`
(file-backed pages: the memory-mapped repodata.json and the binary, page cache the kernel may
reclaim), each the largest sample. Then `lock --offline` with changed inputs solves the same
channel from the gateway's cache alone (for a file:// channel: read in place).

    python3 bench/conda_scale.py [ENVBUILD_BINARY] [RECORDS]

Use a release build (`cargo build --release --locked`); the default is target/release/envbuild.
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/envbuild")
records = int(sys.argv[2]) if len(sys.argv) > 2 else 600_000
rng = random.Random(7)


def hexes(seed):
    h = hashlib.sha256(seed.encode()).hexdigest()
    return h, h[:32]


def rec(name, version, build, depends, number=0, **extra):
    sha, md5 = hexes(f"{name}-{version}-{build}")
    r = {"name": name, "version": version, "build": build, "build_number": number,
         "depends": depends, "license": "BSD-3-Clause", "md5": md5, "sha256": sha,
         "size": 1000 + len(name) * 997 % 50_000_000, "subdir": "linux-64",
         "timestamp": 1700000000000}
    r.update(extra)
    return r


packages = {}


def add(r, ext=".conda"):
    packages[f"{r['name']}-{r['version']}-{r['build']}{ext}"] = r


# What the example needs, shaped like conda-forge's records.
glibc = "__glibc >=2.17,<3.0.a0"
add(rec("python", "3.12.12", "hd63d673_0_cpython", [glibc, "libzlib >=1.3.1,<2.0a0", "openssl >=3.5,<4.0a0"]))
add(rec("libzlib", "1.3.1", "hb9d3cd8_2", [glibc]))
add(rec("openssl", "3.5.4", "h26f9b46_0", [glibc, "ca-certificates"]))
add(rec("ca-certificates", "2025.10.5", "hbd8a1cb_0", [], noarch="generic"))
add(rec("cuda-version", "12.9", "h4f385c5_3", [], constrains=["__cuda >=12.9"]))
add(rec("numpy", "2.3.4", "py312h33ff503_0", [glibc, "python >=3.12,<3.13.0a0"]))
for pkg, ver in (("pytorch", "2.10.0"), ("torchvision", "0.25.0"), ("torchaudio", "2.10.0")):
    deps = [glibc, "python >=3.12,<3.13.0a0", "cuda-version >=12.9,<13", "__cuda", "numpy >=1.23"]
    if pkg != "pytorch":
        deps.append("pytorch 2.10.0.*")
    add(rec(pkg, ver, "cuda129_py312_h0_300", deps))
    add(rec(pkg, ver, "cpu_py312_h0_300", [d for d in deps if "cuda" not in d]))
add(rec("jupyterlab", "4.4.10", "pyhd8ed1ab_0", ["python >=3.9", "tornado >=6.2"], subdir="noarch"))
add(rec("tornado", "6.5.2", "py312h4c3975b_1", [glibc, "python >=3.12,<3.13.0a0"]))

# The rest: conda-forge-like noise. ~20,000 names, many versions and builds each, depending
# on each other and on python/libzlib (the solver must read and index all of it).
names = [f"pkg-{i:05d}" for i in range(20_000)]
i = 0
while len(packages) < records:
    name = names[i % len(names)]
    v = f"{i // len(names) // 5}.{i // len(names) % 5}.{rng.randrange(10)}"
    deps = [glibc] + [f"{rng.choice(names)} >={rng.randrange(3)}" for _ in range(rng.randrange(6))]
    if rng.random() < 0.4:
        deps.append("python >=3.12,<3.13.0a0")
    add(rec(name, v, f"h{i:07x}_{rng.randrange(3)}", deps), ext=rng.choice([".conda", ".tar.bz2"]))
    i += 1

work = tempfile.mkdtemp(prefix="envbuild-conda-scale-")
try:
    chan = os.path.join(work, "conda-forge")
    for sub in ("linux-64", "noarch"):
        os.makedirs(os.path.join(chan, sub))
    lin = {"info": {"subdir": "linux-64"}, "packages": {}, "packages.conda": {}}
    noarch = {"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}}
    for fname, r in packages.items():
        doc = noarch if r["subdir"] == "noarch" else lin
        doc["packages.conda" if fname.endswith(".conda") else "packages"][fname] = r
    for sub, doc in (("linux-64", lin), ("noarch", noarch)):
        with open(os.path.join(chan, sub, "repodata.json"), "w") as f:
            json.dump(doc, f)
    size = os.path.getsize(os.path.join(chan, "linux-64", "repodata.json"))
    spec_dir = os.path.join(work, "spec")
    os.makedirs(spec_dir)
    with open(os.path.join(ROOT, "specs/conda-forge-torch210/envbuild.toml")) as f:
        spec = f.read()
    with open(os.path.join(spec_dir, "envbuild.toml"), "w") as f:
        # The example ships `[lock] closure = false` (no channel answers where it was locked):
        # the bench turns the closure on.
        lock = "[lock]\nclosure = true\nbase-digest = false\n"
        if "\n[lock]\n" in spec:
            head, _, rest = spec.partition("\n[lock]\n")
            rest = "\n".join(l for l in rest.splitlines()
                              if not l.startswith(("closure", "base-digest")))
            f.write(head + "\n" + lock + rest + "\n")
        else:
            f.write(spec + "\n" + lock)
    env = dict(os.environ, ENVBUILD_CONDA_CHANNEL_ALIAS="file://" + work,
               ENVBUILD_CACHE_DIR=os.path.join(work, "cache"))

    def status_kib(pid):
        """VmHWM, RssAnon and RssFile of a running process, in KiB (None once it is gone)."""
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(l.split(":", 1) for l in f if ":" in l)
            return [int(fields[k].split()[0]) for k in ("VmHWM", "RssAnon", "RssFile")]
        except (OSError, KeyError, ValueError):
            return None

    def run(args):
        t = time.monotonic()
        err = tempfile.TemporaryFile(mode="w+")
        # GNU time reports the peak: this process's own rusage would count the pages the
        # forked child shared with this (large) Python before it exec'd envbuild.
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", binary, "lock", "envbuild.toml"]
                             + args, cwd=spec_dir, env=env, stdout=subprocess.DEVNULL, stderr=err)
        anon = file = 0
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                    kids = f.read().split()
            except OSError:
                kids = []
            s = status_kib(kids[0]) if kids else None
            if s:
                anon, file = max(anon, s[1]), max(file, s[2])
            time.sleep(0.02)
        wall = time.monotonic() - t
        err.seek(0)
        said = err.read()
        if p.returncode != 0:
            sys.exit(f"envbuild lock {' '.join(args)} failed:\n{said}")
        return wall, int(said.strip().splitlines()[-1]), anon, file

    def mib(kib):
        return f"{kib / 1024:.0f} MiB"

    wall, peak, anon, file = run(["--upgrade"])
    with open(os.path.join(spec_dir, "envbuild.lock")) as f:
        closure = sum(1 for line in f if line.startswith("[[closure]]"))
    reuse = sorted(run([])[0] for _ in range(5))[2]
    # Changed inputs (one more extra), no request: the same solve, read from the cache alone.
    with open(os.path.join(spec_dir, "envbuild.toml")) as f:
        text = f.read()
    if "conda = [" not in text:
        sys.exit("the example spec has no `conda = [` line to add an extra to")
    with open(os.path.join(spec_dir, "envbuild.toml"), "w") as f:
        f.write(text.replace("conda = [", 'conda = ["tornado=6.5.2", ', 1))
    owall, opeak, oanon, ofile = run(["--offline"])
    print(f"records: {len(packages)} (linux-64 repodata.json {size / 1e6:.0f} MB)")
    print(f"lock --upgrade (read, parse, solve): {wall:.1f} s, peak RSS {mib(peak)} "
          f"(largest samples: RssAnon {mib(anon)}, RssFile {mib(file)}), "
          f"{closure} packages in the closure")
    print(f"lock, closure unchanged (median of 5): {reuse * 1000:.0f} ms")
    print(f"lock --offline, inputs changed: {owall:.1f} s, peak RSS {mib(opeak)} "
          f"(RssAnon {mib(oanon)}, RssFile {mib(ofile)})")
finally:
    shutil.rmtree(work)
