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
# Every GPU check runs in a worker thread with its own time limit, so one hung call (a stuck
# GPU, driver or NCCL) is reported by name while the other checks still report; the JSON
# always comes out.
#
# Inputs are only ever parsed as JSON and compared as strings; nothing is evaluated.
# Python 3.7 compatible: it runs in old images.

import json
import math
import os
import platform
import re
import sys
import threading
import time
import traceback
import warnings

SCHEMA = 1
START = time.perf_counter()

# Nominal dense peaks (vendor datasheet figures, no sparsity), used only to say "far below
# peak". Keys are matched as consecutive words of the device name, most specific first.
# Fields: bf16 TFLOP/s (fp16 where the GPU has no native bf16), tf32 TFLOP/s (fp32 where it has
# no tf32), host link GB/s (PCIe x16 nominal: gen3 16, gen4 32, gen5 64), and the full GPU's SM
# count, which tells a MIG slice (fewer SMs) from the whole GPU. Generated from the
# compatibility table's [[gpu_peak]] rows: edit those, then
# `ENVBUILD_BLESS=1 cargo test --locked --test it nominal_peaks`.
# nominal-peaks:start
NOMINAL_PEAKS = [
    ("H100 PCIE", {"bf16": 756.0, "tf32": 378.0, "h2d": 64.0, "sms": 114}),
    ("H100 NVL", {"bf16": 835.0, "tf32": 418.0, "h2d": 64.0, "sms": 132}),
    ("H100", {"bf16": 989.0, "tf32": 494.0, "h2d": 64.0, "sms": 132}),
    ("H200", {"bf16": 989.0, "tf32": 494.0, "h2d": 64.0, "sms": 132}),
    ("B200", {"bf16": 2250.0, "tf32": 1100.0, "h2d": 64.0, "sms": 148}),
    ("A100", {"bf16": 312.0, "tf32": 156.0, "h2d": 32.0, "sms": 108}),
    ("A10G", {"bf16": 70.0, "tf32": 35.0, "h2d": 32.0, "sms": 80}),
    ("A10", {"bf16": 125.0, "tf32": 62.5, "h2d": 32.0, "sms": 72}),
    ("L40S", {"bf16": 362.0, "tf32": 183.0, "h2d": 32.0, "sms": 142}),
    ("L40", {"bf16": 181.0, "tf32": 90.5, "h2d": 32.0, "sms": 142}),
    ("L4", {"bf16": 121.0, "tf32": 60.0, "h2d": 32.0, "sms": 58}),
    ("T4", {"bf16": 65.0, "tf32": 8.1, "h2d": 16.0, "sms": 40}),
    ("V100", {"bf16": 125.0, "tf32": 15.7, "h2d": 16.0, "sms": 80}),
]
# nominal-peaks:end
# Below these fractions of the nominal peak a figure is reported as a warning.
TFLOPS_WARN_FRACTION = 0.3
H2D_WARN_FRACTION = 0.5
# A MIG profile `Ng.XXgb` owns N of the GPU's 7 compute slices (A100, H100, H200, B200); used
# only when the device does not report its SM count.
MIG_SLICES = 7
# Docker's default /dev/shm is 64 MiB, which DataLoader workers (num_workers > 0) exhaust.
DEFAULT_MIN_SHM_BYTES = 1 << 30
# Probe sizes: a 4096^2 matmul is 137 GFLOP, large enough to reach the tensor cores' rate;
# 64 MiB copies amortise the launch cost.
THROUGHPUT_N = 4096
COPY_BYTES = 64 << 20
# Each probe is warmed up (cuBLAS handles, heuristics, clocks), then timed with CUDA events
# over at least MIN_TIMED_S of GPU work: a handful of milliseconds is mostly launch latency
# and clock ramp-up. The call count grows until the work lasts that long.
WARMUP_CALLS = 3
MIN_TIMED_S = 0.2
MAX_TIMED_CALLS = 100000
# Native bf16 arrived with compute capability 8.0 (Ampere); torch.cuda.is_bf16_supported() is
# also true on V100/T4, where bf16 is emulated and far from the tensor-core (fp16) peak.
NATIVE_BF16_MAJOR = 8
# Time limits for the GPU checks (the expectations may set both): each check, and each GPU's
# part of a per-GPU check, gets CHECK_TIMEOUT_S; all checks end by BUDGET_S after the script
# started, under envbuild's default --timeout of 300 s, so a report always comes out first.
DEFAULT_CHECK_TIMEOUT_S = 60.0
DEFAULT_BUDGET_S = 240.0
# Names of the checks whose worker thread never returned: the script then leaves with
# os._exit, since a thread stuck in a CUDA call can block the interpreter's exit.
HUNG = []


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


def error_code(exc):
    return "ARCH_MISSING" if "no kernel image" in str(exc) else "CHECK_ERROR"


def record_error(report, name, exc, required):
    """An exception from a check becomes a failed (optional: warning) check with its text."""
    status = "fail" if required else "warn"
    # The check may have reported before it broke: keep names unique.
    if any(c["name"] == name for c in report.checks):
        name += "_error"
    report.add(name, status, error_code(exc), error_text(exc), required)


