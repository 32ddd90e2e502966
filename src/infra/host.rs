//! Host probes for `envbuild doctor` (file, library and process I/O): the NVIDIA driver version, the highest CUDA it supports
//! and the GPUs with their compute capabilities.
//!
//! Sources, in order: environment overrides (`ENVBUILD_DRIVER_VERSION`,
//! `ENVBUILD_CUDA_DRIVER_VERSION`, `ENVBUILD_GPUS`), NVML (`libnvidia-ml.so.1`, loaded at run
//! time so the binary runs on machines without NVIDIA), `nvidia-smi`, and
//! `/proc/driver/nvidia/version`. The `parse_*` functions and the tables are pure and
//! unit-tested on real text; [`probe`] and the NVML/`nvidia-smi`/`/proc` readers perform I/O.
//! Declared, not detected: nothing here changes what gets built, it is only checked.

use crate::core::compat::Table;
use crate::core::diag::Failure;
use crate::core::host::{
    is_none_word, parse_gpus_override, parse_nvidia_smi_banner, parse_nvidia_smi_csv,
    parse_nvidia_smi_uuids, parse_proc_driver_version, Gpu, GpuIdentity, HostFacts,
};
use crate::core::version::Version;
use crate::infra::proc::{self, RunError};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where to look. [`ProbeConfig::from_env`] reads the documented environment variables; tests
/// build one directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// `ENVBUILD_DRIVER_VERSION`: a version, or `none` for "no driver".
    pub driver: Option<String>,
    /// `ENVBUILD_CUDA_DRIVER_VERSION`: the highest CUDA the driver supports.
    pub cuda: Option<String>,
    /// `ENVBUILD_GPUS`: comma-separated GPU names or compute capabilities, or `none`.
    pub gpus: Option<String>,
    /// False with `ENVBUILD_NO_NVML=1`.
    pub nvml: bool,
    /// `ENVBUILD_NVIDIA_SMI` (default `nvidia-smi`); `None` with `ENVBUILD_NVIDIA_SMI=none`.
    pub nvidia_smi: Option<String>,
    /// `ENVBUILD_PROC_DRIVER_VERSION` (default `/proc/driver/nvidia/version`).
    pub proc_version: PathBuf,
    /// Time limit for each `nvidia-smi` call (a wedged driver can hang it).
    pub smi_timeout: Duration,
    /// `ENVBUILD_HOST_ARCH`: the host's CPU architecture (`x86_64`, `aarch64`), instead of the
    /// one this envbuild runs on.
    pub machine: Option<String>,
}

pub const PROC_DRIVER_VERSION: &str = "/proc/driver/nvidia/version";

/// The driver's version file is a few hundred bytes; `ENVBUILD_PROC_DRIVER_VERSION` may name
/// any file, so more is refused (a device would otherwise be read without end).
const MAX_PROC_VERSION: u64 = 64 * 1024;

impl ProbeConfig {
    pub fn from_env() -> ProbeConfig {
        ProbeConfig::from_vars(|k| std::env::var(k).ok())
    }

    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> ProbeConfig {
        let smi = get("ENVBUILD_NVIDIA_SMI").unwrap_or_else(|| "nvidia-smi".to_string());
        ProbeConfig {
            driver: get("ENVBUILD_DRIVER_VERSION"),
            cuda: get("ENVBUILD_CUDA_DRIVER_VERSION"),
            gpus: get("ENVBUILD_GPUS"),
            machine: get("ENVBUILD_HOST_ARCH"),
            nvml: !matches!(
                get("ENVBUILD_NO_NVML").as_deref(),
                Some("1" | "true" | "yes")
            ),
            nvidia_smi: if is_none_word(&smi) { None } else { Some(smi) },
            proc_version: get("ENVBUILD_PROC_DRIVER_VERSION")
                .map_or_else(|| PathBuf::from(PROC_DRIVER_VERSION), PathBuf::from),
            smi_timeout: Duration::from_secs(15),
        }
    }
}

