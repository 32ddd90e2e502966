//! `envbuild doctor`'s judgement: given what the host probes found ([`crate::core::host::HostFacts`])
//! and, optionally, what a lock's build needs ([`DoctorExpect`]), decide whether the build runs
//! here (native, minor-version compatibility, driver too old) and carries every GPU's
//! architecture. This module performs no I/O.
//!
//! The container-GPU section ([`ContainerGpu`]) is what `infra::docker::gpu_probe` found out
//! from the engine; `commands::doctor` passes it in (or a "not checked" one when no engine
//! answers or `ENVBUILD_DOCKER_CHECK=0`). Checks, statuses, the verdict and the check table are
//! `core::report`'s, shared with the smoke test.

use crate::core::codes::docker;
use crate::core::compat::{Os, Table};
use crate::core::host::HostFacts;
use crate::core::report::{render_checks, Check, Status, Verdict};
use crate::core::smoke::Expectations;
use crate::core::version::{coverage, Cc, Coverage, Version};
use serde::Serialize;

/// Declares [`Outcome`], its name for each variant and [`Outcome::ALL`].
macro_rules! outcomes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// How one of doctor's checks came out. A check outcome, not a diagnostic code (those are
        /// `core::codes`'): its name is the check's `code` in the table and in `--json`
        /// (documented in docs/smoke.md).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Outcome {
            $( $(#[$doc])* $variant, )*
        }

        impl Outcome {
            /// Every outcome, for the docs check.
            pub const ALL: &[Outcome] = &[$( Outcome::$variant, )*];

            /// The stable name tools match on (`DRIVER_NATIVE`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Outcome::$variant => $name, )*
                }
            }
        }
    };
}

outcomes! {
    Ok = "OK",
    NoDriver = "NO_DRIVER",
    CudaUnknown = "CUDA_UNKNOWN",
    NoGpu = "NO_GPU",
    GpuCcUnknown = "GPU_CC_UNKNOWN",
    DriverNative = "DRIVER_NATIVE",
    DriverMinorCompat = "DRIVER_MINOR_COMPAT",
    /// The host's driver cannot run the lock's build (named apart from the resolver's
    /// `DRIVER_TOO_OLD`, which judges the spec's target driver; doctor called it that before).
    HostDriverTooOld = "HOST_DRIVER_TOO_OLD",
    ArchMissing = "ARCH_MISSING",
    /// The host's CPU architecture is none of the lock's platforms' (an x86_64 host, a
    /// linux-aarch64 lock).
    HostPlatformMismatch = "HOST_PLATFORM_MISMATCH",
    ArchPtxOnly = "ARCH_PTX_ONLY",
    NoLock = "NO_LOCK",
    CpuBuild = "CPU_BUILD",
    NotChecked = "NOT_CHECKED",
    /// The container check's failure, whatever the cause; the cause is the engine's diagnostic
    /// code (`NO_GPU_RUNTIME`, `CUDA_DRIVER_TOO_OLD`, `GPU_REQUIREMENT_UNMET`, the codes `image`
    /// and `test` report) in [`ContainerGpu::cause`] and in the detail.
    ContainerGpuUnavailable = "CONTAINER_GPU_UNAVAILABLE",
}

