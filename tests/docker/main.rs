//! envbuild's Docker tests: the tests that need a Docker engine (and `mmdebstrap`/`busybox-static`
//! to make base images), in a harness of their own so that a test that cannot run is reported as
//! *ignored*, with its reason, in `cargo test`'s summary instead of passing silently.
//!
//! Registration: a Docker test is a plain `fn name()` (no `#[test]`: this target is built
//! without libtest, which would drop such functions silently) listed in its file's `trials()`
//! with [`trials!`]; `#[ignore = "why"]` before a name makes it opt-in (`-- --ignored`). A
//! function that is neither called nor registered fails the build (`deny(dead_code)`), and a
//! `#[test]` attribute left in a file here fails the `registry` check below.
//!
//! Skipping: a test that finds no engine or tool calls `engine_support::skip_or_fail`, which
//! unwinds with a [`engine_support::Skip`]; the runner reports it as ignored with the reason.
//! With `CI=true` a missing engine or tool is a failure instead (CI must not skip them).
#![deny(dead_code)]

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// `trials![a, #[ignore = "why"] b]`: the harness trials of the calling module's test functions,
/// named `module::function` (the names they had as `#[test]`s in the `it` target). An opt-in
/// trial (`#[ignore = "why"]`) runs with `-- --ignored` or `--include-ignored`; otherwise it is
/// reported as ignored with `why`.
macro_rules! trials {
    ($( $(#[ignore = $why:literal])? $f:ident ),* $(,)?) => {{
        let module = module_path!().split_once("::").map_or(module_path!(), |(_, m)| m);
        vec![$({
            let name = format!("{module}::{}", stringify!($f));
            let why: Option<&'static str> = None $(.or(Some($why)))?;
            match why {
                Some(why) => crate::opt_in(&name, $f, why),
                None => crate::trial(&name, $f),
            }
        }),*]
    }};
}

/// The shared test support (tests/support), by the name the `it` target gives it too.
use envbuild_test_support as support;

// Reaching the engine (skip outside CI, fail in CI) and base images made from Debian's packages.
mod engine_support;

// Images for the lock's platform under emulation: an arm64 image, PLATFORM_MISMATCH.
mod arm64;
// Any base a user names builds or is refused with a reason.
mod bases;
// The `envbuild image` benchmark (bench/image.sh; opt-in).
mod bench;
// BuildKit through the Engine API: a build that passes, local wheels bind-mounted, the pip cache mount.
mod buildkit;
// A fleet lock's images for every platform, pushed under one multi-platform image index.
mod fleet;
// The registry build cache: `image --push` sends the install stage, an empty engine builds from it.
mod cache;
// A pip closure's image: its own pip agrees with envbuild's resolution.
mod closure;
// A conda closure's image: the explicit file behind a TLS-inspecting network, `test --lock` drift.
mod conda_closure;
// End to end against the real engine: images built and smoke-tested, no container left behind.
mod docker;
// `envbuild test --lock` and `TABLE_MISMATCH` from a real image.
mod learn;
// `envbuild image DIR --jobs 2`: several specs at once.
mod many;
// `image --push`, `--pull` and `test --show-verdict` against a real registry.
mod push;
// The registry token flow (a bearer challenge, a token server): the engine's push, envbuild's index.
mod token;
// Identity and verdicts under attack (issue 20).
mod trust;

/// A trial that runs `f`, turning a [`engine_support::Skip`] unwind into "ignored, reason".
fn trial(name: &str, f: fn()) -> Trial {
    Trial::ignorable_test(name, move || outcome(f))
}

/// Whether this run asked for the opt-in trials (`--ignored`, `--include-ignored`); set once in
/// `main` before the trials are made.
static RUN_OPT_IN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// An opt-in trial: with `--ignored`/`--include-ignored` it is an ignored-flagged trial that
/// those flags run; otherwise it ends at once as ignored *with its reason*. (A plain flagged
/// trial is reported as `ignored` with no reason at all: libtest-mimic prints none.)
fn opt_in(name: &str, f: fn(), why: &'static str) -> Trial {
    if RUN_OPT_IN.get().copied().unwrap_or(false) {
        trial(name, f).with_ignored_flag(true)
    } else {
        Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
    }
}

thread_local! {
    /// Set while the harness checks itself with panics it expects: they are not printed.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn outcome(f: fn()) -> Result<Completion, Failed> {
    match std::panic::catch_unwind(f) {
        Ok(()) => Ok(Completion::Completed),
        Err(payload) => match payload.downcast::<engine_support::Skip>() {
            // The reason's first line: the summary stays one line per test.
            Ok(skip) => Ok(Completion::ignored_with(
                skip.0.lines().next().unwrap_or(""),
            )),
            Err(payload) => Err(Failed::from(panic_message(&*payload))),
        },
    }
}

/// The harness itself: a skip is reported as ignored with its reason (what to install), and
/// with CI=true the same skip is a failure; any other panic is a failure.
fn a_skip_is_ignored_with_its_reason_and_fails_in_ci() {
    let ignored = |r: Result<Completion, Failed>| match r {
        Ok(Completion::Ignored { reason }) => reason,
        Ok(Completion::Completed) => panic!("completed"),
        Err(f) => panic!("failed: {f:?}"),
    };
    QUIET.with(|q| q.set(true));
    let reason = ignored(outcome(|| {
        engine_support::skip_or_fail_in(false, "t", "no Docker engine reachable: refused\nhint")
    }));
    assert_eq!(
        reason.as_deref(),
        Some("no Docker engine reachable: refused")
    );
    let failed = outcome(|| engine_support::skip_or_fail_in(true, "t", "no Docker engine"));
    let msg = format!("{:?}", failed.err().expect("CI=true fails"));
    assert!(
        msg.contains("CI=true") && msg.contains("no Docker engine"),
        "{msg}"
    );
    assert!(outcome(|| panic!("a real failure")).is_err());
    QUIET.with(|q| q.set(false));
    assert!(matches!(outcome(|| {}), Ok(Completion::Completed)));
    // An opt-in trial is flagged only when this run asked for opt-in trials; otherwise it is
    // an ordinary trial that ends as ignored with its reason (a flagged one would show none).
    let asked = RUN_OPT_IN.get().copied().unwrap_or(false);
    assert_eq!(opt_in("t", || {}, "why").has_ignored_flag(), asked);
    // A missing tool names the package to install.
    assert!(!engine_support::tool_found("envbuild-no-such-tool"));
    assert!(engine_support::tool_found("sh"));
    let why = engine_support::missing_tool("mmdebstrap", "mmdebstrap");
    assert!(
        why.contains("install mmdebstrap (apt-get install mmdebstrap"),
        "{why}"
    );
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into())
}