// ------------------------------------------------------------------ probing (I/O)

/// What one real probe (NVML, nvidia-smi, /proc) found.
#[derive(Debug, Default)]
struct Found {
    driver: Option<(Version, String)>,
    cuda: Option<(Version, String)>,
    gpus: Option<(Vec<Gpu>, String)>,
    notes: Vec<String>,
}

/// Probe the host. Fails (usage, exit 2) only on a malformed override; an absent driver is a
/// fact, not an error.
pub fn probe(cfg: &ProbeConfig, table: &Table) -> Result<HostFacts, Failure> {
    let bad = |var: &str, value: &str, why: String, example: &str| {
        Failure::usage(
            format!("{var}=`{value}`: {why}"),
            Some(format!("for example {var}={example}")),
        )
    };
    let driver_override = match cfg.driver.as_deref() {
        None => None,
        Some(v) if is_none_word(v) => Some(None),
        Some(v) => Some(Some(Version::parse(v).ok_or_else(|| {
            bad(
                "ENVBUILD_DRIVER_VERSION",
                v,
                "not a driver version".into(),
                "550.54.15 (or none)",
            )
        })?)),
    };
    let cuda_override = match cfg.cuda.as_deref() {
        None => None,
        Some(v) if is_none_word(v) => Some(None),
        Some(v) => Some(Some(Version::parse(v).ok_or_else(|| {
            bad(
                "ENVBUILD_CUDA_DRIVER_VERSION",
                v,
                "not a CUDA version".into(),
                "12.4",
            )
        })?)),
    };
    let gpus_override = match cfg.gpus.as_deref() {
        None => None,
        Some(v) => Some(
            parse_gpus_override(v, table)
                .map_err(|why| bad("ENVBUILD_GPUS", v, why, "A100,8.9 (or none)"))?,
        ),
    };

    // A forced driver without a forced CUDA derives the CUDA from it: no probe for that.
    let need_probe = driver_override.is_none() || gpus_override.is_none();
    let found = if need_probe {
        probe_real(cfg, table)
    } else {
        Found::default()
    };

    let mut facts = HostFacts {
        driver: None,
        driver_source: "not found".into(),
        cuda: None,
        cuda_source: "not found".into(),
        gpus: Vec::new(),
        gpus_source: "not found".into(),
        cpu_arch: Some(std::env::consts::ARCH.to_string()),
        cpu_arch_source: "the CPU this envbuild runs on".into(),
        notes: found.notes,
    };
    if let Some(m) = cfg.machine.as_deref().filter(|m| !m.trim().is_empty()) {
        facts.cpu_arch = Some(m.trim().to_string());
        facts.cpu_arch_source = "ENVBUILD_HOST_ARCH".into();
    }
    let driver_forced = driver_override.is_some();
    match driver_override {
        Some(v) => {
            facts.driver = v;
            facts.driver_source = "ENVBUILD_DRIVER_VERSION".into();
        }
        None => {
            if let Some((v, src)) = found.driver {
                facts.driver = Some(v);
                facts.driver_source = src;
            }
        }
    }
    match cuda_override {
        Some(v) => {
            facts.cuda = v;
            facts.cuda_source = "ENVBUILD_CUDA_DRIVER_VERSION".into();
        }
        // A forced driver wins over what the host reported, so derive from it.
        None if !driver_forced && found.cuda.is_some() => {
            if let Some((v, src)) = found.cuda {
                facts.cuda = Some(v);
                facts.cuda_source = src;
            }
        }
        None => {
            if let Some(d) = &facts.driver {
                facts.cuda = table.driver_max_cuda(d).map(|b| b.max_cuda.clone());
                if facts.cuda.is_some() {
                    facts.cuda_source = format!("driver branch R{} table", d.major());
                }
            }
        }
    }
    match gpus_override {
        Some(g) => {
            facts.gpus = g;
            facts.gpus_source = "ENVBUILD_GPUS".into();
        }
        None => {
            if let Some((g, src)) = found.gpus {
                facts.gpus = g;
                facts.gpus_source = src;
            }
        }
    }
    Ok(facts)
}