def guarded(report, name, fn, *args, required=True):
    """Run one check; an exception becomes a failed check with its text, never a traceback."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every error must end up in the JSON
        record_error(report, name, exc, required)
        return None


# ---------------------------------------------------------------- arguments and expectations

EXPECT_STR_KEYS = ("torch", "cuda", "cudnn", "nccl", "python", "machine")


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
    closure = data.get("closure", {})
    if not isinstance(closure, dict) or not all(isinstance(v, str) for v in closure.values()):
        raise UsageError("expectation 'closure' must map names to version strings")
    conda = data.get("conda_closure", {})
    if not isinstance(conda, dict) or not all(
            isinstance(r, dict) and isinstance(r.get("version"), str)
            and isinstance(r.get("build", ""), str) for r in conda.values()):
        raise UsageError("expectation 'conda_closure' must map names to "
                         "{\"version\": ..., \"build\": ...}")
    ignore = data.get("closure_ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(v, str) for v in ignore):
        raise UsageError("expectation 'closure_ignore' must be a list of names")
    shm = data.get("min_shm_bytes")
    if shm is not None and (not isinstance(shm, int) or isinstance(shm, bool) or shm < 0):
        raise UsageError("expectation 'min_shm_bytes' must be a non-negative integer")
    targets = data.get("target_ccs")
    if targets is not None and (not isinstance(targets, list)
                                or not all(parse_cc(t) for t in targets)):
        raise UsageError("expectation 'target_ccs' must be a list of compute capabilities "
                         "such as \"9.0\"")
    unsure = data.get("unconfirmed")
    if unsure is not None and not (
            (isinstance(unsure, list) and all(isinstance(k, str) for k in unsure))
            or (isinstance(unsure, dict) and all(isinstance(v, bool) for v in unsure.values()))):
        raise UsageError("expectation 'unconfirmed' must list expectation keys (or map them "
                         "to true/false)")
    for key in ("check_timeout_s", "budget_s"):
        limit = data.get(key)
        if limit is not None and (not isinstance(limit, (int, float)) or isinstance(limit, bool)
                                  or not limit > 0 or not math.isfinite(limit)):
            raise UsageError("expectation %r must be a positive number of seconds" % key)
    return data


def parse_cc(text):
    """`9.0` or `sm_90` -> (9, 0); anything else -> None."""
    if not isinstance(text, str):
        return None
    match = re.match(r"^(\d{1,2})\.(\d)$", text.strip())
    if match:
        return int(match.group(1)), int(match.group(2))
    parsed = arch_cc(text)
    return parsed[:2] if parsed and parsed[2] == "sm" else None


def unconfirmed(expect, key):
    """Whether the lock marks the fact `key` (an expectation key, `ptx` for the PTX entries of
    the arch list, `package:NAME`) unconfirmed: its failing comparison is then a warning."""
    unsure = expect.get("unconfirmed") or []
    keys = [k for k, v in unsure.items() if v] if isinstance(unsure, dict) else unsure
    return key in keys


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


def drift(report, name, code, detail, required=True, soft=False):
    """A failed comparison; `soft` (an unconfirmed fact) makes it an optional warning."""
    if soft:
        return report.add(name, "warn", code, detail + " (the lock marks this fact unconfirmed, "
                          "so only a warning)", required=False)
    return report.add(name, "fail", code, detail, required)


def compare_version(report, name, label, actual, expected, required=True, soft=False):
    if actual is None:
        if expected:
            drift(report, name, "VERSION_DRIFT",
                  "%s not found; the lock expects %s" % (label, expected), required, soft)
        else:
            report.skip(name, "NOT_PRESENT", "%s not present" % label, required)
        return
    if not expected:
        report.ok(name, "%s %s (no expectation)" % (label, actual), required)
    elif version_matches(actual, expected):
        report.ok(name, "%s %s matches the lock" % (label, actual), required)
    else:
        drift(report, name, "VERSION_DRIFT",
              "%s is %s but the lock expects %s (replaced by a later install?)"
              % (label, actual, expected), required, soft)


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
    compare_version(report, "python", "Python", actual, expect.get("python"),
                    soft=unconfirmed(expect, "python"))


def check_platform(report, expect):
    # The CPU architecture the kernel runs this interpreter on (an arm64 image on an x86_64 host
    # under emulation says aarch64 too): an image for another machine than the lock's cannot
    # start where the lock is meant to run.
    machine = platform.machine()
    report.env["machine"] = machine
    want = expect.get("machine")
    if want is None:
        return
    if machine == want:
        report.ok("platform", "CPU architecture %s, as locked" % machine)
    else:
        report.add("platform", "fail", "PLATFORM_MISMATCH",
                   "the image runs on %s, the lock is for %s" % (machine or "an unknown machine",
                                                                 want))


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
    report.env["torch_wheel_tags"] = wheel_tags("torch")
    compare_version(report, "torch_version", "torch", version, expect.get("torch"),
                    soft=unconfirmed(expect, "torch"))
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
            drift(report, "cuda_version", "VERSION_DRIFT",
                  "torch.version.cuda is %s but the lock expects CUDA %s" % (cuda, want),
                  soft=unconfirmed(expect, "cuda"))
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
        report_missing_arch(report, arch, want, missing, expect)
    elif want:
        report.ok("arch_list", "carries every locked architecture: %s (from %s)"
                  % (" ".join(arch), source))
    else:
        report.ok("arch_list", "%s (from %s; no expectation)" % (" ".join(arch), source))
    return arch


def report_missing_arch(report, arch, want, missing, expect):
    """Entries of the lock's arch list that the build lacks. With `target_ccs`, only those a
    target GPU needs fail; one marked unconfirmed (`arch_list`, or `ptx` for compute_XY) warns."""
    targets = [parse_cc(t) for t in expect.get("target_ccs") or []]
    if targets:
        needed, lost = needed_entries(arch, want, missing, targets)
    else:
        needed, lost = list(missing), []
    unused = [e for e in missing if e not in needed]
    soft = [e for e in needed if unconfirmed(expect, "arch_list")
            or (is_ptx(e) and unconfirmed(expect, "ptx"))]
    hard = [e for e in needed if e not in soft]
    has = " ".join(arch)
    notes = []
    if soft:
        notes.append("%s, which the lock marks unconfirmed" % " ".join(soft))
    if unused:
        notes.append("%s, which no target GPU (%s) needs" % (" ".join(unused), cc_list(targets)))
    if hard:
        why = (", needed by target GPU(s) %s" % cc_list(lost)) if targets else ""
        detail = "the build lacks %s of the lock's architectures%s (has: %s)" % (
            " ".join(hard), why, has)
        report.add("arch_list", "fail", "ARCH_MISSING",
                   detail + "".join("; it also lacks " + n for n in notes))
    elif soft:
        report.add("arch_list", "warn", "ARCH_MISSING",
                   "the build lacks %s (has: %s); only a warning"
                   % ("; and ".join(notes), has), required=False)
    else:
        report.add("arch_list", "warn", "ARCH_MISSING_UNUSED",
                   "the build lacks %s of the lock's architectures, which no target GPU (%s) "
                   "needs (has: %s)" % (" ".join(unused), cc_list(targets), has), required=False)


def is_ptx(entry):
    parsed = arch_cc(entry)
    return parsed is not None and parsed[2] == "compute"


def cc_list(ccs):
    return ", ".join("%d.%d" % tuple(cc) for cc in ccs)


COVERAGE_RANK = {None: 0, "ptx": 1, "cubin": 2}


def serves(entry, cc):
    """Whether one arch entry runs on a device of capability cc (the coverage rule)."""
    parsed = arch_cc(entry)
    if parsed is None:
        return False
    if parsed[2] == "sm":
        return parsed[0] == cc[0] and parsed[1] <= cc[1]
    return parsed[:2] <= tuple(cc)


def worse_coverage(arch, want, cc):
    """Whether the build serves cc worse (none < PTX < cubin) than the lock's list would."""
    return COVERAGE_RANK[coverage(arch, cc)[0]] < COVERAGE_RANK[coverage(want, cc)[0]]


