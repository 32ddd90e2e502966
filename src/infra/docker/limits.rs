//! Time limits for engine calls, so that an engine that answers the ping and then stalls ends
//! the run with `ENGINE_TIMEOUT` naming the call instead of hanging. Short calls (inspect, list,
//! remove, logs) get seconds, container calls (create, start, copy) a few times that, and a
//! build an idle limit (no event for that long), never a total one; the smoke run keeps its own
//! `--timeout`. `ENVBUILD_ENGINE_TIMEOUT=SECONDS` sets the short limit and scales the others.
//! Reads the environment once per connection; performs no other I/O.

use super::codes;
use crate::core::diag::{Diagnostic, Failure};
use std::future::Future;
use std::time::Duration;

/// The variable that sets the short limit (and scales the others).
pub const ENV: &str = "ENVBUILD_ENGINE_TIMEOUT";
/// The short limit when [`ENV`] is unset.
const DEFAULT_SHORT: Duration = Duration::from_secs(30);
/// Container calls may wait on storage (a large image's snapshot) or the GPU runtime's hook.
const CONTAINER_FACTOR: u32 = 4;
/// A build step can be silent for long: a conda solve, a large wheel's download, committing a
/// multi-GB layer.
const BUILD_IDLE_FACTOR: u32 = 60;

/// The kind of an engine call, which decides its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Ping, version, info, inspect, list, remove, logs and reading a file back.
    Short,
    /// Creating, starting and copying into a container.
    Container,
    /// The longest a build, pull, push or import may go without sending an event.
    BuildIdle,
}

/// The limits of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub short: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            short: DEFAULT_SHORT,
        }
    }
}

impl Limits {
    /// From [`ENV`]: seconds, 0.1 to 86400, with at most three decimals (fractions are for
    /// tests). Anything else is refused, so a typo does not silently fall back to the default.
    pub fn from_env() -> Result<Limits, Failure> {
        match std::env::var(ENV) {
            Err(_) => Ok(Limits::default()),
            Ok(v) if v.trim().is_empty() => Ok(Limits::default()),
            Ok(v) => Limits::parse(&v),
        }
    }

    fn parse(v: &str) -> Result<Limits, Failure> {
        match millis(v.trim()) {
            Some(ms) if (100..=86_400_000).contains(&ms) => Ok(Limits {
                short: Duration::from_millis(ms),
            }),
            _ => Err(Failure::usage(
                format!(
                    "{ENV}={} is not a number of seconds from 0.1 to 86400",
                    crate::core::diag::printable(v)
                ),
                Some(format!(
                    "for example {ENV}=120 for a slow engine; unset it for the default ({}s)",
                    DEFAULT_SHORT.as_secs()
                )),
            )),
        }
    }

    /// The limit for the ping: the short one, but at least a second (a ping that slow means
    /// the engine is unreachable, not stalled).
    pub fn ping(&self) -> Duration {
        self.short.max(Duration::from_secs(1))
    }

    /// The limit for one kind of call.
    pub fn of(&self, call: Call) -> Duration {
        match call {
            Call::Short => self.short,
            Call::Container => self.short * CONTAINER_FACTOR,
            Call::BuildIdle => self.short * BUILD_IDLE_FACTOR,
        }
    }

    /// Run `fut` under the limit for `call`; past it, `ENGINE_TIMEOUT` naming `doing` (a phrase
    /// such as "inspecting image `x`").
    pub async fn run<T>(
        &self,
        call: Call,
        host: &str,
        doing: impl FnOnce() -> String,
        fut: impl Future<Output = T>,
    ) -> Result<T, Failure> {
        let limit = self.of(call);
        tokio::time::timeout(limit, fut)
            .await
            .map_err(|_| timed_out(host, &doing(), call, limit))
    }
}

