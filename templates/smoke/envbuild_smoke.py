#!/usr/bin/env python3
# envbuild smoke test (schema 1). Generated and embedded by envbuild; do not edit in an image.
#
# Answers "is this PyTorch really using the GPU, and if not, why?" with a verdict. Runs with the
# standard library plus torch, prints ONE JSON document on stdout (even when torch is missing or
# something unexpected breaks) and exits:
#   0  every required check passed (warnings allowed)
#   1  a required check failed
#   2  usage error (bad arguments or an unreadable --expect file)
#
# Usage: envbuild_smoke.py [--expect FILE] [--mode gpu|cpu] [--no-throughput]
#   --expect FILE    the lock's expectations as JSON (see `envbuild smoke --help`)
#   --mode gpu       a GPU must be usable (default)
#   --mode cpu       GPU-less CI: check everything that needs no device; GPU checks are skipped
#   --no-throughput  skip the throughput probes
#
# Probe overrides, for tests only (each "0" or "1"): ENVBUILD_SMOKE_LIBCUDA (libcuda.so.1
# loadable), ENVBUILD_SMOKE_DEV_NODES (/dev/nvidia* present), ENVBUILD_SMOKE_IN_CONTAINER.
#
# Inputs are only ever parsed as JSON and compared as strings; nothing is evaluated.

import json
import math
import os
import platform
import sys
import time
import traceback
import warnings

SCHEMA = 1
START = time.perf_counter()

# Nominal dense peaks (vendor datasheet figures, no sparsity), used only to say "far below
# peak". Keys are matched as consecutive words of the device name, most specific first.
# Fields: bf16 TFLOP/s (fp16 where the GPU has no bf16), tf32 TFLOP/s (fp32 where it has no
# tf32), host link GB/s (PCIe x16 nominal: gen3 16, gen4 32, gen5 64).
NOMINAL_PEAKS = [
    ("H100 PCIE", {"bf16": 756.0, "tf32": 378.0, "h2d": 64.0}),
    ("H100 NVL", {"bf16": 835.0, "tf32": 418.0, "h2d": 64.0}),
    ("H100", {"bf16": 989.0, "tf32": 494.0, "h2d": 64.0}),
    ("H200", {"bf16": 989.0, "tf32": 494.0, "h2d": 64.0}),
    ("B200", {"bf16": 2250.0, "tf32": 1100.0, "h2d": 64.0}),
    ("A100", {"bf16": 312.0, "tf32": 156.0, "h2d": 32.0}),
    ("A10G", {"bf16": 70.0, "tf32": 35.0, "h2d": 32.0}),
    ("A10", {"bf16": 125.0, "tf32": 62.5, "h2d": 32.0}),
    ("L40S", {"bf16": 362.0, "tf32": 183.0, "h2d": 32.0}),
    ("L40", {"bf16": 181.0, "tf32": 90.5, "h2d": 32.0}),
    ("L4", {"bf16": 121.0, "tf32": 60.0, "h2d": 32.0}),
    ("T4", {"bf16": 65.0, "tf32": 8.1, "h2d": 16.0}),
    ("V100", {"bf16": 125.0, "tf32": 15.7, "h2d": 16.0}),
]
# Below these fractions of the nominal peak a figure is reported as a warning.
TFLOPS_WARN_FRACTION = 0.3
H2D_WARN_FRACTION = 0.5
# Docker's default /dev/shm is 64 MiB, which DataLoader workers (num_workers > 0) exhaust.
DEFAULT_MIN_SHM_BYTES = 1 << 30
# Probe sizes: a 4096^2 matmul is 137 GFLOP, large enough to reach the tensor cores' rate;
# 64 MiB copies amortise the launch cost. Each probe runs about 0.3-0.4 s.
THROUGHPUT_N = 4096
COPY_BYTES = 64 << 20


class UsageError(Exception):
    pass


class Report:
    def __init__(self, mode):
        self.mode = mode
        self.env = {}
        self.checks = []

    def add(self, name, status, code, detail, required=True, value=None, unit=None):
        check = {
            "name": name,
            "status": status,
            "code": code,
            "detail": one_line(detail),
            "required": bool(required),
        }
        # JSON has no NaN/Infinity (serde refuses them): leave such a figure out.
        if value is not None and math.isfinite(float(value)):
            check["value"] = float(value)
        if unit is not None:
            check["unit"] = unit
        self.checks.append(check)
        return check

    def ok(self, name, detail, required=True, **kw):
        return self.add(name, "pass", "OK", detail, required, **kw)

    def skip(self, name, code, detail, required=True):
        return self.add(name, "skip", code, detail, required)

    def failed(self):
        return any(c["status"] == "fail" and c["required"] for c in self.checks)

    def document(self):
        return {
            "schema": SCHEMA,
            "status": "fail" if self.failed() else "pass",
            "mode": self.mode,
            "duration_s": round(time.perf_counter() - START, 3),
            "environment": self.env,
            "checks": self.checks,
        }