/// The driver and the GPUs' UUIDs of this host, for keys that must change when either does
/// (the verdict cache). The declared overrides stand in when set (`ENVBUILD_DRIVER_VERSION`,
/// `ENVBUILD_GPUS`, as written), else NVML, else `nvidia-smi --query-gpu=uuid,driver_version`,
/// else the kernel module's version with no GPU list; nothing found is `no-gpu`.
pub fn gpu_identity(cfg: &ProbeConfig) -> GpuIdentity {
    if cfg.driver.is_some() || cfg.gpus.is_some() {
        return GpuIdentity {
            driver: cfg.driver.clone(),
            gpus: cfg.gpus.iter().cloned().collect(),
        };
    }
    if cfg.nvml {
        if let Ok(n) = nvml::probe() {
            if let (Some(driver), Ok(gpus)) = (n.driver, n.gpus) {
                return GpuIdentity {
                    driver: Some(driver.to_string()),
                    gpus: gpus
                        .into_iter()
                        .map(|g| g.uuid.unwrap_or_else(|| format!("{}:{}", g.index, g.name)))
                        .collect(),
                };
            }
        }
    }
    if let Some(smi) = &cfg.nvidia_smi {
        let args = ["--query-gpu=uuid,driver_version", "--format=csv,noheader"];
        if let Some(id) = run_smi(smi, &args, cfg.smi_timeout)
            .ok()
            .and_then(|t| parse_nvidia_smi_uuids(&t))
        {
            return id;
        }
    }
    GpuIdentity {
        driver: crate::infra::fs::read_bounded_text(&cfg.proc_version, MAX_PROC_VERSION)
            .ok()
            .and_then(|t| parse_proc_driver_version(&t))
            .map(|v| v.to_string()),
        gpus: Vec::new(),
    }
}

fn probe_real(cfg: &ProbeConfig, table: &Table) -> Found {
    let mut found = Found::default();
    if cfg.nvml {
        match nvml::probe() {
            Ok(n) => {
                let src = "NVML".to_string();
                found.driver = n.driver.map(|v| (v, src.clone()));
                found.cuda = n.cuda.map(|v| (v, src.clone()));
                match n.gpus {
                    Ok(gpus) => found.gpus = Some((gpus, src)),
                    Err(why) => found.notes.push(format!("NVML: {why}")),
                }
            }
            Err(why) => found.notes.push(format!("NVML: {why}")),
        }
    } else {
        found.notes.push("NVML: skipped (ENVBUILD_NO_NVML)".into());
    }
    if found.driver.is_none() || found.gpus.is_none() {
        match &cfg.nvidia_smi {
            Some(smi) => probe_smi(smi, cfg.smi_timeout, table, &mut found),
            None => found
                .notes
                .push("nvidia-smi: skipped (ENVBUILD_NVIDIA_SMI=none)".into()),
        }
    }
    if found.driver.is_none() {
        let path = &cfg.proc_version;
        match crate::infra::fs::read_bounded_text(path, MAX_PROC_VERSION) {
            Ok(text) => match parse_proc_driver_version(&text) {
                Some(v) => found.driver = Some((v, crate::core::diag::shown(path))),
                None => found.notes.push(format!(
                    "{}: no NVRM version line",
                    crate::core::diag::shown(path)
                )),
            },
            Err(e) => found
                .notes
                .push(format!("{}: {e}", crate::core::diag::shown(path))),
        }
    }
    found
}

