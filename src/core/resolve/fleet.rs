//! The fleet: which platforms a spec resolves for, and which of its GPUs each platform's checks
//! cover. A GPU names the machines it comes in (`[[gpu]] cpu_arch`): `[target] platform` (or
//! `platforms`) is inferred from the GPUs when the spec gives none, a GPU that comes in none of
//! the given platforms' machines is `PLATFORM_CONFLICT`, and a GPU that runs only JetPack builds
//! is `JETPACK_ONLY`. This module performs no I/O.

use super::codes::*;
use super::err;
use crate::core::compat::{CpuArch, GpuRow, Table};
use crate::core::diag::Diagnostic;
use crate::core::spec::{Platform, Spec};

/// One platform of the fleet and the spec's GPUs (as written) its checks cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Member {
    pub platform: Platform,
    pub gpus: Vec<String>,
}

impl Member {
    /// The spec as this platform resolves it: its platform, its GPUs, no fleet.
    pub fn spec(&self, spec: &Spec) -> Spec {
        let mut s = spec.clone();
        s.target.platform = self.platform;
        s.target.platforms = Vec::new();
        s.target.platform_given = true;
        s.target.gpus = self.gpus.clone();
        s
    }
}

fn machine(p: Platform) -> CpuArch {
    p.machine()
}

/// The Linux platform of a CPU architecture: what a GPU's machine implies when the spec names
/// no platform.
fn linux(a: CpuArch) -> Platform {
    match a {
        CpuArch::X86_64 => Platform::Linux64,
        CpuArch::Aarch64 => Platform::LinuxAarch64,
    }
}

/// The fleet of a spec, in the fixed order of [`Platform`]: the platforms as written, or those
/// the GPUs' usual machines imply (`linux-64` when no GPU says). Each GPU is checked on the
/// platforms of the first machine it comes in that the fleet has (an H100 in a fleet of
/// `linux-64` and `linux-aarch64` on `linux-64`); a GPU the table does not know, or one given as
/// a compute capability, on every platform.
pub(super) fn plan(spec: &Spec, table: &Table) -> Result<Vec<Member>, Vec<Diagnostic>> {
    let rows: Vec<(&String, Option<&GpuRow>)> = spec
        .target
        .gpus
        .iter()
        .map(|g| (g, table.find_gpu(g).and_then(|m| m.row)))
        .collect();
    let mut errors: Vec<Diagnostic> = rows
        .iter()
        .filter_map(|(input, row)| row.filter(|r| r.jetpack).map(|r| jetpack(input, r)))
        .collect();
    let platforms = platforms(spec, &rows);
    let mut members: Vec<Member> = platforms
        .iter()
        .map(|&platform| Member {
            platform,
            gpus: Vec::new(),
        })
        .collect();
    for (input, row) in &rows {
        let machines = row.map(|r| r.cpu_arch.as_slice()).unwrap_or_default();
        let on = machines
            .iter()
            .find(|a| platforms.iter().any(|&p| machine(p) == **a));
        match (machines.is_empty(), on) {
            (true, _) => members
                .iter_mut()
                .for_each(|m| m.gpus.push((*input).clone())),
            (false, Some(a)) => members
                .iter_mut()
                .filter(|m| machine(m.platform) == *a)
                .for_each(|m| m.gpus.push((*input).clone())),
            (false, None) => errors.push(conflict(spec, table, input, row.expect("has machines"))),
        }
    }
    if errors.is_empty() {
        Ok(members)
    } else {
        Err(errors)
    }
}

/// The platforms as written, else those the GPUs' usual machines imply.
fn platforms(spec: &Spec, rows: &[(&String, Option<&GpuRow>)]) -> Vec<Platform> {
    if !spec.target.platforms.is_empty() {
        return spec.target.platforms.clone();
    }
    if spec.target.platform_given {
        return vec![spec.target.platform];
    }
    let mut out: Vec<Platform> = rows
        .iter()
        .filter_map(|(_, r)| r.and_then(|r| r.cpu_arch.first().copied()))
        .map(linux)
        .collect();
    out.sort();
    out.dedup();
    if out.is_empty() {
        out.push(spec.target.platform);
    }
    out
}