def one_line(text):
    text = " ".join(str(text).split())
    return text if len(text) <= 400 else text[:397] + "..."


def error_text(exc):
    return one_line("%s: %s" % (type(exc).__name__, exc))


def guarded(report, name, fn, *args, required=True):
    """Run one check; an exception becomes a failed check with its text, never a traceback."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error must end up in the JSON
        code = "ARCH_MISSING" if "no kernel image" in str(exc) else "CHECK_ERROR"
        status = "fail" if required else "warn"
        # The check may have reported before it broke: keep names unique.
        if any(c["name"] == name for c in report.checks):
            name += "_error"
        report.add(name, status, code, error_text(exc), required)
        return None


# ---------------------------------------------------------------- arguments and expectations

EXPECT_STR_KEYS = ("torch", "cuda", "cudnn", "nccl", "python")


def parse_args(argv):
    opts = {"expect": None, "mode": "gpu", "throughput": True}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--expect", "--mode"):
            if i + 1 >= len(argv):
                raise UsageError("%s needs a value" % arg)
            opts[arg[2:]] = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--expect="):
            opts["expect"] = arg.split("=", 1)[1]
        elif arg.startswith("--mode="):
            opts["mode"] = arg.split("=", 1)[1]
        elif arg == "--no-throughput":
            opts["throughput"] = False
        else:
            raise UsageError("unknown argument %r" % arg)
        i += 1
    if opts["mode"] not in ("gpu", "cpu"):
        raise UsageError("--mode must be gpu or cpu, not %r" % opts["mode"])
    return opts


def load_expectations(path):
    if path is None:
        return {}
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError("cannot read --expect %s: %s" % (path, error_text(exc)))
    if not isinstance(data, dict):
        raise UsageError("--expect %s must hold a JSON object" % path)
    for key in EXPECT_STR_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise UsageError("expectation %r must be a string" % key)
    arch = data.get("arch_list", [])
    if not isinstance(arch, list) or not all(isinstance(a, str) for a in arch):
        raise UsageError("expectation 'arch_list' must be a list of strings")
    pkgs = data.get("packages", {})
    if not isinstance(pkgs, dict) or not all(isinstance(v, str) for v in pkgs.values()):
        raise UsageError("expectation 'packages' must map names to version strings")
    shm = data.get("min_shm_bytes")
    if shm is not None and (not isinstance(shm, int) or isinstance(shm, bool) or shm < 0):
        raise UsageError("expectation 'min_shm_bytes' must be a non-negative integer")
    return data


# ---------------------------------------------------------------- version helpers

def numeric_parts(text):
    """`2.5.1+cu124` -> [2, 5, 1]; stops at the first non-numeric component (`2.6.0a0` -> [2, 6])."""
    parts = []
    for piece in str(text).split("+", 1)[0].split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    return parts


def version_matches(actual, expected):
    """Expected `3.10` matches `3.10.14`; `2.5.1` matches `2.5.1+cu124`; a local part
    in the expectation (`2.5.1+cu124`) must match exactly."""
    actual = str(actual)
    expected = str(expected).strip()
    if "+" in expected:
        return actual == expected
    if actual.split("+", 1)[0] == expected:
        return True
    exp = numeric_parts(expected)
    act = numeric_parts(actual)
    return bool(exp) and expected.replace(".", "").isdigit() and act[: len(exp)] == exp


def compare_version(report, name, label, actual, expected, required=True):
    if actual is None:
        if expected:
            report.add(name, "fail", "VERSION_DRIFT",
                       "%s not found; the lock expects %s" % (label, expected), required)
        else:
            report.skip(name, "NOT_PRESENT", "%s not present" % label, required)
        return
    if not expected:
        report.ok(name, "%s %s (no expectation)" % (label, actual), required)
    elif version_matches(actual, expected):
        report.ok(name, "%s %s matches the lock" % (label, actual), required)
    else:
        report.add(name, "fail", "VERSION_DRIFT",
                   "%s is %s but the lock expects %s (replaced by a later install?)"
                   % (label, actual, expected), required)


def cudnn_text(v):
    """cuDNN's integer version: 8902 -> 8.9.2 (cuDNN 8), 90100 -> 9.1.0 (cuDNN 9+)."""
    if v is None:
        return None
    v = int(v)
    if v < 10000:
        return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)
    return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)


def nccl_text(v):
    """NCCL version as a tuple (2, 21, 5) or, on older torch, an int (2708 or 22105)."""
    if v is None:
        return None
    if isinstance(v, (tuple, list)):
        return ".".join(str(int(p)) for p in v[:3])
    v = int(v)
    if v < 10000:
        return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)
    return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)


