//! A lock's platform as the other tools name it: the Docker platform an image is built for
//! (`linux/amd64`, `linux/arm64`), the CPU architecture the kernel reports inside it (`uname -m`,
//! Python's `platform.machine()`: `x86_64`, `aarch64`), the architecture an image config
//! records (`amd64`, `arm64`) and the GitHub-hosted runner that runs it natively. One table, so
//! the build, the smoke test's expectation and the CI matrix agree. This module performs no I/O.

use crate::core::spec::Platform;

/// One platform's names in each tool's words.
struct Names {
    platform: Platform,
    /// The Engine API's `platform` (`docker build --platform`).
    docker: &'static str,
    /// An image config's `architecture` (the OCI/Go name).
    arch: &'static str,
    /// `uname -m` / `platform.machine()` inside a container of that platform.
    machine: &'static str,
    /// The GitHub-hosted runner label that runs the platform natively.
    runner: &'static str,
}

/// The platforms envbuild builds images for. `win-64` is not among them: no Linux image runs it.
const NAMES: &[Names] = &[
    Names {
        platform: Platform::Linux64,
        docker: "linux/amd64",
        arch: "amd64",
        machine: "x86_64",
        runner: "ubuntu-24.04",
    },
    Names {
        platform: Platform::LinuxAarch64,
        docker: "linux/arm64",
        arch: "arm64",
        machine: "aarch64",
        runner: "ubuntu-24.04-arm",
    },
];

fn names(p: Platform) -> Option<&'static Names> {
    NAMES.iter().find(|n| n.platform == p)
}

/// The Docker platform of `p` (`linux/arm64`); `None` for a platform no image is built for.
pub fn docker_platform(p: Platform) -> Option<&'static str> {
    names(p).map(|n| n.docker)
}

/// The image config's `architecture` of `p` (`arm64`).
pub fn image_arch(p: Platform) -> Option<&'static str> {
    names(p).map(|n| n.arch)
}

/// What `platform.machine()` reports inside a container of `p` (`aarch64`).
pub fn machine(p: Platform) -> Option<&'static str> {
    names(p).map(|n| n.machine)
}

/// The GitHub-hosted runner that builds and runs `p` natively (`ubuntu-24.04-arm`).
pub fn runs_on(p: Platform) -> Option<&'static str> {
    names(p).map(|n| n.runner)
}

/// The platform whose machine is `machine` (`uname -m`: `x86_64`, `aarch64`; also `amd64` and
/// `arm64`, the names some systems and image configs use).
pub fn from_machine(machine: &str) -> Option<Platform> {
    let m = machine.trim();
    NAMES
        .iter()
        .find(|n| n.machine == m || n.arch == m)
        .map(|n| n.platform)
}

/// The suffix a fleet's image of `p` carries on its tags (`-arm64`), so that the images of two
/// platforms never share a tag, locally or in a registry. A single-platform lock has none.
pub fn tag_suffix(p: Platform) -> String {
    format!("-{}", image_arch(p).unwrap_or(p.as_str()))
}

/// The platform among `platforms` whose fleet image `tag` (`NAME:VARIANT-<hash12>-arm64`) is.
pub fn of_fleet_tag(tag: &str, platforms: &[Platform]) -> Option<Platform> {
    let (_, t) = tag.rsplit_once(':').filter(|(_, t)| !t.contains('/'))?;
    platforms
        .iter()
        .copied()
        .find(|p| t.ends_with(&tag_suffix(*p)))
}

