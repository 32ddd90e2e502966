//! The CI matrix of `envbuild matrix`: one entry per spec × variant × platform, and its text for
//! GitHub Actions (`strategy.matrix`), GitLab CI (`parallel: matrix:`) or JSON. Performs no I/O.

use crate::core::lock::Lock;
use crate::core::spec::Platform;
use serde::Serialize;

/// One CI job: build and test one variant of one spec on one platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// `LABEL-VARIANT-PLATFORM`, unique in the matrix (a job's display name).
    pub name: String,
    /// The spec's path as given (relative paths stay relative: CI checks out the same tree).
    pub spec: String,
    pub variant: String,
    /// The lock's platform (`linux-64`, `linux-aarch64`).
    pub platform: String,
    /// The Docker platform `envbuild image` builds it for (`linux/amd64`, `linux/arm64`).
    pub docker_platform: String,
    /// A GitHub-hosted runner that builds and runs it natively (`ubuntu-24.04`,
    /// `ubuntu-24.04-arm`): a hint, for `runs-on` where no self-hosted runner is asked for.
    pub runs_on: String,
    /// `yes` when the full smoke test needs a GPU runner (a CUDA build), else `no`.
    pub gpus: String,
    /// The content-addressed image tag `envbuild image` builds (`NAME:VARIANT-<hash12>`).
    pub image: String,
    /// With `--repo REGISTRY/REPO`: where `envbuild image --push REGISTRY/REPO` pushes it
    /// (`REGISTRY/REPO:VARIANT-<hash12>`), the name `envbuild test --show-verdict` reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<String>,
}

/// The platforms `lock` builds images for, in its order: its own, then each of its fleet's
/// (`Lock::platforms`).
pub fn platforms(lock: &Lock) -> Vec<Platform> {
    lock.platforms()
}

/// The lock hash a platform's image is tagged with (`VARIANT-<hash12>`, as the rendered run
/// snippets of its folder name it): a fleet entry's own, else `lock_hash`.
fn platform_lock_hash(lock: &Lock, lock_hash: &str, p: Platform) -> String {
    match lock
        .fleet
        .iter()
        .find(|l| l.platform == p && p != lock.platform)
    {
        Some(entry) => entry.hash().unwrap_or_else(|_| lock_hash.to_string()),
        None => lock_hash.to_string(),
    }
}

/// The entries of one spec whose lock is `lock` (hash `lock_hash`), for `variants` (empty: every
/// variant the lock declares) and `platforms` ([`platforms`] of the lock), in the lock's variant
/// order, then the platforms' order.
#[allow(clippy::too_many_arguments)]
pub fn entries(
    label: &str,
    spec: &str,
    lock: &Lock,
    lock_hash: &str,
    image_name: &str,
    variants: &[&str],
    platforms: &[Platform],
    repo: Option<&str>,
) -> Vec<Entry> {
    let gpus = if lock.cuda.is_empty() || lock.cuda_variant.as_deref() == Some("cpu") {
        "no"
    } else {
        "yes"
    };
    let short = lock_hash.get(..12).unwrap_or(lock_hash);
    let hashes: Vec<String> = platforms
        .iter()
        .map(|p| platform_lock_hash(lock, lock_hash, *p))
        .collect();
    let mut out = Vec::new();
    for variant in lock
        .image
        .variants
        .iter()
        .map(|v| v.as_str())
        .filter(|v| variants.is_empty() || variants.contains(v))
    {
        for (p, hash) in platforms.iter().zip(&hashes) {
            let platform = p.as_str();
            let own = hash.get(..12).unwrap_or(hash);
            out.push(Entry {
                name: format!("{label}-{variant}-{platform}"),
                spec: spec.to_string(),
                variant: variant.to_string(),
                platform: platform.to_string(),
                docker_platform: crate::core::platform::docker_platform(*p)
                    .unwrap_or_default()
                    .to_string(),
                runs_on: crate::core::platform::runs_on(*p)
                    .unwrap_or_default()
                    .to_string(),
                gpus: gpus.to_string(),
                image: format!("{image_name}:{variant}-{own}"),
                pushed: repo.map(|r| format!("{r}:{variant}-{short}")),
            });
        }
    }
    out
}

/// GitHub Actions: the object for `strategy.matrix: ${{ fromJSON(...) }}`, on one line (what a
/// step writes to `$GITHUB_OUTPUT`).
pub fn github(entries: &[Entry]) -> String {
    let doc = serde_json::json!({ "include": entries });
    format!("{doc}\n")
}