def cudnn_matches(actual, expected):
    """Compared by major.minor.patch: `9.1.0.70` (lock) matches 9.1.0 (torch)."""
    return numeric_parts(actual)[:3] == numeric_parts(expected)[:3]


def arch_cc(entry):
    """`sm_90`, `sm_90a` -> (9, 0, 'sm'); `compute_90` -> (9, 0, 'compute'); else None."""
    entry = entry.strip().lower()
    for prefix, kind in (("sm_", "sm"), ("compute_", "compute")):
        if entry.startswith(prefix):
            digits = entry[len(prefix):].rstrip("af")
            if 2 <= len(digits) <= 3 and digits.isdigit():
                return int(digits[:-1]), int(digits[-1]), kind
    return None


def coverage(arch_list, cc):
    """The same rule as envbuild's `version::coverage`: an sm_XY cubin runs on X.Z with Z >= Y
    (same major); compute_XY PTX is JIT-compiled for any newer device."""
    cubins = []
    ptx = []
    for entry in arch_list:
        parsed = arch_cc(entry)
        if parsed is None:
            continue
        (cubins if parsed[2] == "sm" else ptx).append(parsed[:2])
    best = [c for c in cubins if c[0] == cc[0] and c[1] <= cc[1]]
    if best:
        return "cubin", max(best)
    fwd = [p for p in ptx if p <= tuple(cc)]
    if fwd:
        return "ptx", max(fwd)
    return None, None


def nominal_peak(device_name):
    words = device_name.upper().replace("-", " ").replace("_", " ").split()
    for key, peaks in NOMINAL_PEAKS:
        kw = key.split()
        for i in range(len(words) - len(kw) + 1):
            if words[i: i + len(kw)] == kw:
                return key, peaks
    return None, None


# ---------------------------------------------------------------- environment probes

def flag_override(var):
    value = os.environ.get(var)
    if value in ("0", "1"):
        return value == "1"
    return None


def libcuda_loadable():
    forced = flag_override("ENVBUILD_SMOKE_LIBCUDA")
    if forced is not None:
        return forced, "forced by ENVBUILD_SMOKE_LIBCUDA"
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        return True, "libcuda.so.1 loaded"
    except OSError as exc:
        return False, one_line(str(exc))


def nvidia_dev_nodes():
    forced = flag_override("ENVBUILD_SMOKE_DEV_NODES")
    if forced is not None:
        return ["(forced)"] if forced else []
    try:
        return sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        return []


def in_container():
    forced = flag_override("ENVBUILD_SMOKE_IN_CONTAINER")
    if forced is not None:
        return forced
    return os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")


def classify_cuda_unavailable(error, env, libcuda_ok, dev_nodes, container):
    """Why CUDA is unavailable: (code, detail). `error` is torch's message or warning text."""
    text = error or ""
    low = text.lower()
    said = (": " + one_line(text)) if text else ""
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if "too old" in low:
        return ("CUDA_DRIVER_TOO_OLD",
                "the NVIDIA driver is too old for this build's CUDA; update the host driver or "
                "lock an older CUDA" + said)
    if nvd is not None and nvd.strip().lower() in ("", "void", "none"):
        return ("NO_GPU_VISIBLE",
                "NVIDIA_VISIBLE_DEVICES=%r hides every GPU from this container%s" % (nvd, said))
    if cvd is not None and cvd.strip() in ("", "-1"):
        return ("NO_GPU_VISIBLE",
                "CUDA_VISIBLE_DEVICES=%r hides every GPU from this process%s" % (cvd, said))
    if not libcuda_ok:
        if dev_nodes:
            return ("CUDA_UNAVAILABLE_NO_DRIVER",
                    "GPU device nodes exist but the driver library libcuda.so.1 is not loadable "
                    "(driver libraries not mounted or installed)" + said)
        if container:
            return ("NO_GPU_VISIBLE",
                    "no GPU in this container: no /dev/nvidia* and no libcuda.so.1; start it "
                    "with a GPU request (`docker run --gpus all` or a CDI device)" + said)
        return ("CUDA_UNAVAILABLE_NO_DRIVER",
                "no NVIDIA driver library (libcuda.so.1) on this system" + said)
    if "no cuda-capable device" in low or "no nvidia gpu" in low or not dev_nodes:
        return ("NO_GPU_VISIBLE", "the driver is present but no GPU is visible" + said)
    if "found no nvidia driver" in low:
        return ("CUDA_UNAVAILABLE_NO_DRIVER", "torch found no NVIDIA driver" + said)
    return ("CUDA_UNAVAILABLE",
            "CUDA is unavailable for an unclassified reason (a driver/library mismatch after a "
            "driver update often reads 'CUDA driver initialization failed')" + (said or ": no "
                                                                                   "error text"))


def shm_bytes(path="/dev/shm"):
    st = os.statvfs(path)
    return st.f_frsize * st.f_blocks, st.f_frsize * st.f_bavail


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return str(n)