fn run_smi(smi: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let mut cmd = Command::new(smi);
    cmd.args(args);
    match proc::run_with_timeout(cmd, timeout) {
        Ok(out) if out.code == Some(0) => Ok(out.stdout),
        Ok(out) => {
            let text = if out.stdout.trim().is_empty() {
                out.stderr
            } else {
                out.stdout
            };
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!("exit status {:?}: {}", out.code, first.trim()))
        }
        Err(RunError::Spawn(e)) => Err(format!("cannot run `{smi}`: {e}")),
        Err(RunError::TimedOut { .. }) => Err(format!(
            "`{smi}` did not answer within {} s",
            timeout.as_secs()
        )),
        Err(RunError::Wait(e)) => Err(format!("waiting for `{smi}` failed: {e}")),
    }
}

fn probe_smi(smi: &str, timeout: Duration, table: &Table, found: &mut Found) {
    let src = "nvidia-smi".to_string();
    let query = |fields: &str| {
        run_smi(
            smi,
            &[&format!("--query-gpu={fields}"), "--format=csv,noheader"],
            timeout,
        )
    };
    // Drivers before compute_cap was queryable reject the field: retry without it.
    let csv = query("name,driver_version,memory.total,compute_cap")
        .or_else(|_| query("name,driver_version,memory.total"));
    match csv.and_then(|t| parse_nvidia_smi_csv(&t)) {
        Ok(rows) => {
            if found.driver.is_none() {
                found.driver = rows.first().map(|r| (r.driver.clone(), src.clone()));
            }
            if found.gpus.is_none() {
                let gpus = rows
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| Gpu {
                        index: i as u32,
                        cc: r.cc.or_else(|| table.find_gpu(&r.name).map(|m| m.cc)),
                        name: r.name,
                        memory_bytes: r.memory_bytes,
                        uuid: None,
                    })
                    .collect();
                found.gpus = Some((gpus, src.clone()));
            }
        }
        Err(why) => {
            found.notes.push(format!("nvidia-smi: {why}"));
            return;
        }
    }
    if found.cuda.is_none() {
        // Only the banner says which CUDA the driver supports.
        match run_smi(smi, &[], timeout) {
            Ok(text) => {
                let (driver, cuda) = parse_nvidia_smi_banner(&text);
                if found.driver.is_none() {
                    found.driver = driver.map(|v| (v, src.clone()));
                }
                found.cuda = cuda.map(|v| (v, src));
            }
            Err(why) => found.notes.push(format!("nvidia-smi: {why}")),
        }
    }
}

/// NVML through `libloading`: the library is optional at run time.
mod nvml {
    use crate::core::host::{cuda_from_int, Gpu};
    use crate::core::version::{Cc, Version};
    use libloading::{Library, Symbol};
    use std::ffi::{c_char, c_int, c_uint, c_void};

    type Device = *mut c_void;

    #[repr(C)]
    #[derive(Default)]
    struct Memory {
        total: u64,
        free: u64,
        used: u64,
    }

    pub struct Nvml {
        pub driver: Option<Version>,
        pub cuda: Option<Version>,
        /// `Err` when the devices could not be listed, so another probe can try.
        pub gpus: Result<Vec<Gpu>, String>,
    }

    /// NVML return codes worth naming (nvml.h `nvmlReturn_t`).
    fn describe(rc: c_int) -> String {
        let what = match rc {
            9 => "the NVIDIA kernel driver is not loaded",
            12 => "NVML's shared library was not found",
            18 => "the driver and its libraries do not match (reboot after a driver update?)",
            4 => "no permission",
            _ => "NVML error",
        };
        format!("{what} (NVML return code {rc})")
    }