/// `#[test]` left on a function in this target's files: such a test would never run here, so
/// it fails the run by name.
fn no_test_attributes() {
    let files = [
        ("arm64.rs", include_str!("arm64.rs")),
        ("bases.rs", include_str!("bases.rs")),
        ("docker.rs", include_str!("docker.rs")),
        ("bench.rs", include_str!("bench.rs")),
        ("learn.rs", include_str!("learn.rs")),
        ("push.rs", include_str!("push.rs")),
    ];
    let stray: Vec<String> = files
        .iter()
        .flat_map(|(file, text)| {
            text.lines().enumerate().filter_map(move |(i, l)| {
                let l = l.trim();
                (l == "#[test]" || l == "#[tokio::test]")
                    .then(|| format!("tests/docker/{file}:{}", i + 1))
            })
        })
        .collect();
    assert!(
        stray.is_empty(),
        "`#[test]` in the docker target never runs: register the function in its \
         file's `trials!` list instead (see tests/docker/main.rs): {stray:?}"
    );
}

fn main() {
    // A skip unwinds quietly: the runner prints it as ignored, with its reason.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let skip = info
            .payload()
            .downcast_ref::<engine_support::Skip>()
            .is_some();
        if !skip && !QUIET.with(|q| q.get()) {
            default_hook(info);
        }
    }));
    let args = Arguments::from_args();
    let _ = RUN_OPT_IN.set(args.ignored || args.include_ignored);
    let mut all = vec![
        trial("registry::no_test_attributes", no_test_attributes),
        trial(
            "registry::a_skip_is_ignored_with_its_reason_and_fails_in_ci",
            a_skip_is_ignored_with_its_reason_and_fails_in_ci,
        ),
    ];
    all.extend(arm64::trials());
    all.extend(bases::trials());
    all.extend(docker::trials());
    all.extend(bench::trials());
    all.extend(buildkit::trials());
    all.extend(cache::trials());
    all.extend(fleet::trials());
    all.extend(learn::trials());
    all.extend(many::trials());
    all.extend(push::trials());
    all.extend(token::trials());
    all.extend(closure::trials());
    all.extend(conda_closure::trials());
    all.extend(trust::trials());
    libtest_mimic::run(&args, all).exit();
}