/// What to do next, by check code: the hint line under a failed or warning check.
pub mod hints {
    /// No NVIDIA driver: where to go on a GPU-less machine, and what doctor still checks.
    pub const NO_DRIVER: &str =
        "no GPU here? `envbuild image SPEC --gpus none` and `envbuild smoke \
        --gpus none` run every check that needs no GPU, and doctor judges a lock against the \
        target machines: `ENVBUILD_DRIVER_VERSION=550.54.15 ENVBUILD_GPUS=A100 \
        ENVBUILD_DOCKER_CHECK=0 envbuild doctor --lock envbuild.lock` \
        (docs/smoke.md#envbuild-doctor); on a GPU machine, install the NVIDIA driver";
    pub const NO_GPU: &str = "`nvidia-smi -L` lists what the driver sees; inside a container, \
        start it with a GPU request (`docker run --gpus all` or a CDI device)";
    /// The engine cannot give containers a GPU at all (`NO_GPU_RUNTIME`).
    pub const NO_GPU_RUNTIME: &str = "install the NVIDIA Container Toolkit \
        (`nvidia-ctk runtime configure --runtime=docker`, then restart dockerd); on GPU-less CI, \
        build and test with `--gpus none`";
    /// The runtime refused the image for its `NVIDIA_REQUIRE_CUDA` (`CUDA_DRIVER_TOO_OLD`).
    pub const CUDA_DRIVER_TOO_OLD: &str = "update the host's NVIDIA driver, or lock an older \
        CUDA (the driver_compat check says which this driver runs)";
    pub const GPU_REQUIREMENT_UNMET: &str = "run it on GPUs that meet the image's \
        NVIDIA_REQUIRE_* requirement, or use an image without it";
    /// Registered runtimes alone say nothing for sure.
    pub const UNVERIFIED: &str = "build an image (`envbuild image SPEC`) or pass `--image IMAGE`: \
        a container started with a GPU request is the only definitive answer";
}

/// What a lock's build needs from the host. [`DoctorExpect::from_lock`] maps a lock (`--lock`);
/// [`DoctorExpect::from_expectations`] maps the smoke test's expectations (`--expect-file`),
/// which carry no driver minimums.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DoctorExpect {
    /// The build's CUDA (`torch.version.cuda`); `None` for a CPU build.
    pub cuda: Option<Version>,
    /// The toolkit driver of that CUDA: at or above it the build runs natively.
    pub driver_native: Option<Version>,
    /// The family floor for minor-version compatibility (CUDA 11+): below it the build fails.
    pub driver_floor: Option<Version>,
    /// Architectures with cubins (`sm_XY`) and with PTX (`compute_XY`).
    pub cubins: Vec<Cc>,
    pub ptx: Vec<Cc>,
    /// The lock's platforms (`linux-64`, `linux-aarch64`): the host's CPU must be one of theirs.
    /// Empty for an expectations file, which names none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<crate::core::spec::Platform>,
}

impl DoctorExpect {
    /// What a lock says about the host: its CUDA, the native and minor-version drivers, and
    /// the architectures the build carries.
    pub fn from_lock(lock: &crate::core::lock::Lock) -> DoctorExpect {
        let cc = |list: &[String]| list.iter().filter_map(|a| Cc::parse(a)).collect::<Vec<_>>();
        DoctorExpect {
            cuda: Version::parse(&lock.cuda),
            driver_native: Version::parse(&lock.driver_min),
            driver_floor: lock.driver_min_compat.as_deref().and_then(Version::parse),
            cubins: cc(&lock.arch_list),
            ptx: cc(&lock.ptx),
            platforms: lock.platforms(),
        }
    }

    /// Map the smoke test's expectations (`--expect-file`): CUDA and arch list; the driver floor
    /// comes from the CUDA family, the native driver from the host's reported CUDA.
    pub fn from_expectations(e: &Expectations, table: &Table) -> DoctorExpect {
        let cuda = e.cuda.as_deref().and_then(Version::parse);
        let (mut cubins, mut ptx) = (Vec::new(), Vec::new());
        for a in &e.arch_list {
            if let Some(cc) = Cc::parse(a) {
                if a.trim().to_ascii_lowercase().starts_with("compute_") {
                    ptx.push(cc);
                } else {
                    cubins.push(cc);
                }
            }
        }
        DoctorExpect {
            driver_floor: cuda
                .as_ref()
                .and_then(|c| table.family_floor(c.major(), Os::Linux))
                .map(|f| f.version),
            cuda,
            driver_native: None,
            cubins,
            ptx,
            platforms: Vec::new(),
        }
    }
}