    fn cstr(buf: &[c_char]) -> String {
        // NVML writes a NUL-terminated string into the zeroed buffer.
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// # Safety
    /// `T` must be the exact C signature of the symbol `name` (NUL-terminated).
    unsafe fn get<T: Copy>(lib: &Library, name: &[u8]) -> Result<T, String> {
        lib.get::<T>(name)
            .map(|s: Symbol<T>| *s)
            .map_err(|e| format!("missing symbol: {e}"))
    }

    pub fn probe() -> Result<Nvml, String> {
        // SAFETY: loading the system's NVML runs its initialisers; it is NVIDIA's documented way
        // to use NVML without linking it.
        let lib = unsafe { Library::new("libnvidia-ml.so.1") }
            .map_err(|e| format!("libnvidia-ml.so.1 is not loadable ({e})"))?;
        // SAFETY: the signatures are those of nvml.h for these exact (versioned) symbols, and
        // the function pointers are only used while `lib` is loaded.
        unsafe {
            let init: unsafe extern "C" fn() -> c_int = get(&lib, b"nvmlInit_v2\0")?;
            let shutdown: unsafe extern "C" fn() -> c_int = get(&lib, b"nvmlShutdown\0")?;
            let rc = init();
            if rc != 0 {
                return Err(format!("nvmlInit_v2 failed: {}", describe(rc)));
            }
            let result = query(&lib);
            shutdown();
            result
        }
    }

    /// # Safety
    /// NVML must be loaded from `lib` and initialised. Every out-pointer passed below points to
    /// a live, correctly sized local.
    unsafe fn query(lib: &Library) -> Result<Nvml, String> {
        let driver_version: unsafe extern "C" fn(*mut c_char, c_uint) -> c_int =
            get(lib, b"nvmlSystemGetDriverVersion\0")?;
        let cuda_version: unsafe extern "C" fn(*mut c_int) -> c_int =
            get(lib, b"nvmlSystemGetCudaDriverVersion_v2\0")?;
        let count: unsafe extern "C" fn(*mut c_uint) -> c_int =
            get(lib, b"nvmlDeviceGetCount_v2\0")?;
        let handle: unsafe extern "C" fn(c_uint, *mut Device) -> c_int =
            get(lib, b"nvmlDeviceGetHandleByIndex_v2\0")?;
        let name: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int =
            get(lib, b"nvmlDeviceGetName\0")?;
        let cc: unsafe extern "C" fn(Device, *mut c_int, *mut c_int) -> c_int =
            get(lib, b"nvmlDeviceGetCudaComputeCapability\0")?;
        let memory: unsafe extern "C" fn(Device, *mut Memory) -> c_int =
            get(lib, b"nvmlDeviceGetMemoryInfo\0")?;
        // Optional: the probe does without a UUID rather than without the GPU.
        let uuid: Option<unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int> =
            get(lib, b"nvmlDeviceGetUUID\0").ok();

        let mut buf = [0 as c_char; 96];
        let driver = if driver_version(buf.as_mut_ptr(), buf.len() as c_uint) == 0 {
            Version::parse(&cstr(&buf))
        } else {
            None
        };
        let mut v: c_int = 0;
        let cuda = if cuda_version(&mut v) == 0 {
            cuda_from_int(v)
        } else {
            None
        };
        let mut n: c_uint = 0;
        let rc = count(&mut n);
        if rc != 0 {
            return Ok(Nvml {
                driver,
                cuda,
                gpus: Err(format!("nvmlDeviceGetCount_v2 failed: {}", describe(rc))),
            });
        }
        let mut gpus = Vec::new();
        for i in 0..n {
            let mut dev: Device = std::ptr::null_mut();
            if handle(i, &mut dev) != 0 {
                continue;
            }
            let mut nb = [0 as c_char; 96];
            let gpu_name = if name(dev, nb.as_mut_ptr(), nb.len() as c_uint) == 0 {
                cstr(&nb)
            } else {
                format!("GPU {i}")
            };
            let (mut major, mut minor) = (0, 0);
            let gpu_cc = if cc(dev, &mut major, &mut minor) == 0 && major > 0 && minor >= 0 {
                Some(Cc::new(major as u32, minor as u32))
            } else {
                None
            };
            let mut mem = Memory::default();
            let memory_bytes = (memory(dev, &mut mem) == 0).then_some(mem.total);
            // NVML_DEVICE_UUID_V2_BUFFER_SIZE is 96.
            let mut ub = [0 as c_char; 96];
            let gpu_uuid = uuid
                .filter(|f| f(dev, ub.as_mut_ptr(), ub.len() as c_uint) == 0)
                .map(|_| cstr(&ub))
                .filter(|u| !u.is_empty());
            gpus.push(Gpu {
                index: i,
                name: gpu_name,
                cc: gpu_cc,
                memory_bytes,
                uuid: gpu_uuid,
            });
        }
        Ok(Nvml {
            driver,
            cuda,
            gpus: Ok(gpus),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::host::*;
    use crate::core::version::Cc;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn smi_csv_with_compute_cap() {
        let text = "NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 9.0\n\
                    NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, 9.0\n";
        let rows = parse_nvidia_smi_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(rows[0].driver.as_str(), "550.54.15");
        assert_eq!(rows[0].memory_bytes, Some(81559 * 1024 * 1024));
        assert_eq!(rows[0].cc, Some(Cc::new(9, 0)));
    }

    #[test]
    fn smi_csv_without_compute_cap_or_units() {
        let rows = parse_nvidia_smi_csv("Tesla T4, 470.82.01, 15109\n").unwrap();
        assert_eq!(rows[0].name, "Tesla T4");
        assert_eq!(rows[0].cc, None);
        assert_eq!(rows[0].memory_bytes, Some(15109 * 1024 * 1024));
        let rows = parse_nvidia_smi_csv("NVIDIA A100-SXM4-80GB, 535.104.05, [N/A], [N/A]").unwrap();
        assert_eq!(rows[0].memory_bytes, None);
        assert_eq!(rows[0].cc, None);
        assert_eq!(rows[0].driver, v("535.104.05"));
    }

    #[test]
    fn smi_csv_rejects_garbage_without_panicking() {
        assert!(parse_nvidia_smi_csv("No devices were found").is_err());
        assert!(parse_nvidia_smi_csv("a, b, c").is_err());
        assert_eq!(parse_nvidia_smi_csv("\n\n").unwrap(), vec![]);
    }

    const BANNER: &str = "\
Mon Nov 30 17:23:48 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |
| N/A   31C    P0             71W /  700W |       1MiB /  81559MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
";

    #[test]
    fn smi_banner() {
        assert_eq!(
            parse_nvidia_smi_banner(BANNER),
            (Some(v("550.54.15")), Some(v("12.4")))
        );
        let old = "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |";
        assert_eq!(
            parse_nvidia_smi_banner(old),
            (Some(v("535.104.05")), Some(v("12.2")))
        );
        let na = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: N/A |";
        assert_eq!(parse_nvidia_smi_banner(na), (Some(v("550.54.15")), None));
        let failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA \
                      driver. Make sure that the latest NVIDIA driver is installed and running.";
        assert_eq!(parse_nvidia_smi_banner(failed), (None, None));
    }

    #[test]
    fn proc_driver_version_proprietary_and_open() {
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n\
                    GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(parse_proc_driver_version(prop), Some(v("535.104.05")));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n\
                    GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n";
        assert_eq!(parse_proc_driver_version(open), Some(v("550.54.15")));
        let arm = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  570.133.20  Fri Mar 14 2025\n";
        assert_eq!(parse_proc_driver_version(arm), Some(v("570.133.20")));
        assert_eq!(parse_proc_driver_version("GCC version: 12.2.0\n"), None);
        assert_eq!(parse_proc_driver_version(""), None);
    }

    #[test]
    fn nvml_cuda_integer() {
        assert_eq!(cuda_from_int(12040), Some(v("12.4")));
        assert_eq!(cuda_from_int(13000), Some(v("13.0")));
        assert_eq!(cuda_from_int(11080), Some(v("11.8")));
        assert_eq!(cuda_from_int(0), None);
    }

    #[test]
    fn driver_branch_to_max_cuda() {
        let t = table();
        let max = |d: &str| t.driver_max_cuda(&v(d)).map(|b| b.max_cuda.clone());
        assert_eq!(max("550.54.15"), Some(v("12.4")));
        assert_eq!(max("535.104.05"), Some(v("12.2")));
        assert_eq!(max("580.65.06"), Some(v("13.0")));
        assert_eq!(max("470.82.01"), Some(v("11.4")));
        assert_eq!(max("400.1"), None);
        assert_eq!(max("999.1"), Some(v("13.3")));
    }

    #[test]
    fn gpu_names_map_to_compute_capabilities() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", Some((9, 0))),
            ("NVIDIA A100-SXM4-80GB", Some((8, 0))),
            ("NVIDIA A10G", Some((8, 6))),
            ("NVIDIA A10", Some((8, 6))),
            ("Tesla T4", Some((7, 5))),
            ("NVIDIA L40S", Some((8, 9))),
            ("NVIDIA GeForce RTX 4090", Some((8, 9))),
            ("NVIDIA RTX 6000 Ada Generation", Some((8, 9))),
            ("NVIDIA RTX A6000", Some((8, 6))),
            (
                "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                Some((12, 0)),
            ),
            ("NVIDIA GH200 480GB", Some((9, 0))),
            ("NVIDIA B300", Some((10, 3))),
            ("Matrox G200", None),
        ];
        for (name, want) in cases {
            assert_eq!(
                table().find_gpu(name).map(|m| m.cc),
                want.map(|(a, b)| Cc::new(a, b)),
                "{name}"
            );
        }
    }

    #[test]
    fn gpus_override() {
        let g = parse_gpus_override("A100, 8.9 ,sm_90", &table()).unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].cc, Some(Cc::new(8, 0)));
        assert_eq!(g[0].name, "A100");
        assert_eq!(g[1].cc, Some(Cc::new(8, 9)));
        assert_eq!(g[2].cc, Some(Cc::new(9, 0)));
        assert_eq!(g[2].index, 2);
        assert!(parse_gpus_override("none", &table()).unwrap().is_empty());
        assert!(parse_gpus_override("", &table()).unwrap().is_empty());
        assert!(parse_gpus_override("Voodoo5", &table()).is_err());
        assert!(parse_gpus_override("A100,,T4", &table()).is_err());
    }