/// `12`, `0.5`, `1.25` seconds as milliseconds; `None` for anything else (signs, exponents,
/// more than three decimals).
fn millis(v: &str) -> Option<u64> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 6 || frac.len() > 3 || !digits(whole) || !digits(frac) {
        return None;
    }
    let frac_ms: u64 = format!("{frac:0<3}").parse().ok()?;
    Some(whole.parse::<u64>().ok()? * 1000 + frac_ms)
}

/// A limit as people write it: `30s`, `0.5s`.
pub fn secs(d: Duration) -> String {
    match d.subsec_millis() {
        0 => format!("{}s", d.as_secs()),
        ms => format!(
            "{}.{}s",
            d.as_secs(),
            format!("{ms:03}").trim_end_matches('0')
        ),
    }
}

/// `ENGINE_TIMEOUT`: the engine at `host` did not answer within `limit` while `doing`.
pub fn timed_out(host: &str, doing: &str, call: Call, limit: Duration) -> Failure {
    let what = match call {
        Call::BuildIdle => format!("sent nothing for {}", secs(limit)),
        _ => format!("did not answer within {}", secs(limit)),
    };
    Failure::one(
        Diagnostic::error(
            codes::ENGINE_TIMEOUT,
            format!("the Docker engine at `{host}` {what} while {doing}"),
        )
        .with_hint(format!(
            "the engine is stalled or overloaded: check it (`docker info`, its log) or restart \
             it; for an engine that is just slow, raise {ENV} (now {}; container calls \
             get {CONTAINER_FACTOR}x, a silent build step {BUILD_IDLE_FACTOR}x)",
            self_short(limit, call)
        )),
    )
}

/// The short limit a `limit` for `call` was derived from, for the hint.
fn self_short(limit: Duration, call: Call) -> String {
    secs(match call {
        Call::Short => limit,
        Call::Container => limit / CONTAINER_FACTOR,
        Call::BuildIdle => limit / BUILD_IDLE_FACTOR,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_scale_from_the_short_one() {
        let l = Limits::parse("2").unwrap();
        assert_eq!(l.of(Call::Short), Duration::from_secs(2));
        assert_eq!(l.of(Call::Container), Duration::from_secs(8));
        assert_eq!(l.of(Call::BuildIdle), Duration::from_secs(120));
        let d = Limits::default();
        assert_eq!(d.of(Call::Short), Duration::from_secs(30));
        assert_eq!(d.of(Call::BuildIdle), Duration::from_secs(1800));
    }

    #[test]
    fn a_bad_value_is_refused_not_ignored() {
        for bad in [
            "0", "-1", "0.05", "1.2345", "ten", "86401", "1e3", ".5", "inf", "+3",
        ] {
            let f = Limits::parse(bad).unwrap_err();
            assert_eq!(f.diagnostics[0].code, "USAGE", "{bad}");
            assert!(f.diagnostics[0].message.contains(ENV), "{bad}");
        }
        assert_eq!(Limits::parse(" 7 ").unwrap().short, Duration::from_secs(7));
        assert_eq!(
            Limits::parse("0.25").unwrap().short,
            Duration::from_millis(250)
        );
        assert_eq!(
            Limits::parse("2.5").unwrap().ping(),
            Duration::from_millis(2500)
        );
        assert_eq!(Limits::parse("0.1").unwrap().ping(), Duration::from_secs(1));
        assert_eq!(secs(Duration::from_millis(6000)), "6s");
        assert_eq!(secs(Duration::from_millis(400)), "0.4s");
        assert_eq!(secs(Duration::from_millis(1250)), "1.25s");
    }

    #[test]
    fn the_message_names_the_call_and_the_hint_the_variable() {
        let f = timed_out(
            "tcp://h:1",
            "inspecting image `x`",
            Call::Container,
            Duration::from_secs(120),
        );
        let d = &f.diagnostics[0];
        assert_eq!(d.code, codes::ENGINE_TIMEOUT);
        assert!(d.message.contains("within 120s while inspecting image `x`"));
        assert!(d.hint.as_deref().unwrap().contains("now 30s"));
    }
}
