//! Which builder a build goes through: BuildKit when the engine has it (Linux engines from
//! API 1.39), the classic builder otherwise, or the one `ENVBUILD_BUILDER` forces. Reads the
//! environment; asks the engine its version (network I/O).

use crate::core::diag::Failure;
use crate::infra::docker::Engine;

/// Which builder a build goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Builder {
    /// The engine's BuildKit: cache and bind mounts, parallel stages.
    BuildKit,
    /// The classic builder, and why BuildKit is not used.
    Legacy(String),
}

/// `ENVBUILD_BUILDER`: `buildkit` or `legacy` forces a builder; unset (or `auto`) asks the
/// engine.
pub const BUILDER_ENV: &str = "ENVBUILD_BUILDER";

/// The first Engine API version whose `/build` takes `version=2` and whose `/session` is not
/// experimental (Docker 18.09).
const BUILDKIT_MIN_API: (u32, u32) = (1, 39);

/// The builder `ENVBUILD_BUILDER` forces (`None`: unset or `auto`); any other value is a usage
/// error, checked when envbuild connects so that a typo fails before any work.
pub fn forced() -> Result<Option<Builder>, Failure> {
    let value = one_of(
        BUILDER_ENV,
        &["legacy", "buildkit"],
        "is not a builder",
        "buildkit, legacy or auto (the default: BuildKit when the engine has it)",
    )?;
    Ok(value.map(|v| match v {
        "legacy" => Builder::Legacy(format!("{BUILDER_ENV}=legacy")),
        _ => Builder::BuildKit,
    }))
}

/// The build arg the Dockerfile reads to choose who downloads the locked wheels.
pub const WHEELS_ARG: &str = "ENVBUILD_WHEELS";

/// Who downloads the locked wheels of a BuildKit build (`ENVBUILD_WHEELS`): `Some("engine")`
/// or `Some("index")` as forced, `None` (unset or `auto`) for [`wheels_for`] to decide; any
/// other value is a usage error.
pub fn wheels_forced() -> Result<Option<&'static str>, Failure> {
    one_of(
        WHEELS_ARG,
        &["engine", "index"],
        "is not a source of wheels",
        "engine, index or auto (the default: the engine downloads them when it builds for \
         another CPU, under emulation)",
    )
}

/// The value of the environment variable `name` when it is one of `values`; `None` when it is
/// unset, empty or `auto`; any other value is a usage error: `NAME=value {refusal}`, hinted
/// with `NAME={choices}`.
fn one_of(
    name: &str,
    values: &[&'static str],
    refusal: &str,
    choices: &str,
) -> Result<Option<&'static str>, Failure> {
    let Ok(raw) = std::env::var(name) else {
        return Ok(None);
    };
    match raw.trim() {
        "" | "auto" => Ok(None),
        v => match values.iter().find(|known| **known == v) {
            Some(known) => Ok(Some(*known)),
            None => Err(Failure::usage(
                format!("{name}={} {refusal}", crate::core::diag::printable(v)),
                Some(format!("{name}={choices}")),
            )),
        },
    }
}

/// The `ENVBUILD_WHEELS` value of a build: none when the Dockerfile does not take it; else the
/// forced one, else `engine` when the build's platform is not the engine's (its `RUN` steps are
/// emulated, and pip's download with them), else none (`index`, the Dockerfile's default).
pub fn wheels_for(
    dockerfile: &str,
    forced: Option<&'static str>,
    build: Option<&str>,
    engine: Option<&str>,
) -> Option<&'static str> {
    let takes = dockerfile
        .lines()
        .any(|l| l.trim() == format!("ARG {WHEELS_ARG}=index"));
    if !takes {
        return None;
    }
    if forced.is_some() {
        return forced;
    }
    let arch = |p: &str| p.split('/').nth(1).map(str::to_string);
    match (build.and_then(arch), engine.and_then(arch)) {
        (Some(b), Some(e)) if b != e => Some("engine"),
        _ => None,
    }
}

/// Pick the builder: BuildKit when the engine has it (Linux engines from API 1.39), the legacy
/// builder otherwise or when `ENVBUILD_BUILDER` says so ([`forced`]); a stalled engine is
/// `ENGINE_TIMEOUT`.
pub async fn choose(engine: &Engine) -> Result<Builder, Failure> {
    if let Some(forced) = forced()? {
        return Ok(forced);
    }
    let version = match engine.version().await? {
        Ok(v) => v,
        Err(e) => {
            return Ok(Builder::Legacy(format!(
                "the engine did not say its version ({e})"
            )))
        }
    };
    let os = version.os.as_deref().unwrap_or_default();
    let api = version.api_version.as_deref().unwrap_or_default();
    Ok(decide(os, api))
}

/// The decision of [`choose`] from the engine's OS and API version.
fn decide(os: &str, api: &str) -> Builder {
    if os.eq_ignore_ascii_case("windows") {
        return Builder::Legacy(
            "the engine runs Windows containers, which BuildKit does not build".into(),
        );
    }
    let parsed = api
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some(v) if v >= BUILDKIT_MIN_API => Builder::BuildKit,
        Some(_) => Builder::Legacy(format!(
            "the engine speaks API {api}; BuildKit needs {}.{} (Docker 18.09) or newer",
            BUILDKIT_MIN_API.0, BUILDKIT_MIN_API.1
        )),
        None => Builder::Legacy(format!(
            "the engine reported no usable API version (`{api}`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_downloads_the_wheels_of_an_emulated_build_only() {
        let df = "# x\nARG ENVBUILD_WHEELS=index\nFROM scratch AS wheels-torch-index\n";
        let (amd, arm) = (Some("linux/amd64"), Some("linux/arm64"));
        assert_eq!(wheels_for(df, None, arm, amd), Some("engine"));
        assert_eq!(wheels_for(df, None, amd, amd), None);
        assert_eq!(wheels_for(df, None, Some("linux/arm64/v8"), arm), None);
        // No platform asked (the engine's own) or an engine that does not say: pip downloads.
        assert_eq!(wheels_for(df, None, None, amd), None);
        assert_eq!(wheels_for(df, None, arm, None), None);
        assert_eq!(wheels_for(df, Some("index"), arm, amd), Some("index"));
        assert_eq!(wheels_for(df, Some("engine"), amd, amd), Some("engine"));
        // A Dockerfile without the stages (no closure layers, a team's template) gets no arg.
        assert_eq!(wheels_for("FROM x\n", Some("engine"), arm, amd), None);
    }

    #[test]
    fn builder_is_chosen_from_the_engine_api() {
        assert_eq!(decide("linux", "1.41"), Builder::BuildKit);
        assert_eq!(decide("linux", "1.39"), Builder::BuildKit);
        assert_eq!(decide("linux", "1.100"), Builder::BuildKit);
        assert!(matches!(decide("linux", "1.38"), Builder::Legacy(w) if w.contains("1.38")));
        assert!(matches!(decide("windows", "1.41"), Builder::Legacy(w) if w.contains("Windows")));
        assert!(matches!(decide("linux", ""), Builder::Legacy(_)));
    }
}