    fn table() -> Table {
        Table::embedded().unwrap()
    }

    fn probe_t(cfg: &ProbeConfig) -> Result<HostFacts, Failure> {
        probe(cfg, &table())
    }

    fn forced(driver: Option<&str>, cuda: Option<&str>, gpus: Option<&str>) -> ProbeConfig {
        ProbeConfig {
            driver: driver.map(String::from),
            cuda: cuda.map(String::from),
            gpus: gpus.map(String::from),
            nvml: false,
            nvidia_smi: None,
            proc_version: PathBuf::from("/nonexistent/envbuild-test/version"),
            smi_timeout: Duration::from_secs(1),
            machine: None,
        }
    }

    #[test]
    fn the_host_arch_is_this_cpu_s_unless_overridden() {
        let f = probe_t(&forced(Some("535.104.05"), None, Some("H100"))).unwrap();
        assert_eq!(f.cpu_arch.as_deref(), Some(std::env::consts::ARCH));
        let mut cfg = forced(Some("535.104.05"), None, Some("H100"));
        cfg.machine = Some("aarch64".into());
        let f = probe_t(&cfg).unwrap();
        assert_eq!(
            (f.cpu_arch.as_deref(), f.cpu_arch_source.as_str()),
            (Some("aarch64"), "ENVBUILD_HOST_ARCH")
        );
    }