def needed_entries(arch, want, missing, ccs):
    """The missing entries that some cc needs: those serving a cc the build now serves worse
    than the lock's list would. Returns (needed entries, the ccs that lost coverage)."""
    needed = []
    lost = []
    for cc in ccs:
        if worse_coverage(arch, want, cc):
            lost.append(cc)
            needed.extend(e for e in missing if serves(e, cc) and e not in needed)
    return needed, lost


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
        drift(report, "cudnn_version", "VERSION_DRIFT",
              "cuDNN is %s but the lock expects %s" % (actual, want),
              soft=unconfirmed(expect, "cudnn"))


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
        drift(report, "nccl_version", "VERSION_DRIFT",
              "NCCL is %s but the lock expects %s" % (actual, want),
              soft=unconfirmed(expect, "nccl"))


def installed_version(name):
    """The installed version of a distribution, or None; importlib.metadata is Python 3.8+, so
    older interpreters fall back to pkg_resources."""
    try:
        from importlib import metadata
    except ImportError:
        import pkg_resources

        try:
            return pkg_resources.get_distribution(name).version
        except pkg_resources.DistributionNotFound:
            return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def wheel_tags(name):
    """The `Tag:` lines of a distribution's WHEEL file (`cp312-cp312-manylinux_2_28_x86_64`):
    the wheel's platform tag says which glibc it needs (`envbuild table learn` reads it). None
    when there is no WHEEL file (a conda package or a source install); never raises."""
    text = None
    try:
        try:
            from importlib import metadata
        except ImportError:
            import pkg_resources

            dist = pkg_resources.get_distribution(name)
            text = dist.get_metadata("WHEEL") if dist.has_metadata("WHEEL") else None
        else:
            text = metadata.distribution(name).read_text("WHEEL")
    except Exception:  # noqa: BLE001 - a fact, not a check: unreadable is None
        return None
    tags = [line.split(":", 1)[1].strip() for line in (text or "").splitlines()
            if line.startswith("Tag:")]
    return tags or None


def check_packages(report, expect):
    pkgs = expect.get("packages") or {}
    for name in sorted(pkgs):
        want = pkgs[name]
        check = "package:" + name
        soft = unconfirmed(expect, "packages") or unconfirmed(expect, check)
        actual = installed_version(name)
        if actual is None:
            drift(report, check, "PACKAGE_MISSING",
                  "%s is not installed; the lock expects %s" % (name, want), soft=soft)
            continue
        compare_version(report, check, name, actual, want, soft=soft)


def canonical_name(name):
    """PEP 503: lowercase, runs of `-_.` become one `-`."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def installed_distributions():
    """Canonical name -> version of every distribution this interpreter sees (the first one on
    sys.path wins, as for imports), or None when importlib.metadata is missing (Python < 3.8)."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonical_name(name), dist.version)
    return found