/// GitLab CI: a `parallel: matrix:` block, one single-valued variable set per job, every value
/// a double-quoted YAML string (JSON escaping is valid YAML), so no value is read as a boolean
/// (`yes`) or a number.
pub fn gitlab(entries: &[Entry]) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let mut out = String::from("parallel:\n  matrix:\n");
    for e in entries {
        out.push_str(&format!("    - ENVBUILD_NAME: {}\n", q(&e.name)));
        for (k, v) in [
            ("ENVBUILD_SPEC", &e.spec),
            ("ENVBUILD_VARIANT", &e.variant),
            ("ENVBUILD_PLATFORM", &e.platform),
            ("ENVBUILD_DOCKER_PLATFORM", &e.docker_platform),
            ("ENVBUILD_RUNS_ON", &e.runs_on),
            ("ENVBUILD_GPUS", &e.gpus),
            ("ENVBUILD_IMAGE", &e.image),
        ] {
            out.push_str(&format!("      {k}: {}\n", q(v)));
        }
        if let Some(p) = &e.pushed {
            out.push_str(&format!("      ENVBUILD_PUSHED: {}\n", q(p)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            spec: "specs/a b/envbuild.toml".into(),
            variant: "runtime".into(),
            platform: "linux-64".into(),
            docker_platform: "linux/amd64".into(),
            runs_on: "ubuntu-24.04".into(),
            gpus: "yes".into(),
            image: "envbuild/a:runtime-0123456789ab".into(),
            pushed: None,
        }
    }

    #[test]
    fn one_entry_per_variant_and_platform_with_its_docker_platform_and_runner() {
        let text = include_str!("../../specs/torch29-cu128/envbuild.lock");
        let lock = Lock::from_toml(text).unwrap();
        let both = [Platform::Linux64, Platform::LinuxAarch64];
        let got = entries(
            "t",
            "s.toml",
            &lock,
            &"a".repeat(64),
            "envbuild/t",
            &[],
            &both,
            None,
        );
        let per_variant = lock.image.variants.len();
        assert_eq!(got.len(), 2 * per_variant);
        let arm = &got[1];
        assert_eq!(arm.platform, "linux-aarch64");
        assert_eq!(arm.docker_platform, "linux/arm64");
        assert_eq!(arm.runs_on, "ubuntu-24.04-arm");
        assert_eq!(arm.name, format!("t-{}-linux-aarch64", arm.variant));
        assert_eq!(got[0].docker_platform, "linux/amd64");
        assert_eq!(got[0].runs_on, "ubuntu-24.04");
        assert_eq!(platforms(&lock), [Platform::Linux64]);
    }

    /// A fleet lock: one entry per platform of the lock, each tagged with its own lock's hash
    /// (the tag its render folder's run snippets name).
    #[test]
    fn a_fleet_lock_gives_one_entry_per_platform() {
        let text = include_str!("../../specs/fleet-h100-gh200/envbuild.lock");
        let lock = Lock::from_toml(text).unwrap();
        let hash = lock.hash().unwrap();
        let ps = platforms(&lock);
        assert_eq!(ps, [Platform::Linux64, Platform::LinuxAarch64]);
        let got = entries(
            "f",
            "s.toml",
            &lock,
            &hash,
            "envbuild/f",
            &["runtime"],
            &ps,
            None,
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].image, format!("envbuild/f:runtime-{}", &hash[..12]));
        let arm_hash = lock.fleet[0].hash().unwrap();
        assert_eq!(
            got[1].image,
            format!("envbuild/f:runtime-{}", &arm_hash[..12])
        );
        assert_eq!(got[1].docker_platform, "linux/arm64");
        assert_eq!(got[1].runs_on, "ubuntu-24.04-arm");
    }

    #[test]
    fn github_is_one_line_with_include() {
        let text = github(&[entry("a-runtime-linux-64")]);
        assert_eq!(text.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["include"][0]["spec"], "specs/a b/envbuild.toml");
        assert_eq!(v["include"][0]["gpus"], "yes");
    }

    #[test]
    fn gitlab_quotes_every_value() {
        let text = gitlab(&[entry("a\"x")]);
        assert!(text.contains("ENVBUILD_NAME: \"a\\\"x\"\n"), "{text}");
        assert!(text.contains("ENVBUILD_GPUS: \"yes\"\n"), "{text}");
        assert!(
            text.contains("ENVBUILD_DOCKER_PLATFORM: \"linux/amd64\"\n"),
            "{text}"
        );
        assert!(
            text.contains("ENVBUILD_RUNS_ON: \"ubuntu-24.04\"\n"),
            "{text}"
        );
    }
}
