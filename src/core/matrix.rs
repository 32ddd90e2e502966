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
    /// The content-addressed tag `envbuild image` builds the image under (its primary tag,
    /// `--json`'s `builds[].tags[0]`): `NAME:VARIANT-<content12>`, a fleet's platform image
    /// `NAME:VARIANT-<content12>-amd64` / `-arm64`.
    pub image: String,
    /// With `--repo REGISTRY/REPO`: where `envbuild image --push REGISTRY/REPO` pushes it
    /// (`REGISTRY/REPO:` and the tag of `image`), the name `envbuild test --show-verdict` reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<String>,
    /// A fleet's entry with `--repo`: the image index a push of every platform writes
    /// (`REGISTRY/REPO:VARIANT-<content12>`), one reference for every platform's image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
}

/// The platforms `lock` builds images for, in its order: its own, then each of its fleet's
/// (`Lock::platforms`).
pub fn platforms(lock: &Lock) -> Vec<Platform> {
    lock.platforms()
}

/// The entries of one spec whose lock is `lock`, for `variants` (empty: every variant the lock
/// declares) and `platforms` ([`platforms`] of the lock), in the lock's variant order, then the
/// platforms' order. `identity` is the content hash of the lock's render (`image`'s
/// `RenderedImage::identity`, the whole fleet's for a fleet): the tags are `image`'s own
/// (`core::image_ref::platform_tag`), so CI pulls what `image --push` pushed.
#[allow(clippy::too_many_arguments)]
pub fn entries(
    label: &str,
    spec: &str,
    lock: &Lock,
    identity: &str,
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
    let fleet = !lock.fleet.is_empty();
    let mut out = Vec::new();
    for variant in lock
        .image
        .variants
        .iter()
        .map(|v| v.as_str())
        .filter(|v| variants.is_empty() || variants.contains(v))
    {
        for p in platforms {
            let platform = p.as_str();
            // Only a fleet's platform images carry the suffix (`image_fleet::platform_images`).
            let suffix = if fleet {
                crate::core::platform::tag_suffix(*p)
            } else {
                String::new()
            };
            let tag = crate::core::image_ref::platform_tag(variant, identity, &suffix);
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
                image: format!("{image_name}:{tag}"),
                pushed: repo.map(|r| format!("{r}:{tag}")),
                index: repo.filter(|_| fleet).map(|r| {
                    format!(
                        "{r}:{}",
                        crate::core::image_ref::variant_tag(variant, identity)
                    )
                }),
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
        if let Some(i) = &e.index {
            out.push_str(&format!("      ENVBUILD_INDEX: {}\n", q(i)));
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
            index: None,
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

    /// A single-platform lock: `image` and `pushed` are `VARIANT-<content12>`, no suffix and
    /// no index.
    #[test]
    fn a_single_platform_entry_is_tagged_with_the_content_hash() {
        let text = include_str!("../../specs/torch29-cu128/envbuild.lock");
        let lock = Lock::from_toml(text).unwrap();
        let id = "0123456789abcdef".repeat(4);
        let got = entries(
            "t",
            "s.toml",
            &lock,
            &id,
            "envbuild/t",
            &["runtime"],
            &platforms(&lock),
            Some("r.example/team/envs"),
        );
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].image, "envbuild/t:runtime-0123456789ab");
        assert_eq!(
            got[0].pushed.as_deref(),
            Some("r.example/team/envs:runtime-0123456789ab")
        );
        assert_eq!(got[0].index, None);
    }

    /// A fleet lock: one entry per platform of the lock, each its platform image's tag (the
    /// fleet's content hash and the platform's suffix), and with a repository the index.
    #[test]
    fn a_fleet_lock_gives_one_entry_per_platform() {
        let text = include_str!("../../specs/fleet-h100-gh200/envbuild.lock");
        let lock = Lock::from_toml(text).unwrap();
        let id = "fedcba9876543210".repeat(4);
        let ps = platforms(&lock);
        assert_eq!(ps, [Platform::Linux64, Platform::LinuxAarch64]);
        let got = entries(
            "f",
            "s.toml",
            &lock,
            &id,
            "envbuild/f",
            &["runtime"],
            &ps,
            Some("r.example/envs"),
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].image, "envbuild/f:runtime-fedcba987654-amd64");
        assert_eq!(got[1].image, "envbuild/f:runtime-fedcba987654-arm64");
        assert_eq!(
            got[1].pushed.as_deref(),
            Some("r.example/envs:runtime-fedcba987654-arm64")
        );
        for e in &got {
            assert_eq!(
                e.index.as_deref(),
                Some("r.example/envs:runtime-fedcba987654")
            );
        }
        assert_eq!(got[1].docker_platform, "linux/arm64");
        assert_eq!(got[1].runs_on, "ubuntu-24.04-arm");
        let gitlab = gitlab(&got);
        assert!(
            gitlab.contains("ENVBUILD_INDEX: \"r.example/envs:runtime-fedcba987654\"\n"),
            "{gitlab}"
        );
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