# The installer a base image brings is not part of the environment: never "extra".
BASE_TOOLS = ("pip", "setuptools", "wheel")


def conda_records(prefix):
    """The conda packages installed in `prefix`, from its `conda-meta/*.json` records: (name ->
    (version, build), the canonical names of the Python distributions those records installed,
    the records that could not be read), or None when `prefix` has no conda-meta directory.

    A distribution belongs to conda when a record's file list holds its `.dist-info` (or
    `.egg-info`) directory: conda's own account of what it linked, for every package, whatever
    the package's INSTALLER file says (conda-build writes `conda` there, older or hand-made
    packages may say `pip` or nothing)."""
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return None
    records, owned, unreadable = {}, set(), []
    for entry in sorted(os.listdir(meta)):
        if not entry.endswith(".json"):
            continue
        try:
            with open(os.path.join(meta, entry), "r", encoding="utf-8") as f:
                rec = json.load(f)
            name, version = rec["name"], rec["version"]
            if not isinstance(name, str) or not isinstance(version, str):
                raise ValueError("name and version must be strings")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            unreadable.append("conda-meta/%s (%s)" % (entry, error_text(exc)))
            continue
        records[name] = (version, str(rec.get("build") or ""))
        for path in rec.get("files") or []:
            parts = str(path).replace("\\", "/").split("/")
            for parent, part in zip(parts, parts[1:]):
                if parent == "site-packages" and part.endswith((".dist-info", ".egg-info")):
                    owned.add(canonical_name(part.split("-", 1)[0]))
    return records, owned, unreadable


def conda_label(version, build):
    """`2.3.4=py312h33ff503_0`, conda's own spelling of a version and build."""
    return "%s=%s" % (version, build) if build else version


def check_closure(report, expect):
    """The image holds exactly the lock's closure: every locked package at its version (conda
    packages at their build too), and nothing else (the base image's pip/setuptools/wheel and
    `closure_ignore` aside). Python distributions that conda installed are compared as conda
    records, never as pip extras."""
    closure = dict((canonical_name(k), v) for k, v in (expect.get("closure") or {}).items())
    conda = expect.get("conda_closure") or {}
    if not closure and not conda:
        return
    problems, extras, owned = [], [], set()
    if conda:
        found = conda_records(sys.prefix)
        if found is None:
            problems.append("%s has no conda-meta directory: the lock's %d conda packages are "
                            "missing" % (sys.prefix, len(conda)))
        else:
            records, owned, unreadable = found
            problems.extend("%s is unreadable" % u for u in unreadable)
            for name in sorted(conda):
                want = conda_label(conda[name]["version"], conda[name].get("build", ""))
                have = records.get(name)
                if have is None:
                    problems.append("conda package %s %s missing" % (name, want))
                    continue
                # Without a build in the lock, only the version is compared.
                got = conda_label(have[0], have[1] if conda[name].get("build") else "")
                if got != want:
                    problems.append("conda package %s is %s, the lock has %s"
                                    % (name, conda_label(*have), want))
            extras.extend("conda package %s %s" % (name, conda_label(*records[name]))
                          for name in sorted(records) if name not in conda)
    installed = installed_distributions()
    if installed is None:
        if not conda:
            report.skip("closure", "NOT_PRESENT", "importlib.metadata is missing (Python < 3.8)")
            return
        installed = {}
    ignore = set(BASE_TOOLS) | set(canonical_name(n) for n in expect.get("closure_ignore") or [])
    for name in sorted(closure):
        have = installed.get(name)
        if have is None:
            problems.append("%s %s missing" % (name, closure[name]))
        elif have != closure[name]:
            problems.append("%s is %s, the lock has %s" % (name, have, closure[name]))
    extras.extend("%s %s" % (name, installed[name]) for name in sorted(installed)
                  if name not in closure and name not in ignore and name not in owned)
    # The dev image adds JupyterLab (constrained to the lock) on top of the closure.
    extras_allowed = os.environ.get("ENVBUILD_CLOSURE_EXTRAS") == "allow"
    if not extras_allowed:
        problems.extend("%s is not in the lock" % e for e in extras)
    total = len(closure) + len(conda)
    if problems:
        report.add("closure", "fail", "CLOSURE_DRIFT",
                   "the installed packages differ from the lock's closure: "
                   + "; ".join(problems), True)
    else:
        report.ok("closure", "the %d installed packages are exactly the lock's closure%s"
                  % (total, " (plus %d allowed additions)" % len(extras)
                     if extras else ""))


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


# ---------------------------------------------------------------- time limits

class Limits:
    """The GPU checks' time limits, and the GPUs that hung so far."""

    def __init__(self, expect):
        self.per_check = float(expect.get("check_timeout_s") or DEFAULT_CHECK_TIMEOUT_S)
        self.budget = float(expect.get("budget_s") or DEFAULT_BUDGET_S)
        self.deadline = START + self.budget
        # GPU index -> the check it hung in: later checks do not try it again, since its
        # stuck work would only make them hang too.
        self.stuck = {}


class Stage(Report):
    """What one check reports from its worker thread. It reaches the report only when the
    check returned in time, so a thread that wakes up late never changes the printed report."""

    def __init__(self, mode, stuck):
        Report.__init__(self, mode)
        self.stuck = dict(stuck)
        self.fine = []
        # (GPU indices being probed, what, since when): one tuple, replaced whole, so the
        # main thread always reads a consistent step.
        self.step = ((), None, time.perf_counter())

    def begin(self, indices, what):
        """A new step: it gets its own time limit, and names what hung if it never ends."""
        self.step = (tuple(indices), what, time.perf_counter())


