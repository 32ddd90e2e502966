//! Which builder a build goes through: BuildKit when the engine has it (Linux engines from
//! API 1.39), the classic builder otherwise, or the one `ENVBUILD_BUILDER` forces. Reads the
//! environment; asks the engine its version (network I/O).

use crate::core::diag::Failure;
use crate::infra::docker::limits::Call;
use crate::infra::docker::{short_error, Engine};

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
    match std::env::var(BUILDER_ENV).ok().as_deref().map(str::trim) {
        Some("legacy") => Ok(Some(Builder::Legacy(format!("{BUILDER_ENV}=legacy")))),
        Some("buildkit") => Ok(Some(Builder::BuildKit)),
        None | Some("") | Some("auto") => Ok(None),
        Some(other) => Err(Failure::usage(
            format!(
                "{BUILDER_ENV}={} is not a builder",
                crate::core::diag::printable(other)
            ),
            Some(format!(
                "{BUILDER_ENV}=buildkit, legacy or auto (the default: BuildKit when the engine has it)"
            )),
        )),
    }
}

/// Pick the builder: BuildKit when the engine has it (Linux engines from API 1.39), the legacy
/// builder otherwise or when `ENVBUILD_BUILDER` says so ([`forced`]); a stalled engine is
/// `ENGINE_TIMEOUT`.
pub async fn choose(engine: &Engine) -> Result<Builder, Failure> {
    if let Some(forced) = forced()? {
        return Ok(forced);
    }
    let answer = engine
        .call(
            Call::Short,
            || "reading the engine's version".into(),
            engine.docker.version(),
        )
        .await?;
    let version = match answer {
        Ok(v) => v,
        Err(e) => {
            return Ok(Builder::Legacy(format!(
                "the engine did not say its version ({})",
                short_error(&e)
            )))
        }
    };
    let os = version.os.unwrap_or_default();
    let api = version.api_version.unwrap_or_default();
    Ok(decide(&os, &api))
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
    fn builder_is_chosen_from_the_engine_api() {
        assert_eq!(decide("linux", "1.41"), Builder::BuildKit);
        assert_eq!(decide("linux", "1.39"), Builder::BuildKit);
        assert_eq!(decide("linux", "1.100"), Builder::BuildKit);
        assert!(matches!(decide("linux", "1.38"), Builder::Legacy(w) if w.contains("1.38")));
        assert!(matches!(decide("windows", "1.41"), Builder::Legacy(w) if w.contains("Windows")));
        assert!(matches!(decide("linux", ""), Builder::Legacy(_)));
    }
}
