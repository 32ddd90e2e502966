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