    #[test]
    fn overrides_win_and_cuda_is_derived_from_a_forced_driver() {
        let f = probe_t(&forced(Some("535.104.05"), None, Some("H100"))).unwrap();
        assert_eq!(f.driver, Some(v("535.104.05")));
        assert_eq!(f.driver_source, "ENVBUILD_DRIVER_VERSION");
        assert_eq!(f.cuda, Some(v("12.2")));
        assert_eq!(f.cuda_source, "driver branch R535 table");
        assert_eq!(f.gpus[0].cc, Some(Cc::new(9, 0)));
        let f = probe_t(&forced(Some("535.104.05"), Some("12.3"), Some("none"))).unwrap();
        assert_eq!(f.cuda, Some(v("12.3")));
        assert!(f.gpus.is_empty());
    }

    #[test]
    fn no_probe_source_means_no_driver_with_notes() {
        let f = probe_t(&forced(None, None, None)).unwrap();
        assert_eq!(f.driver, None);
        assert_eq!(f.cuda, None);
        assert!(f.gpus.is_empty());
        assert_eq!(f.notes.len(), 3, "{:?}", f.notes);
    }

    #[test]
    fn bad_overrides_are_usage_errors() {
        let e = probe_t(&forced(Some("latest"), None, None)).unwrap_err();
        assert_eq!(e.exit_code, crate::core::diag::exit::USAGE);
        assert!(e.to_string().contains("ENVBUILD_DRIVER_VERSION"));
        let e = probe_t(&forced(None, None, Some("Voodoo5"))).unwrap_err();
        assert!(e.to_string().contains("Voodoo5"));
    }