/// The platforms envbuild builds images for, by name (`linux-64, linux-aarch64`), for messages.
pub fn known_names() -> String {
    NAMES
        .iter()
        .map(|n| n.platform.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The one parser of a `--platform` value: a platform name (`linux-aarch64`) an image is built
/// for; an unknown one names the known.
pub fn parse_image_platform(s: &str) -> Result<Platform, String> {
    let s = s.trim();
    Platform::parse(s)
        .filter(|p| names(*p).is_some())
        .ok_or_else(|| {
            format!(
                "`{s}` is not a platform envbuild builds images for (known: {})",
                known_names()
            )
        })
}

/// The platforms of a lock (`in_lock`, its order) that `wanted` selects: every one when
/// `wanted` is empty. `Err`: the first wanted platform the lock does not hold.
pub fn select(in_lock: &[Platform], wanted: &[Platform]) -> Result<Vec<Platform>, Platform> {
    if let Some(missing) = wanted.iter().find(|w| !in_lock.contains(w)) {
        return Err(*missing);
    }
    Ok(in_lock
        .iter()
        .copied()
        .filter(|p| wanted.is_empty() || wanted.contains(p))
        .collect())
}

/// The platform of a Docker platform string (`linux/arm64`, `linux/arm64/v8`).
pub fn from_docker(docker: &str) -> Option<Platform> {
    let mut parts = docker.trim().split('/');
    let (os, arch) = (parts.next()?, parts.next()?);
    (os == "linux").then(|| from_machine(arch)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platform_has_its_names_in_every_tool() {
        let arm = Platform::LinuxAarch64;
        assert_eq!(docker_platform(arm), Some("linux/arm64"));
        assert_eq!(image_arch(arm), Some("arm64"));
        assert_eq!(machine(arm), Some("aarch64"));
        assert_eq!(runs_on(arm), Some("ubuntu-24.04-arm"));
        let x86 = Platform::Linux64;
        assert_eq!(docker_platform(x86), Some("linux/amd64"));
        assert_eq!(machine(x86), Some("x86_64"));
        assert_eq!(runs_on(x86), Some("ubuntu-24.04"));
        assert_eq!(docker_platform(Platform::Win64), None);
        assert_eq!(runs_on(Platform::Win64), None);
    }

    #[test]
    fn fleet_tags_and_selection() {
        let (x86, arm) = (Platform::Linux64, Platform::LinuxAarch64);
        assert_eq!(tag_suffix(arm), "-arm64");
        assert_eq!(tag_suffix(x86), "-amd64");
        assert_eq!(parse_image_platform(" linux-aarch64"), Ok(arm));
        let e = parse_image_platform("linux-arm64").unwrap_err();
        assert!(e.contains("known: linux-64, linux-aarch64"), "{e}");
        assert!(parse_image_platform("win-64").is_err());
        let fleet = [x86, arm];
        assert_eq!(select(&fleet, &[]), Ok(vec![x86, arm]));
        assert_eq!(select(&fleet, &[arm]), Ok(vec![arm]));
        // The lock's order, whatever the order asked.
        assert_eq!(select(&fleet, &[arm, x86]), Ok(vec![x86, arm]));
        assert_eq!(select(&[x86], &[arm]), Err(arm));
        let tag = "127.0.0.1:5000/e/x:runtime-0123456789ab-arm64";
        assert_eq!(of_fleet_tag(tag, &fleet), Some(arm));
        assert_eq!(
            of_fleet_tag("e/x:runtime-0123456789ab-amd64", &fleet),
            Some(x86)
        );
        assert_eq!(of_fleet_tag("e/x:runtime-0123456789ab", &fleet), None);
        assert_eq!(of_fleet_tag("host:5000/x-arm64", &fleet), None);
    }

    #[test]
    fn names_read_back_to_their_platform() {
        for n in NAMES {
            assert_eq!(from_machine(n.machine), Some(n.platform));
            assert_eq!(from_machine(n.arch), Some(n.platform));
            assert_eq!(from_docker(n.docker), Some(n.platform));
        }
        assert_eq!(from_docker("linux/arm64/v8"), Some(Platform::LinuxAarch64));
        assert_eq!(from_docker("windows/amd64"), None);
        assert_eq!(from_machine("riscv64"), None);
        assert_eq!(from_docker("linux"), None);
    }
}
