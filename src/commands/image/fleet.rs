//! `envbuild image SPEC` of a fleet lock: every selected platform's image (`--platform`, else
//! all the lock holds) built and smoke-tested through `app::image_fleet`, the verdicts per
//! platform (the table, `--json`'s `platforms`, JUnit, the job summary), and with `--push`
//! the pushed images and index. Performs I/O: stdout/stderr and the JUnit file.

use super::progress::{Display, ProgressMode};
use crate::app::image_fleet::{self, FleetRun, PlatformImage};
use crate::cli::ImageArgs;
use crate::commands::verdicts::report;
use crate::commands::Output;
use crate::core::diag::Failure;
use crate::core::lock::Lock;
use crate::core::spec::Platform;
use std::path::Path;

/// Render, build and test `platforms` of the fleet `lock`, then report.
pub(super) fn run(
    o: &Output,
    table: &crate::core::compat::Table,
    (spec, lock): (&Path, &Lock),
    args: &ImageArgs,
    mirrors: &crate::core::closure::Mirrors,
    platforms: &[Platform],
) -> Result<i32, Failure> {
    let opts = super::options(args);
    // Every platform's image, though only `platforms` are built: the others' tags are where
    // their runs pushed them, which the index names.
    let mut images = image_fleet::platform_images(
        lock,
        &opts.variants,
        args.templates.as_deref(),
        spec,
        mirrors,
        &lock.platforms(),
    )?;
    let mut ca = None;
    for pi in &mut images {
        let origin = crate::app::image::add_ca_bundle(&mut pi.rendered, lock, spec, |k| {
            std::env::var(k).ok()
        })?;
        ca = ca.or(origin);
    }
    super::note_build_inputs(ca.as_deref(), &opts);
    let mut display = Display::new(ProgressMode::detect(args.verbose), "");
    match image_fleet::run(&images, platforms, &opts, &mut |e| display.event(e))? {
        Ok(result) => {
            let extra = fleet_json(lock, &images, &result);
            let smokes = result
                .platforms
                .into_iter()
                .flat_map(|(_, r)| r.smokes)
                .collect();
            let junit = args.junit.as_deref();
            report(
                o,
                "image",
                smokes,
                args.json,
                junit,
                extra,
                Some((table, lock)),
            )
        }
        Err(f) => {
            let f = super::blame_the_mirror(f, mirrors);
            let names: Vec<&str> = platforms.iter().map(|p| p.as_str()).collect();
            let name = format!(
                "{} ({}; {})",
                images
                    .first()
                    .map_or("", |pi| pi.rendered.image_name.as_str()),
                opts.variants.join(", "),
                names.join(", ")
            );
            super::report_failure(o, &name, &f, args.json, args.junit.as_deref())?;
            Err(f)
        }
    }
}

/// The `--json` fields besides the verdicts: one `platforms` entry per platform (its lock
/// hash, Docker platform, builds and pushes), every build and push also in `builds` and
/// `pushed` (each naming its platform), the fleet's `index` and what was `not_pushed`.
pub(super) fn fleet_json(
    lock: &Lock,
    images: &[PlatformImage],
    result: &FleetRun,
) -> serde_json::Map<String, serde_json::Value> {
    let mut extra = serde_json::Map::new();
    let mut builds = Vec::new();
    let mut pushed = Vec::new();
    let mut per_platform = Vec::new();
    for (platform, run) in &result.platforms {
        let Some(pi) = images.iter().find(|pi| pi.platform == *platform) else {
            continue;
        };
        let mut one = super::run_json(&pi.rendered, run);
        let name = platform.as_str();
        for key in ["builds", "pushed"] {
            let list = match one.get_mut(key).and_then(|v| v.as_array_mut()) {
                Some(l) => l,
                None => continue,
            };
            for item in list.iter_mut().filter_map(|v| v.as_object_mut()) {
                item.insert("platform".into(), name.into());
            }
            let all = if key == "builds" {
                &mut builds
            } else {
                &mut pushed
            };
            all.extend(list.iter().cloned());
        }
        one.insert("platform".into(), name.into());
        one.insert(
            "docker_platform".into(),
            pi.rendered.platform.clone().unwrap_or_default().into(),
        );
        per_platform.push(serde_json::Value::Object(one));
    }
    let lock_hash = lock.hash().unwrap_or_default();
    extra.insert("builds".into(), builds.into());
    extra.insert("lock_sha256".into(), lock_hash.into());
    if let Some(pi) = images.first() {
        extra.insert("content_sha256".into(), pi.rendered.identity().into());
    }
    if !pushed.is_empty() {
        extra.insert("pushed".into(), pushed.into());
    }
    extra.insert("platforms".into(), per_platform.into());
    if !result.indexes.is_empty() {
        extra.insert(
            "index".into(),
            serde_json::to_value(&result.indexes).unwrap_or_default(),
        );
    }
    if !result.index_waits.is_empty() {
        let waits: Vec<serde_json::Value> = result
            .index_waits
            .iter()
            .map(|(variant, reason)| serde_json::json!({"variant": variant, "reason": reason}))
            .collect();
        extra.insert("index_waits".into(), waits.into());
    }
    if !result.not_pushed.is_empty() {
        let names: Vec<&str> = result.not_pushed.iter().map(|p| p.as_str()).collect();
        extra.insert("not_pushed".into(), names.into());
    }
    extra
}