    #[test]
    fn smi_uuid_query_and_identity_keys() {
        let text = "GPU-5e7c1a2b-0000-1111-2222-333344445555, 550.54.15\n\
                    GPU-9f00aa11-0000-1111-2222-333344445555, 550.54.15\n";
        let id = parse_nvidia_smi_uuids(text).unwrap();
        assert_eq!(id.driver.as_deref(), Some("550.54.15"));
        assert_eq!(id.gpus.len(), 2);
        assert_eq!(
            id.key(),
            "driver=550.54.15;gpus=GPU-5e7c1a2b-0000-1111-2222-333344445555,\
             GPU-9f00aa11-0000-1111-2222-333344445555"
        );
        assert_eq!(parse_nvidia_smi_uuids("No devices were found"), None);
        assert_eq!(parse_nvidia_smi_uuids("[N/A], 550.54.15"), None);
        assert_eq!(parse_nvidia_smi_uuids(""), None);
        assert_eq!(GpuIdentity::default().key(), "no-gpu");
    }

    #[test]
    fn identity_uses_the_declared_values_then_the_probes() {
        let id = gpu_identity(&forced(Some("550.54.15"), None, Some("H100,H100")));
        assert_eq!(id.key(), "driver=550.54.15;gpus=H100,H100");
        // Nothing to probe: no GPU, a key of its own.
        assert_eq!(gpu_identity(&forced(None, None, None)).key(), "no-gpu");
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("version");
        std::fs::write(
            &proc,
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n",
        )
        .unwrap();
        let mut cfg = forced(None, None, None);
        cfg.proc_version = proc;
        assert_eq!(gpu_identity(&cfg).key(), "driver=535.104.05;gpus=");
    }

    #[test]
    fn config_from_vars() {
        let cfg = ProbeConfig::from_vars(|k| match k {
            "ENVBUILD_NO_NVML" => Some("1".into()),
            "ENVBUILD_NVIDIA_SMI" => Some("none".into()),
            _ => None,
        });
        assert!(!cfg.nvml);
        assert_eq!(cfg.nvidia_smi, None);
        assert_eq!(cfg.proc_version, PathBuf::from(PROC_DRIVER_VERSION));
        let cfg = ProbeConfig::from_vars(|_| None);
        assert!(cfg.nvml);
        assert_eq!(cfg.nvidia_smi.as_deref(), Some("nvidia-smi"));
    }
}
