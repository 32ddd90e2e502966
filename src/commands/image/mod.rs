//! `envbuild image SPEC... | DIR`: the flags turned into `app::image`'s options, then one spec
//! to [`one`] and several specs (or a folder) to [`many`]; both report a spec's run in the same
//! `--json` fields, and show progress through [`progress`]. Performs I/O through its children:
//! stdout/stderr and the JUnit file.

mod fleet;
mod many;
mod one;
mod progress;

use crate::app::image::{ImageOptions, ImageRun, RenderedImage};
use crate::app::test::SmokeSettings;
use crate::cli::{GpusArg, ImageArgs, PullArg, VariantArg};
use crate::core::diag::Failure;
use crate::infra::docker::build::PullPolicy;
use std::time::Duration;

/// The use case's options the CLI flags ask for.
fn options(args: &ImageArgs) -> ImageOptions {
    ImageOptions {
        variants: variants(args.variant),
        tags: args.tags.clone(),
        rebuild: args.rebuild,
        retest: args.retest,
        smoke: SmokeSettings {
            gpus: args.gpus == GpusArg::All,
            timeout: Duration::from_secs(args.timeout),
            shm_bytes: args.shm_size,
            run_id: crate::infra::docker::new_run_id(),
        },
        cache_dir: crate::infra::verdict_cache::default_dir(),
        pull: match args.pull {
            PullArg::Missing => PullPolicy::Missing,
            PullArg::Always => PullPolicy::Always,
            PullArg::Never => PullPolicy::Never,
        },
        push: args.push.clone(),
        cache_from: args.cache_from.clone(),
        build_args: crate::infra::network::proxy_build_args(),
    }
}

fn variants(v: VariantArg) -> Vec<String> {
    match v {
        VariantArg::Runtime => vec!["runtime".into()],
        VariantArg::Dev => vec!["dev".into()],
        VariantArg::All => vec!["runtime".into(), "dev".into()],
    }
}

/// `envbuild image SPEC`: lock check (or `--update-lock`), render, build, smoke test, report.
/// Several specs, or a folder, go to [`many`].
pub fn run(
    o: &crate::commands::Output,
    table: &crate::core::compat::Table,
    args: ImageArgs,
) -> Result<i32, Failure> {
    let mirrors =
        crate::cli::parse::mirrors(args.pip_mirror.as_deref(), args.conda_mirror.as_deref())?;
    // The builds get the proxies as build args and the registry calls use them: check first.
    crate::infra::network::check_proxies_env()?;
    match args.specs.as_slice() {
        [spec] if !spec.is_dir() => one::run(o, table, spec, &args, &mirrors),
        _ => many::run(o, table, args, &mirrors),
    }
}

/// Say what of this machine the build uses but no image keeps: the CA bundle (`ca`, its origin)
/// and the build args taken from the environment.
fn note_build_inputs(ca: Option<&str>, opts: &ImageOptions) {
    if let Some(origin) = ca {
        eprintln!("note: the build trusts the CA bundle of {origin}; no image keeps it");
    }
    if !opts.build_args.is_empty() {
        let names: Vec<&str> = opts.build_args.keys().map(String::as_str).collect();
        eprintln!(
            "note: the build uses this machine's {} (not stored in the image)",
            names.join(", ")
        );
    }
}

/// A build through `--pip-mirror` that pip's hash check stopped, or through `--conda-mirror`
/// that conda's stopped: the mirror's fault, said first (`MIRROR_HASH_MISMATCH`, naming each
/// package), the installer's own words after it.
fn blame_the_mirror(mut f: Failure, mirrors: &crate::core::closure::Mirrors) -> Failure {
    use crate::core::closure::{conda_mirror_mismatch, mirror_mismatch};
    let said = f.diagnostics.iter().find_map(|d| {
        let pip = mirrors
            .pip
            .as_deref()
            .and_then(|m| mirror_mismatch(&d.message, m));
        pip.or_else(|| {
            mirrors
                .conda
                .as_deref()
                .and_then(|m| conda_mirror_mismatch(&d.message, m))
        })
    });
    if let Some(d) = said {
        f.diagnostics.insert(0, d);
    }
    f
}

/// The `--json` fields of one spec's run besides its smoke verdicts: builds, lock hash, what
/// was pushed (the install stage's registry cache too), and `skipped: registry`.
fn run_json(
    rendered: &RenderedImage,
    result: &ImageRun,
) -> serde_json::Map<String, serde_json::Value> {
    let mut extra = serde_json::Map::new();
    extra.insert(
        "builds".into(),
        result
            .builds
            .iter()
            .map(|(variant, b)| {
                let mut build = serde_json::json!({
                    "variant": variant,
                    "image_id": b.image_id,
                    "tags": b.tags,
                    "skipped": b.skipped,
                    "steps": b.steps,
                    "cached_steps": b.cached_steps,
                    "context_bytes": b.context_bytes,
                    "context_sha256": b.context_sha256,
                    "build_s": b.elapsed.as_secs_f64(),
                });
                if let Some(id) = &b.not_built_here {
                    // The image found at the tag, built over: envbuild had no record of it.
                    build["not_built_here"] = id.clone().into();
                }
                build
            })
            .collect::<Vec<_>>()
            .into(),
    );
    extra.insert("lock_sha256".into(), rendered.lock_hash.clone().into());
    extra.insert("content_sha256".into(), rendered.identity().into());
    if !result.published.is_empty() {
        extra.insert(
            "pushed".into(),
            serde_json::to_value(&result.published).unwrap_or_default(),
        );
    }
    if let Some(cache) = &result.install_cache {
        extra.insert(
            "install_cache".into(),
            serde_json::to_value(cache).unwrap_or_default(),
        );
    }
    if result.from_registry {
        // Nothing was built or tested: the registry's verdict for this digest stands.
        extra.insert("skipped".into(), "registry".into());
    }
    extra
}

/// `--json`/`--junit` output for a run that ended before any verdict (e.g. a failed build).
fn report_failure(
    o: &crate::commands::Output,
    name: &str,
    f: &Failure,
    json: bool,
    junit: Option<&std::path::Path>,
) -> Result<(), Failure> {
    if let Some(path) = junit {
        o.write_junit(path, &[crate::commands::verdicts::error_suite(name, f)])?;
    }
    if json {
        o.print_json(&serde_json::json!({
            "verdict": "error",
            "error": f.diagnostics,
        }))?;
    }
    Ok(())
}