/// Whether containers get a GPU, as `infra::docker::gpu_probe` finds out from the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerGpu {
    /// The `nvidia` runtime is registered with the engine.
    pub nvidia_runtime: Option<bool>,
    /// CDI devices (`nvidia.com/gpu=...`) are registered.
    pub cdi: Option<bool>,
    /// A container started with a GPU request saw a GPU: the only definitive answer.
    pub verified: Option<bool>,
    /// Why a GPU request was refused, as the code `image` and `test` give the same refusal
    /// (`NO_GPU_RUNTIME`, `CUDA_DRIVER_TOO_OLD`, `GPU_REQUIREMENT_UNMET`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    pub detail: String,
}

/// The doctor's report (`--json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    pub schema: u32,
    pub status: Verdict,
    pub host: HostFacts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<DoctorExpect>,
    pub checks: Vec<Check>,
    pub container_gpu: Option<ContainerGpu>,
}

impl DoctorReport {
    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }
}

fn check(name: &str, status: Status, outcome: Outcome, detail: String) -> Check {
    Check {
        name: name.to_string(),
        status,
        code: outcome.as_str().to_string(),
        detail,
        required: true,
        value: None,
        unit: None,
        hint: None,
    }
}

fn optional(mut c: Check) -> Check {
    c.required = false;
    c
}

fn hinted(mut c: Check, hint: &str) -> Check {
    c.hint = Some(hint.to_string());
    c
}

/// Judge the host. Pure: the same facts give the same report.
pub fn evaluate(
    host: &HostFacts,
    expect: Option<&DoctorExpect>,
    container_gpu: Option<ContainerGpu>,
) -> DoctorReport {
    use Status::{Fail, Pass, Skip, Warn};
    let cpu_lock = expect.is_some_and(|e| e.cuda.is_none());
    let mut checks = Vec::new();

    match &host.driver {
        Some(d) => checks.push(check(
            "driver",
            Pass,
            Outcome::Ok,
            format!("NVIDIA driver {d} (from {})", host.driver_source),
        )),
        None => {
            let why = if host.notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", host.notes.join("; "))
            };
            let c = check(
                "driver",
                if cpu_lock { Warn } else { Fail },
                Outcome::NoDriver,
                format!("no NVIDIA driver found{why}"),
            );
            // A CPU lock needs no driver: nothing to do, so no hint.
            checks.push(if cpu_lock {
                optional(c)
            } else {
                hinted(c, hints::NO_DRIVER)
            });
        }
    }
    if host.driver.is_some() {
        checks.push(match &host.cuda {
            Some(c) => check(
                "cuda_driver",
                Pass,
                Outcome::Ok,
                format!(
                    "the driver supports CUDA up to {c} (from {})",
                    host.cuda_source
                ),
            ),
            None => optional(check(
                "cuda_driver",
                Warn,
                Outcome::CudaUnknown,
                "the highest CUDA this driver supports is unknown".to_string(),
            )),
        });
        if host.gpus.is_empty() {
            checks.push(hinted(
                check(
                    "gpus",
                    if cpu_lock { Warn } else { Fail },
                    Outcome::NoGpu,
                    format!(
                        "the driver is present but lists no GPU (from {})",
                        host.gpus_source
                    ),
                ),
                hints::NO_GPU,
            ));
        } else {
            let list: Vec<String> = host
                .gpus
                .iter()
                .map(|g| match g.cc {
                    Some(cc) => format!("{}: {} ({})", g.index, g.name, cc.sm()),
                    None => format!("{}: {} (compute capability unknown)", g.index, g.name),
                })
                .collect();
            let unknown = host.gpus.iter().any(|g| g.cc.is_none());
            let c = check(
                "gpus",
                if unknown { Warn } else { Pass },
                if unknown {
                    Outcome::GpuCcUnknown
                } else {
                    Outcome::Ok
                },
                format!("{} (from {})", list.join("; "), host.gpus_source),
            );
            checks.push(if unknown { optional(c) } else { c });
        }
    }

    checks.push(platform_check(host, expect));
    match expect {
        None => checks.push(optional(check(
            "lock",
            Skip,
            Outcome::NoLock,
            "no lock given: pass --expect-file to check a build against this host".to_string(),
        ))),
        Some(e) if e.cuda.is_none() => checks.push(optional(check(
            "driver_compat",
            Skip,
            Outcome::CpuBuild,
            "the lock is a CPU build: no driver needed".to_string(),
        ))),
        Some(e) => {
            checks.push(driver_compat(host, e));
            if let Some(c) = arch_check(host, e) {
                checks.push(c);
            }
        }
    }

    checks.push(container_check(container_gpu.as_ref()));
    DoctorReport {
        schema: 1,
        status: Verdict::of(&checks),
        host: host.clone(),
        expect: expect.cloned(),
        checks,
        container_gpu,
    }
}