/// A GPU as the spec wrote it, with the table's name when that differs (`Orin (Jetson Orin)`).
fn named(input: &str, row: &GpuRow) -> String {
    if input == row.name {
        input.to_string()
    } else {
        format!("{input} ({})", row.name)
    }
}

/// The names of a list of platforms, for a message: `linux-64` or `linux-64, win-64`.
fn names(ps: &[Platform]) -> String {
    ps.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
}

/// `PLATFORM_CONFLICT`: the GPU comes in no machine of the spec's platforms. The hint names the
/// platform of its usual machine only when the spec with that platform locks.
fn conflict(spec: &Spec, table: &Table, input: &str, row: &GpuRow) -> Diagnostic {
    let given = match spec.target.platforms.is_empty() {
        true => vec![spec.target.platform],
        false => spec.target.platforms.clone(),
    };
    let key = match spec.target.platforms.is_empty() {
        true => "target.platform",
        false => "target.platforms",
    };
    let arches: Vec<&str> = row.cpu_arch.iter().map(|a| a.as_str()).collect();
    let d = err(
        PLATFORM_CONFLICT,
        key,
        format!(
            "{} comes in {} machines only, but [target] {} is {}",
            named(input, row),
            arches.join(" and "),
            key.trim_start_matches("target."),
            names(&given)
        ),
    );
    let usual = linux(row.cpu_arch[0]);
    let mut alone = spec.clone();
    alone.target.platform = usual;
    alone.target.platforms = Vec::new();
    alone.target.platform_given = true;
    // Proven only where no GPU of the spec conflicts with that platform too (the proof would
    // otherwise come back here, for the other GPU, without end).
    let all_fit = spec.target.gpus.iter().all(|g| {
        table.find_gpu(g).and_then(|m| m.row).is_none_or(|r| {
            !r.jetpack && (r.cpu_arch.is_empty() || r.cpu_arch.contains(&row.cpu_arch[0]))
        })
    });
    if all_fit && super::locks(&alone, table) {
        let mut fleet = given.clone();
        fleet.push(usual);
        fleet.sort();
        fleet.dedup();
        d.with_hint(format!(
            "make [target] platform {} (the spec locks there), or list the fleet's platforms in [target] platforms ({})",
            usual.as_str(),
            names(&fleet)
        ))
    } else {
        d.with_hint(format!(
            "target a platform of the machines {} comes in ([target] platform or platforms), or remove it from gpus",
            row.name
        ))
    }
}

/// `JETPACK_ONLY`: Jetson Orin and Xavier run NVIDIA's JetPack (L4T) builds of torch, which
/// the table has no facts for; PyPI's and the PyTorch index's aarch64 wheels are server builds.
fn jetpack(input: &str, row: &GpuRow) -> Diagnostic {
    err(
        JETPACK_ONLY,
        "target.gpus",
        format!(
            "{} runs NVIDIA's JetPack (L4T) builds of torch, not the server wheels envbuild locks (PyPI, the PyTorch index, conda-forge)",
            named(input, row)
        ),
    )
    .with_hint(
        "use NVIDIA's JetPack torch for this device outside envbuild (its L4T containers), or target a Jetson Thor or a server GPU",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_of_platforms() {
        assert_eq!(machine(Platform::Linux64), CpuArch::X86_64);
        assert_eq!(machine(Platform::Win64), CpuArch::X86_64);
        assert_eq!(machine(Platform::LinuxAarch64), CpuArch::Aarch64);
        assert_eq!(linux(CpuArch::Aarch64), Platform::LinuxAarch64);
    }
}