# ---------------------------------------------------------------- the checks

def check_python(report, expect):
    actual = "%d.%d.%d" % sys.version_info[:3]
    report.env["python"] = actual
    report.env["python_executable"] = sys.executable
    report.env["platform"] = platform.platform()
    compare_version(report, "python", "Python", actual, expect.get("python"))


def import_torch(report):
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            report.add("torch_import", "fail", "TORCH_MISSING",
                       "torch is not installed in %s" % sys.executable)
        else:
            report.add("torch_import", "fail", "TORCH_IMPORT_ERROR",
                       "import torch failed: " + error_text(exc))
        return None
    except BaseException as exc:  # noqa: BLE001 - an import can raise anything, even SystemExit
        report.add("torch_import", "fail", "TORCH_IMPORT_ERROR",
                   "import torch failed: " + error_text(exc))
        return None
    took = time.perf_counter() - t0
    record_warnings(report, caught)
    report.env["torch_import_s"] = round(took, 3)
    report.env["torch_file"] = getattr(torch, "__file__", None)
    report.ok("torch_import", "import torch took %.1f s" % took)
    return torch


def record_warnings(report, caught):
    texts = report.env.setdefault("warnings", [])
    for w in caught:
        texts.append(one_line(str(w.message)))


def check_torch_version(report, torch, expect):
    version = str(getattr(torch, "__version__", "unknown"))
    report.env["torch"] = version
    compare_version(report, "torch_version", "torch", version, expect.get("torch"))
    return version


def build_info(torch, version):
    tv = getattr(torch, "version", None)
    cuda = getattr(tv, "cuda", None) if tv is not None else None
    hip = getattr(tv, "hip", None) if tv is not None else None
    return cuda, hip


def check_cuda_build(report, torch, version, expect, mode):
    cuda, hip = build_info(torch, version)
    report.env["cuda"] = cuda
    if hip:
        report.env["hip"] = hip
    want = expect.get("cuda")
    cpu_build = cuda is None or "+cpu" in version
    if hip:
        report.add("cuda_build", "fail", "TORCH_ROCM_BUILD",
                   "torch %s is a ROCm (HIP %s) build, not a CUDA build" % (version, hip))
        return False
    if cpu_build:
        why = "torch %s is a CPU-only build (torch.version.cuda is %s)" % (version, cuda)
        if want:
            report.add("cuda_build", "fail", "TORCH_CPU_BUILD",
                       why + "; the lock expects CUDA %s (a pip install replaced it?)" % want)
        elif mode == "gpu":
            report.add("cuda_build", "fail", "TORCH_CPU_BUILD", why + "; it can never use a GPU")
        else:
            report.add("cuda_build", "warn", "TORCH_CPU_BUILD", why + "; no lock expects CUDA",
                       required=False)
        return False
    report.ok("cuda_build", "torch %s is a CUDA %s build" % (version, cuda))
    if want:
        if numeric_parts(cuda)[:2] == numeric_parts(want)[:2]:
            report.ok("cuda_version", "torch.version.cuda %s matches the lock's CUDA %s"
                      % (cuda, want))
        else:
            report.add("cuda_version", "fail", "VERSION_DRIFT",
                       "torch.version.cuda is %s but the lock expects CUDA %s" % (cuda, want))
    else:
        report.ok("cuda_version", "CUDA %s (no expectation)" % cuda)
    return True


def read_arch_list(torch):
    """torch.cuda.get_arch_list() returns [] until CUDA is usable; the compiled flags are
    readable without a device through torch._C._cuda_getArchFlags()."""
    arch = []
    source = None
    try:
        arch = list(torch.cuda.get_arch_list())
        source = "torch.cuda.get_arch_list()"
    except Exception:  # noqa: BLE001 - fall through to the compiled flags
        arch = []
    if not arch:
        flags_fn = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
        if flags_fn is not None:
            flags = flags_fn()
            if flags:
                arch = str(flags).split()
                source = "torch._C._cuda_getArchFlags()"
    return arch, source


def check_arch_list(report, torch, expect, is_cuda):
    if not is_cuda:
        report.skip("arch_list", "NOT_CUDA_BUILD", "not a CUDA build")
        return []
    arch, source = read_arch_list(torch)
    report.env["arch_list"] = arch
    report.env["arch_list_source"] = source
    want = expect.get("arch_list") or []
    if not arch:
        if want:
            report.add("arch_list", "fail", "ARCH_UNKNOWN",
                       "cannot read the build's architecture list; the lock expects %s"
                       % " ".join(want))
        else:
            report.add("arch_list", "warn", "ARCH_UNKNOWN",
                       "cannot read the build's architecture list", required=False)
        return arch
    have = set(a.lower() for a in arch)
    missing = [a for a in want if a.lower() not in have]
    if missing:
        report.add("arch_list", "fail", "ARCH_MISSING",
                   "the build lacks %s of the lock's architectures (has: %s)"
                   % (" ".join(missing), " ".join(arch)))
    elif want:
        report.ok("arch_list", "carries every locked architecture: %s (from %s)"
                  % (" ".join(arch), source))
    else:
        report.ok("arch_list", "%s (from %s; no expectation)" % (" ".join(arch), source))
    return arch