def merge(report, stage):
    report.checks.extend(stage.checks)
    for key, value in stage.env.items():
        if isinstance(value, dict) and isinstance(report.env.get(key), dict):
            report.env[key].update(value)
        else:
            report.env[key] = value


def bounded(report, limits, name, fn, *args, required=True):
    """Run one GPU check fn(stage, *args) in a daemon worker thread. Each step (the whole check,
    or one GPU's part of it) gets limits.per_check seconds, and everything ends by the budget.
    A check that does not return fails as CHECK_TIMEOUT (even an optional one: a GPU that never
    answers is not usable) and names what hung; the checks after it still run."""
    if time.perf_counter() >= limits.deadline:
        why = "not run: the GPU checks' time budget (%g s) was spent" % limits.budget
        if required:
            report.add(name, "fail", "BUDGET_SPENT", why)
        else:
            report.skip(name, "BUDGET_SPENT", why, required=False)
        return None
    stage = Stage(report.mode, limits.stuck)
    box = {}

    def work():
        try:
            box["result"] = fn(stage, *args)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="envbuild-smoke-" + name)
    worker.daemon = True
    worker.start()
    while True:
        step = stage.step
        until = min(step[2] + limits.per_check, limits.deadline)
        worker.join(max(0.0, until - time.perf_counter()))
        if not worker.is_alive():
            break
        if stage.step is step and time.perf_counter() >= until:
            report_hang(report, limits, name, stage, step, until)
            return None
    merge(report, stage)
    if "error" in box:
        record_error(report, name, box["error"], required)
        return None
    return box.get("result")


def report_hang(report, limits, name, stage, step, until):
    HUNG.append(name)
    indices, what, since = step
    for index in indices:
        limits.stuck[index] = name
    detail = "%s did not answer within %.3g s (a hung GPU, driver or NCCL?)" % (
        what or "the check", until - since)
    if until >= limits.deadline:
        detail += "; the GPU checks' time budget (%g s) ran out" % limits.budget
    if stage.fine:
        detail += "; fine before it: GPU %s" % ", ".join(str(i) for i in stage.fine)
    report.add(name, "fail", "CHECK_TIMEOUT", detail)


# ---------------------------------------------------------------- GPU checks

def gpu_label(device):
    return "GPU %d (%s)" % (device["index"], device["name"])


def native_bf16(device):
    return int(device["cc"].split(".")[0]) >= NATIVE_BF16_MAJOR


def each_gpu(stage, name, devices, what, passed, probe):
    """One check over every GPU. probe(device) returns (None, figure) when that GPU is fine or
    (code, problem). The detail names the failing GPUs first, then those that are fine."""
    fine = []
    bad = []
    for d in devices:
        label = gpu_label(d)
        if d["index"] in stage.stuck:
            bad.append(("GPU_HUNG", "%s not tried: it hung in %s" % (
                label, stage.stuck[d["index"]])))
            continue
        stage.begin([d["index"]], label)
        try:
            code, text = probe(d)
        except Exception as exc:  # noqa: BLE001 - one GPU's error must not hide the others
            code, text = error_code(exc), error_text(exc)
        if code is None:
            fine.append("GPU %d %s" % (d["index"], text))
            stage.fine.append(d["index"])
        else:
            bad.append((code, "%s %s" % (label, text)))
    stage.begin([], None)
    if bad:
        detail = "%s: %s" % (what, "; ".join(text for _, text in bad))
        if stage.fine:
            detail += "; fine on GPU %s" % ", ".join(str(i) for i in stage.fine)
        stage.add(name, "fail", bad[0][0], detail)
    else:
        stage.ok(name, "%s %s: %s" % (what, passed, "; ".join(fine)))


def check_devices(stage, torch):
    stage.begin([], "listing the devices")
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        name = str(props.name)
        sms = getattr(props, "multi_processor_count", None)
        _, peaks = nominal_peak(name)
        full = peaks.get("sms") if peaks else None
        words = name.upper().replace("-", " ").replace("_", " ").split()
        devices.append({
            "index": i,
            "name": name,
            "cc": "%d.%d" % (props.major, props.minor),
            "memory_bytes": int(props.total_memory),
            "sm_count": int(sms) if sms else None,
            "mig": "MIG" in words or bool(sms and full and int(sms) < full),
        })
    stage.env["devices"] = devices
    stage.env["device_count"] = len(devices)
    if not devices:
        stage.add("devices", "fail", "NO_GPU_VISIBLE", "CUDA is available but lists no device")
        return devices
    stage.ok("devices", "; ".join(
        "%d: %s (sm_%s, %s%s)" % (d["index"], d["name"], d["cc"].replace(".", ""),
                                  human_bytes(d["memory_bytes"]), ", MIG" if d["mig"] else "")
        for d in devices))
    return devices