/// The host's CPU architecture against the lock's platforms: an image of another architecture
/// cannot start here (without emulation).
fn platform_check(host: &HostFacts, expect: Option<&DoctorExpect>) -> Check {
    let name = "cpu_arch";
    let Some(arch) = host.cpu_arch.as_deref() else {
        return optional(check(
            name,
            Status::Skip,
            Outcome::NotChecked,
            "the host's CPU architecture is unknown".into(),
        ));
    };
    let machine = crate::core::compat::CpuArch::parse(arch);
    let platforms = expect.map(|e| e.platforms.as_slice()).unwrap_or_default();
    let listed = platforms
        .iter()
        .map(|p| format!("{} ({})", p.as_str(), p.machine().as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    if platforms.is_empty() {
        return optional(check(
            name,
            Status::Pass,
            Outcome::Ok,
            format!("CPU architecture {arch} (from {})", host.cpu_arch_source),
        ));
    }
    if platforms.iter().any(|p| Some(p.machine()) == machine) {
        return check(
            name,
            Status::Pass,
            Outcome::Ok,
            format!(
                "CPU architecture {arch} (from {}); the lock's platforms: {listed}",
                host.cpu_arch_source
            ),
        );
    }
    hinted(
        check(
            name,
            Status::Fail,
            Outcome::HostPlatformMismatch,
            format!("this host's CPU is {arch} (from {}), but the lock is for {listed}: its images cannot run here", host.cpu_arch_source),
        ),
        "run it on a machine of the lock's platforms, or add this one to the spec's [target] platforms and lock again",
    )
}

/// Native, minor-version compatible, or too old (the table's `nv-toolkit-driver` and `nv-minor-compat` sources).
fn driver_compat(host: &HostFacts, e: &DoctorExpect) -> Check {
    let name = "driver_compat";
    let Some(build) = &e.cuda else {
        return check(name, Status::Skip, Outcome::CpuBuild, "CPU build".into());
    };
    // The driver check above already carries NO_DRIVER's hint: said once.
    let Some(driver) = &host.driver else {
        return check(
            name,
            Status::Fail,
            Outcome::NoDriver,
            format!("the lock's CUDA {build} build needs an NVIDIA driver"),
        );
    };
    // Native is decided per CUDA minor version: a driver whose own "CUDA Version" is 12.8 runs
    // every 12.8.x runtime natively (an update keeps the minor's driver API), even when it is
    // older than the toolkit driver of the lock's exact update (12.8.1 lists 570.124.06).
    let mm = |v: &Version| Version::parse(&v.major_minor());
    let reports_build_cuda = host.cuda.as_ref().is_some_and(|max| mm(max) >= mm(build));
    let native = reports_build_cuda || e.driver_native.as_ref().is_some_and(|n| driver >= n);
    if native {
        return check(
            name,
            Status::Pass,
            Outcome::DriverNative,
            format!("driver {driver} runs the lock's CUDA {build} build natively"),
        );
    }
    let floor = e.driver_floor.clone();
    let hint = "update the host driver, or lock an older CUDA";
    match floor {
        Some(f) if build.major() >= 11 && driver >= &f => optional(check(
            name,
            Status::Warn,
            Outcome::DriverMinorCompat,
            format!(
                "driver {driver} runs the CUDA {build} build through minor-version compatibility \
                 (floor {f}); code that JIT-compiles newer PTX can fail: {hint}"
            ),
        )),
        Some(f) => check(
            name,
            Status::Fail,
            Outcome::HostDriverTooOld,
            format!(
                "driver {driver} is too old for the lock's CUDA {build} build (needs >= {f}): {hint}"
            ),
        ),
        None if e.driver_native.is_none() && host.cuda.is_none() => optional(check(
            name,
            Status::Warn,
            Outcome::CudaUnknown,
            format!("cannot tell whether driver {driver} runs CUDA {build}: its CUDA level is unknown"),
        )),
        None => check(
            name,
            Status::Fail,
            Outcome::HostDriverTooOld,
            format!("driver {driver} is too old for the lock's CUDA {build} build: {hint}"),
        ),
    }
}

/// Every GPU must have a cubin, or at least PTX, in the build (`version::coverage`).
fn arch_check(host: &HostFacts, e: &DoctorExpect) -> Option<Check> {
    let name = "arch_coverage";
    if host.gpus.is_empty() {
        return None;
    }
    if e.cubins.is_empty() && e.ptx.is_empty() {
        return Some(optional(check(
            name,
            Status::Skip,
            Outcome::NotChecked,
            "the lock names no architectures".into(),
        )));
    }
    let (mut missing, mut ptx_only, mut ok) = (Vec::new(), Vec::new(), Vec::new());
    for g in &host.gpus {
        let label = format!("{}: {}", g.index, g.name);
        match g.cc.map(|cc| (cc, coverage(&e.cubins, &e.ptx, cc))) {
            Some((cc, Coverage::Cubin(c))) => {
                ok.push(format!("{label} {} via {}", cc.sm(), c.sm()))
            }
            Some((cc, Coverage::Ptx(p))) => ptx_only.push(format!(
                "{label} {} via compute_{}{}",
                cc.sm(),
                p.major,
                p.minor
            )),
            Some((cc, Coverage::None)) => missing.push(format!("{label} {}", cc.sm())),
            None => ptx_only.push(format!("{label} (compute capability unknown)")),
        }
    }
    let carried: Vec<String> = e
        .cubins
        .iter()
        .map(Cc::sm)
        .chain(
            e.ptx
                .iter()
                .map(|p| format!("compute_{}{}", p.major, p.minor)),
        )
        .collect();
    Some(if !missing.is_empty() {
        check(
            name,
            Status::Fail,
            Outcome::ArchMissing,
            format!(
                "the build ({}) has no kernel image for {}: pick a build whose arch list covers it",
                carried.join(" "),
                missing.join(", ")
            ),
        )
    } else if !ptx_only.is_empty() {
        optional(check(
            name,
            Status::Warn,
            Outcome::ArchPtxOnly,
            format!(
                "no cubin for {}: PTX is JIT-compiled at first use (slow start) or coverage unknown",
                ptx_only.join(", ")
            ),
        ))
    } else {
        check(name, Status::Pass, Outcome::Ok, ok.join("; "))
    })
}

/// The container section, from what the engine probe found: a container that saw a GPU passes,
/// one refused a GPU fails, registered runtimes alone are a hint (optional), and no answer at
/// all is "not checked". `None` (a caller that did not ask the engine) is "not checked" too.
/// A failure or warning says its cause's code and what to do about it.
pub fn container_check(c: Option<&ContainerGpu>) -> Check {
    let name = "container_gpu";
    let unavailable = |status: Status, c: &ContainerGpu, cause: &str| {
        let hint = match cause {
            docker::NO_GPU_RUNTIME if c.verified.is_none() => {
                format!("{}; {}", hints::NO_GPU_RUNTIME, hints::UNVERIFIED)
            }
            docker::NO_GPU_RUNTIME => hints::NO_GPU_RUNTIME.to_string(),
            docker::CUDA_DRIVER_TOO_OLD => hints::CUDA_DRIVER_TOO_OLD.to_string(),
            docker::GPU_REQUIREMENT_UNMET => hints::GPU_REQUIREMENT_UNMET.to_string(),
            _ => hints::UNVERIFIED.to_string(),
        };
        let detail = if cause.is_empty() || c.detail.contains(cause) {
            c.detail.clone()
        } else {
            format!("{} ({cause})", c.detail)
        };
        let mut check = check(name, status, Outcome::ContainerGpuUnavailable, detail);
        check.hint = Some(hint);
        check
    };
    match c {
        None => optional(check(
            name,
            Status::Skip,
            Outcome::NotChecked,
            "the Docker engine was not asked".into(),
        )),
        Some(c) if c.verified.is_none() && c.nvidia_runtime.is_none() && c.cdi.is_none() => {
            optional(check(
                name,
                Status::Skip,
                Outcome::NotChecked,
                c.detail.clone(),
            ))
        }
        Some(c) if c.verified == Some(true) => {
            check(name, Status::Pass, Outcome::Ok, c.detail.clone())
        }
        Some(c) if c.verified == Some(false) => {
            unavailable(Status::Fail, c, c.cause.as_deref().unwrap_or_default())
        }
        Some(c) if c.nvidia_runtime == Some(true) || c.cdi == Some(true) => {
            optional(check(name, Status::Pass, Outcome::Ok, c.detail.clone()))
        }
        Some(c) => optional(unavailable(Status::Warn, c, docker::NO_GPU_RUNTIME)),
    }
}

/// The human-readable doctor report. Pure; `color` adds ANSI colours.
pub fn render(report: &DoctorReport, color: bool) -> String {
    let h = &report.host;
    let opt = |v: &Option<Version>| v.as_ref().map_or("none".to_string(), |v| v.to_string());
    let mut out = format!(
        "NVIDIA driver: {} ({})\nHighest CUDA:  {} ({})\nGPUs:          {}\nCPU:           {} ({})\n",
        opt(&h.driver),
        h.driver_source,
        opt(&h.cuda),
        h.cuda_source,
        h.gpus.len(),
        h.cpu_arch.as_deref().unwrap_or("unknown"),
        h.cpu_arch_source
    );
    if let Some(e) = &report.expect {
        out.push_str(&format!(
            "Lock's build:  CUDA {}\n",
            e.cuda
                .as_ref()
                .map_or("none (CPU)".to_string(), |c| c.to_string())
        ));
    }
    out.push('\n');
    out.push_str(&render_checks(&report.checks, color));
    let verdict = match report.status {
        Verdict::Pass => "PASS: this host can run the build",
        Verdict::Fail => "FAIL: see the failed checks above",
    };
    out.push_str(&format!("\n{verdict}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::host::Gpu;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn host(driver: Option<&str>, cuda: Option<&str>, gpus: &[(&str, Option<Cc>)]) -> HostFacts {
        HostFacts {
            driver: driver.map(v),
            driver_source: "test".into(),
            cuda: cuda.map(v),
            cuda_source: "test".into(),
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, (n, cc))| Gpu {
                    index: i as u32,
                    name: n.to_string(),
                    cc: *cc,
                    memory_bytes: None,
                    uuid: None,
                })
                .collect(),
            gpus_source: "test".into(),
            cpu_arch: Some("x86_64".into()),
            cpu_arch_source: "test".into(),
            notes: vec![],
        }
    }

    fn expect(cuda: &str, arch: &[&str]) -> DoctorExpect {
        DoctorExpect::from_expectations(
            &Expectations {
                cuda: Some(cuda.into()),
                arch_list: arch.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
            &crate::core::compat::Table::embedded().unwrap(),
        )
    }

    fn find<'a>(r: &'a DoctorReport, name: &str) -> &'a Check {
        r.checks.iter().find(|c| c.name == name).unwrap()
    }

    const H100: Option<Cc> = Some(Cc::new(9, 0));

    #[test]
    fn native_minor_compat_and_too_old() {
        let e = expect("12.4", &["sm_80", "sm_90"]);
        let r = evaluate(
            &host(Some("550.54.15"), Some("12.4"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::DriverNative.as_str()
        );
        assert_eq!(r.status, Verdict::Pass);

        let r = evaluate(
            &host(Some("535.104.05"), Some("12.2"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        let c = find(&r, "driver_compat");
        assert_eq!(
            (c.status, c.code.as_str()),
            (Status::Warn, Outcome::DriverMinorCompat.as_str())
        );
        assert_eq!(r.status, Verdict::Pass);

        let r = evaluate(
            &host(Some("470.82.01"), Some("11.4"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        let c = find(&r, "driver_compat");
        assert_eq!(
            (c.status, c.code.as_str()),
            (Status::Fail, Outcome::HostDriverTooOld.as_str())
        );
        assert!(c.detail.contains("525.60.13"), "{}", c.detail);
        assert_eq!(r.status, Verdict::Fail);
        assert_eq!(r.exit_code(), 1);
    }

    /// A linux-aarch64 lock (a GH200 spec) fails on an x86_64 host and passes on an aarch64
    /// one; a fleet lock passes on either.
    #[test]
    fn the_host_cpu_must_be_one_of_the_locks_platforms() {
        use crate::core::spec::Platform;
        let mut e = expect("13.0", &["sm_90"]);
        e.platforms = vec![Platform::LinuxAarch64];
        let x86 = host(Some("580.126.20"), Some("13.0"), &[("GH200", H100)]);
        let r = evaluate(&x86, Some(&e), None);
        let c = find(&r, "cpu_arch");
        assert_eq!(
            (c.status, c.code.as_str()),
            (Status::Fail, Outcome::HostPlatformMismatch.as_str())
        );
        assert!(
            c.detail.contains("x86_64") && c.detail.contains("linux-aarch64 (aarch64)"),
            "{}",
            c.detail
        );
        assert_eq!(r.status, Verdict::Fail);
        let mut arm = x86.clone();
        arm.cpu_arch = Some("aarch64".into());
        assert_eq!(
            find(&evaluate(&arm, Some(&e), None), "cpu_arch").status,
            Status::Pass
        );
        e.platforms = vec![Platform::Linux64, Platform::LinuxAarch64];
        assert_eq!(
            find(&evaluate(&x86, Some(&e), None), "cpu_arch").status,
            Status::Pass
        );
        // No lock: the architecture is reported, not judged.
        let c = find(&evaluate(&x86, None, None), "cpu_arch").clone();
        assert_eq!((c.status, c.required), (Status::Pass, false));
    }

    #[test]
    fn a_new_major_never_runs_on_an_older_family() {
        let e = expect("13.0", &["sm_90"]);
        let r = evaluate(
            &host(Some("575.57.08"), Some("12.9"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::HostDriverTooOld.as_str()
        );
    }

    #[test]
    fn explicit_native_driver_from_the_lock() {
        let mut e = expect("12.4", &["sm_90"]);
        e.driver_native = Some(v("550.54.14"));
        let r = evaluate(
            &host(Some("550.54.15"), None, &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::DriverNative.as_str()
        );
        let r = evaluate(
            &host(Some("550.40.07"), None, &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::DriverMinorCompat.as_str()
        );
    }

    /// NVIDIA lists a toolkit driver per update (12.8 GA 570.26, 12.8.1 570.124.06), but an
    /// update keeps its minor's driver API: a driver that reports CUDA 12.8 runs a 12.8.1
    /// build natively, not through minor-version compatibility.
    #[test]
    fn native_is_decided_per_cuda_minor_not_per_update() {
        let mut e = expect("12.8.1", &["sm_90"]);
        e.driver_native = Some(v("570.124.06"));
        let r = evaluate(
            &host(Some("570.86.10"), Some("12.8"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        let c = find(&r, "driver_compat");
        assert_eq!(c.code, Outcome::DriverNative.as_str(), "{}", c.detail);
        // A driver of the previous minor still runs it only through minor-version compatibility.
        let r = evaluate(
            &host(Some("560.35.03"), Some("12.6"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::DriverMinorCompat.as_str()
        );
        // A newer major's driver runs an older major natively.
        let r = evaluate(
            &host(Some("580.65.06"), Some("13.0"), &[("H100", H100)]),
            Some(&e),
            None,
        );
        assert_eq!(
            find(&r, "driver_compat").code,
            Outcome::DriverNative.as_str()
        );
    }

    #[test]
    fn arch_coverage_cubin_ptx_and_missing() {
        let e = expect("12.8", &["sm_80", "sm_90", "compute_90"]);
        let h = host(
            Some("570.133.20"),
            Some("12.8"),
            &[("L4", Some(Cc::new(8, 9)))],
        );
        assert_eq!(
            find(&evaluate(&h, Some(&e), None), "arch_coverage").code,
            Outcome::Ok.as_str()
        );
        let h = host(
            Some("570.133.20"),
            Some("12.8"),
            &[("B200", Some(Cc::new(10, 0)))],
        );
        assert_eq!(
            find(&evaluate(&h, Some(&e), None), "arch_coverage").code,
            Outcome::ArchPtxOnly.as_str()
        );
        let e = expect("12.8", &["sm_80", "sm_90"]);
        let r = evaluate(&h, Some(&e), None);
        let c = find(&r, "arch_coverage");
        assert_eq!(
            (c.status, c.code.as_str()),
            (Status::Fail, Outcome::ArchMissing.as_str())
        );
        assert!(c.detail.contains("sm_100"), "{}", c.detail);
        assert_eq!(r.status, Verdict::Fail);
    }

    #[test]
    fn no_driver_fails_alone_but_not_for_a_cpu_lock() {
        let mut h = host(None, None, &[]);
        h.notes = vec!["NVML: libnvidia-ml.so.1 is not loadable".into()];
        let r = evaluate(&h, None, None);
        let c = find(&r, "driver");
        assert_eq!(
            (c.status, c.code.as_str()),
            (Status::Fail, Outcome::NoDriver.as_str())
        );
        assert!(c.detail.contains("no NVIDIA driver found"));
        assert!(c.detail.contains("libnvidia-ml"));
        assert!(c.hint.as_deref().unwrap().contains("--gpus none"));
        // With a CUDA lock the build's check fails too, without saying the same hint twice.
        let r = evaluate(&h, Some(&expect("12.4", &["sm_80"])), None);
        let hints = r.checks.iter().filter(|c| c.hint.is_some()).count();
        assert_eq!(
            (find(&r, "driver_compat").code.as_str(), hints),
            (Outcome::NoDriver.as_str(), 1)
        );
        assert_eq!(r.status, Verdict::Fail);
        assert_eq!(find(&r, "container_gpu").code, Outcome::NotChecked.as_str());

        let cpu = DoctorExpect::default();
        let r = evaluate(&h, Some(&cpu), None);
        assert_eq!(r.status, Verdict::Pass);
        assert_eq!(find(&r, "driver_compat").code, Outcome::CpuBuild.as_str());
    }

    #[test]
    fn container_section_from_the_docker_layer() {
        let h = host(Some("550.54.15"), Some("12.4"), &[("H100", H100)]);
        let bad = ContainerGpu {
            nvidia_runtime: Some(true),
            cdi: None,
            verified: Some(false),
            cause: Some(crate::core::codes::docker::NO_GPU_RUNTIME.into()),
            detail: "a --gpus all container saw no GPU".into(),
        };
        let r = evaluate(&h, None, Some(bad));
        assert_eq!(
            find(&r, "container_gpu").code,
            Outcome::ContainerGpuUnavailable.as_str()
        );
        assert_eq!(r.status, Verdict::Fail);
    }

    #[test]
    fn expectations_split_cubins_and_ptx() {
        let e = expect("12.4", &["sm_80", "sm_90a", "compute_90", "bogus"]);
        assert_eq!(e.cubins, vec![Cc::new(8, 0), Cc::new(9, 0)]);
        assert_eq!(e.ptx, vec![Cc::new(9, 0)]);
        assert_eq!(e.driver_floor, Some(v("525.60.13")));
    }

    #[test]
    fn render_is_plain_without_color() {
        let h = host(Some("550.54.15"), Some("12.4"), &[("H100", H100)]);
        let text = render(&evaluate(&h, None, None), false);
        assert!(text.contains("NVIDIA driver: 550.54.15 (test)"));
        assert!(text.contains("PASS"));
        assert!(!text.contains('\x1b'));
    }
}