def check_cudnn(report, torch, expect, is_cuda):
    want = expect.get("cudnn")
    if not is_cuda:
        report.skip("cudnn_version", "NOT_CUDA_BUILD", "not a CUDA build")
        return
    backends = getattr(torch, "backends", None)
    cudnn = getattr(backends, "cudnn", None)
    raw = cudnn.version() if cudnn is not None else None
    actual = cudnn_text(raw)
    report.env["cudnn"] = actual
    if actual is None:
        if want:
            report.add("cudnn_version", "fail", "CUDNN_UNAVAILABLE",
                       "cuDNN is not available to torch; the lock expects %s" % want)
        else:
            report.add("cudnn_version", "warn", "CUDNN_UNAVAILABLE",
                       "cuDNN is not available to torch", required=False)
    elif not want:
        report.ok("cudnn_version", "cuDNN %s (no expectation)" % actual)
    elif cudnn_matches(actual, want):
        report.ok("cudnn_version", "cuDNN %s matches the lock's %s" % (actual, want))
    else:
        report.add("cudnn_version", "fail", "VERSION_DRIFT",
                   "cuDNN is %s but the lock expects %s" % (actual, want))


def check_nccl(report, torch, expect, is_cuda):
    want = expect.get("nccl")
    if not is_cuda:
        report.skip("nccl_version", "NOT_CUDA_BUILD", "not a CUDA build")
        return
    actual = None
    err = None
    try:
        # torch.cuda does not always import its nccl submodule itself.
        import importlib

        nccl = importlib.import_module("torch.cuda.nccl")
        actual = nccl_text(nccl.version())
    except Exception as exc:  # noqa: BLE001 - reported below
        err = error_text(exc)
    report.env["nccl"] = actual
    if actual is None:
        why = "NCCL version unreadable" + (": " + err if err else "")
        if want:
            report.add("nccl_version", "fail", "NCCL_UNAVAILABLE",
                       why + "; the lock expects %s" % want)
        else:
            report.skip("nccl_version", "NCCL_UNAVAILABLE", why, required=False)
    elif not want:
        report.ok("nccl_version", "NCCL %s (no expectation)" % actual)
    elif cudnn_matches(actual, want):
        report.ok("nccl_version", "NCCL %s matches the lock" % actual)
    else:
        report.add("nccl_version", "fail", "VERSION_DRIFT",
                   "NCCL is %s but the lock expects %s" % (actual, want))


def check_packages(report, expect):
    pkgs = expect.get("packages") or {}
    if not pkgs:
        return
    from importlib import metadata

    for name in sorted(pkgs):
        want = pkgs[name]
        check = "package:" + name
        try:
            actual = metadata.version(name)
        except metadata.PackageNotFoundError:
            report.add(check, "fail", "PACKAGE_MISSING",
                       "%s is not installed; the lock expects %s" % (name, want))
            continue
        compare_version(report, check, name, actual, want)


def check_shm(report, expect):
    want = expect.get("min_shm_bytes")
    try:
        total, free = shm_bytes()
    except OSError as exc:
        status = "fail" if want else "warn"
        report.add("shm", status, "SHM_TOO_SMALL",
                   "/dev/shm is unavailable (%s); DataLoader workers need shared memory"
                   % error_text(exc), required=bool(want))
        return
    report.env["shm_bytes"] = total
    need = want if want is not None else DEFAULT_MIN_SHM_BYTES
    detail = "/dev/shm is %s (%s free)" % (human_bytes(total), human_bytes(free))
    if total >= need:
        report.ok("shm", detail + ", at least %s" % human_bytes(need), required=bool(want),
                  value=total, unit="bytes")
    else:
        report.add("shm", "fail" if want else "warn", "SHM_TOO_SMALL",
                   detail + "; DataLoader workers (num_workers > 0) need %s: run the container "
                   "with --shm-size=%dg or --ipc=host" % (human_bytes(need), max(1, need >> 30)),
                   required=bool(want), value=total, unit="bytes")