def check_arch_coverage(report, devices, arch, expect):
    """Each GPU needs a cubin or PTX in the build, and no worse coverage than the lock's list
    promised (a GPU reached through PTX where the lock has its cubin lost that cubin)."""
    if not arch:
        report.add("arch_coverage", "warn", "ARCH_UNKNOWN",
                   "the build's architecture list is unknown; coverage not checked",
                   required=False)
        return
    want = expect.get("arch_list") or []
    problems = []
    ptx_only = []
    fine = []
    for d in devices:
        cc = tuple(int(p) for p in d["cc"].split("."))
        kind, via = coverage(arch, cc)
        label = "GPU %d %s (sm_%d%d)" % (d["index"], d["name"], cc[0], cc[1])
        if kind is None:
            problems.append(label + " has no kernel image")
        elif want and worse_coverage(arch, want, cc) and not unconfirmed(expect, "arch_list"):
            wkind, wvia = coverage(want, cc)
            problems.append("%s runs on %s %d.%d, but the lock's %s %d.%d is missing" % (
                label, kind, via[0], via[1], wkind, wvia[0], wvia[1]))
        elif kind == "ptx":
            ptx_only.append(label)
        else:
            fine.append("GPU %d sm_%d%d cubin" % (d["index"], via[0], via[1]))
    if problems:
        report.add("arch_coverage", "fail", "ARCH_MISSING",
                   "%s in the build's %s: 'no kernel image is available for execution on the "
                   "device'" % ("; ".join(problems), " ".join(arch)))
    elif ptx_only:
        report.add("arch_coverage", "warn", "ARCH_PTX_ONLY",
                   "only PTX (JIT-compiled at first use, slow start) for %s" % ", ".join(ptx_only),
                   required=False)
    else:
        report.ok("arch_coverage", "every GPU has a native kernel image in the build: "
                  + "; ".join(fine))


def max_abs_diff(torch, a, b):
    return float((a.float() - b.float()).abs().max().item())


def relative_diff(torch, got, want):
    diff = max_abs_diff(torch, got, want)
    return diff, diff / max(1.0, float(want.abs().max().item()))


def check_matmul(stage, torch, devices):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=gen)
    b = torch.randn(256, 256, generator=gen)
    want = a @ b

    def probe(d):
        dev = "cuda:%d" % d["index"]
        # The correctness check runs in full fp32: TF32 would legitimately differ by ~1e-2.
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            got = (a.to(dev) @ b.to(dev)).cpu()
            torch.cuda.synchronize(d["index"])
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        diff, rel = relative_diff(torch, got, want)
        if rel > 1e-3:
            return "MATMUL_WRONG", "differs from the CPU by %.3g (relative %.3g)" % (diff, rel)
        return None, "max diff %.2g" % diff

    each_gpu(stage, "matmul", devices, "256x256 fp32 matmul", "matches the CPU", probe)


def check_autocast(stage, torch, devices):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(128, 128, generator=gen)
    b = torch.randn(128, 128, generator=gen)
    want = a @ b

    def probe(d):
        # bf16 only where it is native: emulated bf16 says nothing about the tensor cores.
        dtype, name = (torch.bfloat16, "bf16") if native_bf16(d) else (torch.float16, "fp16")
        dev = "cuda:%d" % d["index"]
        with torch.autocast(device_type="cuda", dtype=dtype):
            out = a.to(dev) @ b.to(dev)
        torch.cuda.synchronize(d["index"])
        if out.dtype != dtype:
            return "AUTOCAST_FAILED", "autocast(%s) produced %s" % (name, out.dtype)
        diff, rel = relative_diff(torch, out.cpu(), want)
        if rel > 5e-2:
            return "MATMUL_WRONG", "%s result is off by %.3g (relative %.3g)" % (name, diff, rel)
        return None, "%s within %.2g" % (name, diff)

    each_gpu(stage, "autocast", devices, "autocast matmul", "matches the CPU", probe)


def check_cudnn_conv(stage, torch, devices):
    if not torch.backends.cudnn.is_available():
        stage.add("cudnn_conv", "fail", "CUDNN_UNAVAILABLE", "cuDNN is not available on the GPU")
        return
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 32, 32, generator=gen)
    w = torch.randn(8, 3, 3, 3, generator=gen)
    want = torch.nn.functional.conv2d(x, w, padding=1)

    def probe(d):
        dev = "cuda:%d" % d["index"]
        old = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            got = torch.nn.functional.conv2d(x.to(dev), w.to(dev), padding=1).cpu()
            torch.cuda.synchronize(d["index"])
        finally:
            torch.backends.cudnn.allow_tf32 = old
        diff, rel = relative_diff(torch, got, want)
        if rel > 1e-3:
            return "CUDNN_CONV_WRONG", "differs from the CPU by %.3g" % diff
        return None, "max diff %.2g" % diff

    each_gpu(stage, "cudnn_conv", devices, "cuDNN conv2d", "matches the CPU", probe)


def check_pinned_copy(stage, torch, devices):
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    if not host.is_pinned():
        stage.add("pinned_copy", "fail", "PINNED_COPY_FAILED", "pin_memory() did not pin")
        return

    def probe(d):
        dev = host.to("cuda:%d" % d["index"], non_blocking=True)
        torch.cuda.synchronize(d["index"])
        if float((dev.cpu() - host).abs().max().item()) != 0.0:
            return "PINNED_COPY_FAILED", "corrupted the data"
        return None, "intact"

    each_gpu(stage, "pinned_copy", devices,
             "pinned host-to-device copy (4 MiB, non_blocking)", "is correct", probe)