def cuda_probe(torch):
    """is_available() plus the error text behind a False: its warnings, then init()'s error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
        texts = [one_line(str(w.message)) for w in caught]
    error = None
    if not available:
        try:
            torch.cuda.init()
        except Exception as exc:  # noqa: BLE001 - this is the text we are after
            error = one_line(str(exc))
    if error is None and texts:
        error = texts[0]
    return available, error, texts


def check_cuda_available(report, torch, mode, is_cuda):
    if not is_cuda:
        report.skip("cuda_available", "NOT_CUDA_BUILD", "not a CUDA build")
        return False
    available, error, texts = cuda_probe(torch)
    report.env["cuda_available"] = available
    report.env.setdefault("warnings", []).extend(texts)
    report.env["NVIDIA_VISIBLE_DEVICES"] = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    report.env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mode == "cpu":
        report.skip("cuda_available", "CPU_MODE",
                    "cpu mode: CUDA is %savailable here" % ("" if available else "not "))
        return False
    if available:
        count = torch.cuda.device_count()
        report.ok("cuda_available", "CUDA is available with %d device(s)" % count)
        return True
    lib_ok, lib_detail = libcuda_loadable()
    nodes = nvidia_dev_nodes()
    container = in_container()
    report.env["libcuda"] = lib_detail
    report.env["dev_nvidia"] = nodes
    report.env["in_container"] = container
    code, detail = classify_cuda_unavailable(error, os.environ, lib_ok, nodes, container)
    report.add("cuda_available", "fail", code, detail)
    return False


def check_devices(report, torch, arch):
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        devices.append({
            "index": i,
            "name": str(props.name),
            "cc": "%d.%d" % (props.major, props.minor),
            "memory_bytes": int(props.total_memory),
        })
    report.env["devices"] = devices
    report.env["device_count"] = len(devices)
    if not devices:
        report.add("devices", "fail", "NO_GPU_VISIBLE", "CUDA is available but lists no device")
        return devices
    report.ok("devices", "; ".join(
        "%d: %s (sm_%s, %s)" % (d["index"], d["name"], d["cc"].replace(".", ""),
                               human_bytes(d["memory_bytes"])) for d in devices))
    if not arch:
        report.add("arch_coverage", "warn", "ARCH_UNKNOWN",
                   "the build's architecture list is unknown; coverage not checked",
                   required=False)
        return devices
    problems = []
    ptx_only = []
    for d in devices:
        major, minor = (int(p) for p in d["cc"].split("."))
        kind, _ = coverage(arch, (major, minor))
        if kind is None:
            problems.append("%d: %s (sm_%d%d)" % (d["index"], d["name"], major, minor))
        elif kind == "ptx":
            ptx_only.append("%d: %s (sm_%d%d)" % (d["index"], d["name"], major, minor))
    if problems:
        report.add("arch_coverage", "fail", "ARCH_MISSING",
                   "no kernel image for %s in the build's %s: 'no kernel image is available "
                   "for execution on the device'" % (", ".join(problems), " ".join(arch)))
    elif ptx_only:
        report.add("arch_coverage", "warn", "ARCH_PTX_ONLY",
                   "only PTX (JIT-compiled at first use, slow start) for %s" % ", ".join(ptx_only),
                   required=False)
    else:
        report.ok("arch_coverage", "every device has a native kernel image in the build")
    return devices


def max_abs_diff(torch, a, b):
    return float((a.float() - b.float()).abs().max().item())


def check_matmul(report, torch):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=gen)
    b = torch.randn(256, 256, generator=gen)
    want = a @ b
    # The correctness check runs in full fp32: TF32 would legitimately differ by ~1e-2.
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        got = (a.to("cuda") @ b.to("cuda")).cpu()
        torch.cuda.synchronize()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    diff = max_abs_diff(torch, got, want)
    scale = max(1.0, float(want.abs().max().item()))
    if diff / scale > 1e-3:
        report.add("matmul", "fail", "MATMUL_WRONG",
                   "GPU matmul differs from the CPU result by %.3g (relative %.3g)"
                   % (diff, diff / scale))
    else:
        report.ok("matmul", "256x256 fp32 matmul on GPU matches the CPU (max diff %.2g)" % diff)


def check_autocast(report, torch):
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    name = "bf16" if dtype is torch.bfloat16 else "fp16"
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(128, 128, generator=gen)
    b = torch.randn(128, 128, generator=gen)
    want = a @ b
    with torch.autocast(device_type="cuda", dtype=dtype):
        out = a.to("cuda") @ b.to("cuda")
    torch.cuda.synchronize()
    if out.dtype != dtype:
        report.add("autocast", "fail", "AUTOCAST_FAILED",
                   "autocast(%s) produced %s" % (name, out.dtype))
        return
    diff = max_abs_diff(torch, out.cpu(), want)
    scale = max(1.0, float(want.abs().max().item()))
    if diff / scale > 5e-2:
        report.add("autocast", "fail", "MATMUL_WRONG",
                   "%s autocast matmul is off by %.3g (relative %.3g)" % (name, diff, diff / scale))
    else:
        report.ok("autocast", "%s autocast matmul matches the CPU within %.2g" % (name, diff))


def check_cudnn_conv(report, torch):
    if not torch.backends.cudnn.is_available():
        report.add("cudnn_conv", "fail", "CUDNN_UNAVAILABLE", "cuDNN is not available on the GPU")
        return
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 32, 32, generator=gen)
    w = torch.randn(8, 3, 3, 3, generator=gen)
    want = torch.nn.functional.conv2d(x, w, padding=1)
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        got = torch.nn.functional.conv2d(x.to("cuda"), w.to("cuda"), padding=1).cpu()
        torch.cuda.synchronize()
    finally:
        torch.backends.cudnn.allow_tf32 = old
    diff = max_abs_diff(torch, got, want)
    if diff > 1e-3 * max(1.0, float(want.abs().max().item())):
        report.add("cudnn_conv", "fail", "CUDNN_CONV_WRONG",
                   "cuDNN convolution differs from the CPU by %.3g" % diff)
    else:
        report.ok("cudnn_conv", "cuDNN conv2d matches the CPU (max diff %.2g)" % diff)


def check_nccl_allreduce(report, torch, devices):
    if len(devices) < 2:
        report.skip("nccl_allreduce", "ONE_GPU", "needs two or more GPUs", required=False)
        return
    from torch.cuda import nccl

    n = len(devices)
    tensors = [torch.full((1024,), float(i + 1), device="cuda:%d" % i) for i in range(n)]
    nccl.all_reduce(tensors)
    for i in range(n):
        torch.cuda.synchronize(i)
    want = float(n * (n + 1) // 2)
    bad = [i for i, t in enumerate(tensors) if float((t - want).abs().max().item()) > 1e-3]
    if bad:
        report.add("nccl_allreduce", "fail", "NCCL_FAILED",
                   "NCCL all-reduce over %d GPUs gave a wrong sum on device(s) %s"
                   % (n, ", ".join(map(str, bad))))
    else:
        report.ok("nccl_allreduce", "NCCL all-reduce over %d GPUs is correct" % n)


def check_pinned_copy(report, torch):
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    if not host.is_pinned():
        report.add("pinned_copy", "fail", "PINNED_COPY_FAILED", "pin_memory() did not pin")
        return
    dev = host.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    if float((dev.cpu() - host).abs().max().item()) != 0.0:
        report.add("pinned_copy", "fail", "PINNED_COPY_FAILED",
                   "pinned host-to-device copy corrupted the data")
    else:
        report.ok("pinned_copy", "pinned host-to-device copy (4 MiB, non_blocking) is correct")


def timed(torch, fn, budget_s=0.4, max_iters=50):
    """Run fn repeatedly for about budget_s after a warm-up; returns seconds per call."""
    fn()
    torch.cuda.synchronize()
    iters = 0
    t0 = time.perf_counter()
    while iters < max_iters:
        for _ in range(5):
            fn()
        iters += 5
        torch.cuda.synchronize()
        if time.perf_counter() - t0 > budget_s:
            break
    return (time.perf_counter() - t0) / iters


def figure(value):
    return ("%.1f" % value) if value >= 10 else ("%.3g" % value)


def throughput_verdict(report, name, label, value, unit, peak, fraction, what):
    if peak:
        pct = 100.0 * value / peak
        detail = "%s %s %s = %.0f%% of the nominal %s peak %s %s" % (
            label, figure(value), unit, pct, what, "%g" % peak, unit)
        if value < fraction * peak:
            report.add(name, "warn", "THROUGHPUT_LOW",
                       detail + " (throttled clocks, a MIG slice, another process, or a "
                       "narrow PCIe link?)", required=False, value=value, unit=unit)
            return
        report.ok(name, detail, required=False, value=value, unit=unit)
    else:
        report.ok(name, "%s %s %s (no nominal peak known for this GPU)" % (label, figure(value), unit),
                  required=False, value=value, unit=unit)


def check_throughput(report, torch, devices):
    device = devices[0]
    key, peaks = nominal_peak(device["name"])
    report.env["nominal_peaks"] = {"matched": key, **(peaks or {})}
    n = THROUGHPUT_N
    bf16 = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def matmul_probe(name, label, dtype, tf32, peak_key):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            secs = timed(torch, lambda: a @ b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        tflops = 2.0 * n ** 3 / secs / 1e12
        throughput_verdict(report, name, label, tflops, "TFLOP/s",
                           peaks and peaks.get(peak_key), TFLOPS_WARN_FRACTION, "dense")

    guarded(report, "tflops_bf16", matmul_probe, "tflops_bf16",
            "bf16" if bf16 is torch.bfloat16 else "fp16", bf16, False, "bf16", required=False)
    guarded(report, "tflops_tf32", matmul_probe, "tflops_tf32", "fp32/tf32", torch.float32,
            True, "tf32", required=False)

    size = COPY_BYTES

    def copy_probe(name, label, pinned):
        host = torch.empty(size, dtype=torch.uint8)
        if pinned:
            host = host.pin_memory()
        dev = torch.empty(size, dtype=torch.uint8, device="cuda")
        secs = timed(torch, lambda: dev.copy_(host, non_blocking=pinned), budget_s=0.3,
                     max_iters=20)
        gbs = size / secs / 1e9
        if pinned:
            throughput_verdict(report, name, label, gbs, "GB/s", peaks and peaks.get("h2d"),
                               H2D_WARN_FRACTION, "PCIe x16")
        else:
            report.ok(name, "%s %s GB/s (pageable memory is always slower than pinned)"
                      % (label, figure(gbs)), required=False, value=gbs, unit="GB/s")

    guarded(report, "h2d_pinned", copy_probe, "h2d_pinned", "host-to-device pinned", True,
            required=False)
    guarded(report, "h2d_pageable", copy_probe, "h2d_pageable", "host-to-device pageable",
            False, required=False)


GPU_CHECKS = ("devices", "arch_coverage", "matmul", "autocast", "cudnn_conv", "nccl_allreduce",
              "pinned_copy", "tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable")
OPTIONAL = ("nccl_allreduce", "tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable")


def skip_gpu_checks(report, code, why):
    for name in GPU_CHECKS:
        report.skip(name, code, why, required=name not in OPTIONAL)


def run_checks(report, opts, expect):
    mode = opts["mode"]
    guarded(report, "python", check_python, report, expect)
    guarded(report, "shm", check_shm, report, expect)
    torch = import_torch(report)
    if torch is None:
        for name in ("torch_version", "cuda_build", "arch_list", "cudnn_version",
                     "nccl_version", "cuda_available"):
            report.skip(name, "NO_TORCH", "torch could not be imported")
        guarded(report, "packages", check_packages, report, expect)
        skip_gpu_checks(report, "NO_TORCH", "torch could not be imported")
        return
    version = guarded(report, "torch_version", check_torch_version, report, torch, expect)
    is_cuda = bool(guarded(report, "cuda_build", check_cuda_build, report, torch,
                           str(version or ""), expect, mode))
    arch = guarded(report, "arch_list", check_arch_list, report, torch, expect, is_cuda) or []
    guarded(report, "cudnn_version", check_cudnn, report, torch, expect, is_cuda)
    guarded(report, "nccl_version", check_nccl, report, torch, expect, is_cuda)
    guarded(report, "packages", check_packages, report, expect)
    usable = guarded(report, "cuda_available", check_cuda_available, report, torch, mode,
                     is_cuda)
    if mode == "cpu":
        skip_gpu_checks(report, "CPU_MODE", "cpu mode: no device")
        return
    if not usable:
        skip_gpu_checks(report, "NO_CUDA", "CUDA is not usable (see cuda_available)")
        return
    devices = guarded(report, "devices", check_devices, report, torch, arch)
    if not devices:
        return
    guarded(report, "matmul", check_matmul, report, torch)
    guarded(report, "autocast", check_autocast, report, torch)
    guarded(report, "cudnn_conv", check_cudnn_conv, report, torch)
    guarded(report, "nccl_allreduce", check_nccl_allreduce, report, torch, devices,
            required=False)
    guarded(report, "pinned_copy", check_pinned_copy, report, torch)
    if opts["throughput"]:
        check_throughput(report, torch, devices)
    else:
        for name in ("tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable"):
            report.skip(name, "NOT_REQUESTED", "--no-throughput", required=False)


def main(argv, out):
    mode = "gpu"
    try:
        opts = parse_args(argv)
        mode = opts["mode"]
        expect = load_expectations(opts["expect"])
    except UsageError as exc:
        report = Report(mode)
        report.add("arguments", "fail", "USAGE", str(exc))
        out.write(json.dumps(report.document(), indent=2) + "\n")
        return 2
    report = Report(mode)
    try:
        # torch warns once per process (e.g. "CUDA initialization: ..."): keep every warning
        # in the report rather than on stderr only.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_checks(report, opts, expect)
        seen = report.env.setdefault("warnings", [])
        for w in caught:
            text = one_line(str(w.message))
            if text not in seen:
                seen.append(text)
    except BaseException as exc:  # noqa: BLE001 - the JSON must come out whatever happens
        report.add("internal", "fail", "SMOKE_INTERNAL_ERROR",
                   error_text(exc) + " at " + one_line(traceback.format_exc()[-300:]))
    out.write(json.dumps(report.document(), indent=2, default=str) + "\n")
    return 1 if report.failed() else 0


def json_stdout():
    """Keep fd 1 for the JSON alone: anything torch or a C library prints goes to stderr."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return os.fdopen(saved, "w", encoding="utf-8")
    except (OSError, ValueError):
        return sys.__stdout__


if __name__ == "__main__":
    OUT = json_stdout()
    CODE = main(sys.argv[1:], OUT)
    OUT.close()
    sys.exit(CODE)