def check_nccl_allreduce(stage, torch, devices):
    if len(devices) < 2:
        stage.skip("nccl_allreduce", "ONE_GPU", "needs two or more GPUs", required=False)
        return
    if stage.stuck:
        stage.add("nccl_allreduce", "fail", "GPU_HUNG", "not tried: %s" % "; ".join(
            "GPU %d hung in %s" % (i, c) for i, c in sorted(stage.stuck.items())))
        return
    from torch.cuda import nccl

    n = len(devices)
    stage.begin([d["index"] for d in devices], "the NCCL all-reduce over %d GPUs" % n)
    tensors = [torch.full((1024,), float(i + 1), device="cuda:%d" % d["index"])
               for i, d in enumerate(devices)]
    nccl.all_reduce(tensors)
    for d in devices:
        torch.cuda.synchronize(d["index"])
    want = float(n * (n + 1) // 2)
    bad = [devices[i]["index"] for i, t in enumerate(tensors)
           if float((t - want).abs().max().item()) > 1e-3]
    if bad:
        stage.add("nccl_allreduce", "fail", "NCCL_FAILED",
                  "NCCL all-reduce over %d GPUs gave a wrong sum on GPU %s"
                  % (n, ", ".join(map(str, bad))))
    else:
        stage.ok("nccl_allreduce", "NCCL all-reduce over %d GPUs is correct" % n)


# ---------------------------------------------------------------- throughput probes

def timed(torch, fn, index):
    """Seconds per call of fn on GPU `index`, measured with CUDA events (GPU time, not host
    time) over at least MIN_TIMED_S of work after a warm-up. Returns (per call, calls, total)."""
    with torch.cuda.device(index):
        for _ in range(WARMUP_CALLS):
            fn()
        torch.cuda.synchronize(index)
        calls = 1
        while True:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            secs = start.elapsed_time(end) / 1000.0
            if secs >= MIN_TIMED_S or calls >= MAX_TIMED_CALLS:
                break
            grow = min(100.0, MIN_TIMED_S * 1.2 / secs) if secs > 0 else 100.0
            calls = min(MAX_TIMED_CALLS, max(calls * 2, int(math.ceil(calls * grow))))
    if secs <= 0:
        raise RuntimeError("CUDA events measured no time over %d calls" % calls)
    return secs / calls, calls, secs


def figure(value):
    return ("%.1f" % value) if value >= 10 else ("%.3g" % value)


def device_share(device, peaks):
    """(fraction of the full GPU, how it was found): below 1 for a MIG slice, from its SM count
    against the full GPU's or else from its profile name (`1g.10gb`: 1 of 7 compute slices);
    (None, why) for a MIG slice of unknown size."""
    full = peaks.get("sms") if peaks else None
    sms = device.get("sm_count")
    if full and sms and sms < full:
        return sms / float(full), "%d of %d SMs" % (sms, full)
    if device.get("mig"):
        match = re.search(r"(\d+)g\.\d+gb", device["name"].lower())
        if match and 0 < int(match.group(1)) <= MIG_SLICES:
            n = int(match.group(1))
            return n / float(MIG_SLICES), "%d of %d compute slices" % (n, MIG_SLICES)
        return None, "a MIG slice of unknown size"
    return 1.0, None


def throughput_verdict(report, name, label, value, unit, peak, fraction, what, share, how,
                       timing):
    if peak and share:
        pct = 100.0 * value / (peak * share)
        if share < 1.0:
            basis = "%.0f%% of this MIG slice's share (%s) of the nominal %s peak %g %s" % (
                pct, how, what, peak, unit)
        else:
            basis = "%.0f%% of the nominal %s peak %g %s" % (pct, what, peak, unit)
        detail = "%s %s %s = %s (%s)" % (label, figure(value), unit, basis, timing)
        if value < fraction * peak * share:
            report.add(name, "warn", "THROUGHPUT_LOW",
                       detail + "; throttled clocks, another process, or a narrow PCIe link?",
                       required=False, value=value, unit=unit)
            return
        report.ok(name, detail, required=False, value=value, unit=unit)
    else:
        why = how if share is None else "no nominal peak known for this GPU"
        report.ok(name, "%s %s %s (%s; %s)" % (label, figure(value), unit, why, timing),
                  required=False, value=value, unit=unit)


def timing_note(stage, name, device, calls, secs, dtype=None):
    stage.env["probes"] = {name: {"gpu": device["index"], "calls": calls,
                                  "timed_s": round(secs, 4), "dtype": dtype}}
    return "GPU %d, %d calls over %.2f s timed with CUDA events" % (device["index"], calls, secs)


def probe_tflops(stage, torch, d, name, label, dtype, tf32, peak):
    stage.begin([d["index"]], "%s on %s" % (name, gpu_label(d)))
    n = THROUGHPUT_N
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        dev = "cuda:%d" % d["index"]
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        per_call, calls, secs = timed(torch, lambda: a @ b, d["index"])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    tflops = 2.0 * n ** 3 / per_call / 1e12
    share, how = peak[1], peak[2]
    throughput_verdict(stage, name, label, tflops, "TFLOP/s", peak[0], TFLOPS_WARN_FRACTION,
                       "dense", share, how, timing_note(stage, name, d, calls, secs, label))


def probe_copy(stage, torch, d, name, label, pinned, peak):
    stage.begin([d["index"]], "%s on %s" % (name, gpu_label(d)))
    size = COPY_BYTES
    host = torch.empty(size, dtype=torch.uint8)
    if pinned:
        host = host.pin_memory()
    dev = torch.empty(size, dtype=torch.uint8, device="cuda:%d" % d["index"])
    per_call, calls, secs = timed(torch, lambda: dev.copy_(host, non_blocking=pinned),
                                  d["index"])
    gbs = size / per_call / 1e9
    timing = timing_note(stage, name, d, calls, secs)
    if pinned:
        # The host link is not split by MIG: the full GPU's nominal figure applies.
        throughput_verdict(stage, name, label, gbs, "GB/s", peak, H2D_WARN_FRACTION,
                           "PCIe x16", 1.0, None, timing)
    else:
        stage.ok(name, "%s %s GB/s (pageable memory is always slower than pinned; %s)"
                 % (label, figure(gbs), timing), required=False, value=gbs, unit="GB/s")


def check_throughput(report, limits, torch, devices):
    """The probes run on GPU 0 only: they measure the build and the machine, and one GPU's
    figures are enough for that; every GPU's correctness is checked above."""
    d = devices[0]
    key, peaks = nominal_peak(d["name"])
    peaks = peaks or {}
    share, how = device_share(d, peaks)
    report.env["nominal_peaks"] = dict(peaks, matched=key, share=share)
    half = (torch.bfloat16, "bf16") if native_bf16(d) else (torch.float16, "fp16")
    probes = [
        ("tflops_bf16", probe_tflops, (half[1], half[0], False, (peaks.get("bf16"), share, how))),
        ("tflops_tf32", probe_tflops, ("fp32/tf32", torch.float32, True,
                                       (peaks.get("tf32"), share, how))),
        ("h2d_pinned", probe_copy, ("host-to-device pinned", True, peaks.get("h2d"))),
        ("h2d_pageable", probe_copy, ("host-to-device pageable", False, None)),
    ]
    for name, probe, args in probes:
        if d["index"] in limits.stuck:
            report.skip(name, "GPU_HUNG", "not run: GPU %d hung in %s"
                        % (d["index"], limits.stuck[d["index"]]), required=False)
            continue
        bounded(report, limits, name, probe, torch, d, name, *args, required=False)


GPU_CHECKS = ("devices", "arch_coverage", "matmul", "autocast", "cudnn_conv", "pinned_copy",
              "tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable", "nccl_allreduce")
OPTIONAL = ("nccl_allreduce", "tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable")


def skip_gpu_checks(report, code, why):
    for name in GPU_CHECKS:
        report.skip(name, code, why, required=name not in OPTIONAL)


def run_gpu_checks(report, opts, expect, torch, arch):
    limits = Limits(expect)
    devices = bounded(report, limits, "devices", check_devices, torch)
    if not devices:
        return
    guarded(report, "arch_coverage", check_arch_coverage, report, devices, arch, expect)
    for name, check in (("matmul", check_matmul), ("autocast", check_autocast),
                        ("cudnn_conv", check_cudnn_conv), ("pinned_copy", check_pinned_copy)):
        bounded(report, limits, name, check, torch, devices)
    if opts["throughput"]:
        check_throughput(report, limits, torch, devices)
    else:
        for name in ("tflops_bf16", "tflops_tf32", "h2d_pinned", "h2d_pageable"):
            report.skip(name, "NOT_REQUESTED", "--no-throughput", required=False)
    # Last: a hung all-reduce leaves kernels stuck on every GPU, which would stall any check
    # after it.
    bounded(report, limits, "nccl_allreduce", check_nccl_allreduce, torch, devices)


def run_checks(report, opts, expect):
    mode = opts["mode"]
    # The day of the run (UTC): `envbuild table learn` dates what it learns from this report.
    report.env["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    guarded(report, "python", check_python, report, expect)
    guarded(report, "platform", check_platform, report, expect)
    guarded(report, "shm", check_shm, report, expect)
    torch = import_torch(report)
    if torch is None:
        for name in ("torch_version", "cuda_build", "arch_list", "cudnn_version",
                     "nccl_version", "cuda_available"):
            report.skip(name, "NO_TORCH", "torch could not be imported")
        guarded(report, "packages", check_packages, report, expect)
        guarded(report, "closure", check_closure, report, expect)
        skip_gpu_checks(report, "NO_TORCH", "torch could not be imported")
        return
    version = guarded(report, "torch_version", check_torch_version, report, torch, expect)
    is_cuda = bool(guarded(report, "cuda_build", check_cuda_build, report, torch,
                           str(version or ""), expect, mode))
    arch = guarded(report, "arch_list", check_arch_list, report, torch, expect, is_cuda) or []
    guarded(report, "cudnn_version", check_cudnn, report, torch, expect, is_cuda)
    guarded(report, "nccl_version", check_nccl, report, torch, expect, is_cuda)
    guarded(report, "packages", check_packages, report, expect)
    guarded(report, "closure", check_closure, report, expect)
    usable = guarded(report, "cuda_available", check_cuda_available, report, torch, mode,
                     is_cuda)
    if mode == "cpu":
        skip_gpu_checks(report, "CPU_MODE", "cpu mode: no device")
        return
    if not usable:
        skip_gpu_checks(report, "NO_CUDA", "CUDA is not usable (see cuda_available)")
        return
    run_gpu_checks(report, opts, expect, torch, arch)


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
    if HUNG:
        # A thread stuck in a CUDA call can block the interpreter's exit (atexit handlers,
        # CUDA teardown): the report is out, so leave without them.
        sys.stderr.flush()
        os._exit(CODE)
    sys.exit(CODE)
