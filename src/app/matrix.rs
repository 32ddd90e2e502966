//! `matrix` and the spec lists of `image SPEC...`: expand `SPEC...|DIR` arguments into spec
//! files, name each spec, and turn each spec's current lock into CI matrix entries. Performs
//! I/O: reads folders, specs and locks (never writes: a stale lock is refused, as `--locked`).

use crate::core::compat::Table;
use crate::core::diag::{shown, Failure};
use crate::core::matrix::Entry;
use std::path::{Path, PathBuf};

/// The spec files `args` name (`infra::fs::spec_files`), with a label for each.
pub fn specs(args: &[PathBuf]) -> Result<Vec<(String, PathBuf)>, Failure> {
    let files = crate::infra::fs::spec_files(args)?;
    let labels = labels(&files);
    Ok(labels.into_iter().zip(files).collect())
}

/// A short, unique name per spec: its folder's name for `DIR/envbuild.toml` (the layout of
/// `specs/*/envbuild.toml`), else the file's stem; the shown path where two would collide.
pub fn labels(specs: &[PathBuf]) -> Vec<String> {
    let short = |p: &Path| -> String {
        let file = p.file_name().map(|f| f.to_string_lossy().to_string());
        let parent = p
            .parent()
            .and_then(Path::file_name)
            .map(|f| f.to_string_lossy().to_string());
        match (file, parent) {
            (Some(f), Some(d)) if f.starts_with("envbuild.") => d,
            _ => p
                .file_stem()
                .map_or_else(|| shown(p), |s| s.to_string_lossy().to_string()),
        }
    };
    let first: Vec<String> = specs.iter().map(|p| short(p)).collect();
    first
        .iter()
        .zip(specs)
        .map(|(l, p)| {
            if first.iter().filter(|o| *o == l).count() > 1 {
                shown(p)
            } else {
                crate::core::diag::printable(l)
            }
        })
        .collect()
}

/// The matrix of `specs` (one entry per spec × variant × platform, in argument order, then the
/// lock's variant order), `variants` empty for every variant each lock declares, `repo` the
/// `REGISTRY/REPO` the images are pushed to, if any, `templates` the `--templates` the images
/// are built with (they are part of the tags). Every spec's lock must be current: the problems
/// of all specs come back together.
pub fn matrix(
    table: &Table,
    specs: &[(String, PathBuf)],
    (variants, templates): (&[&str], Option<&Path>),
    repo: Option<&str>,
) -> Result<Vec<Entry>, Failure> {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (label, spec) in specs {
        let checked = super::image::check_lock(table, spec, false)?;
        let Some(lock) = checked.lock else {
            problems.extend(checked.diagnostics.into_iter().filter(|d| d.is_error()));
            continue;
        };
        // The tags are the content hash of the render `image` builds from.
        let identity = super::image::content_identity(&lock, templates, spec)?;
        let name = super::image::image_name(&lock.name);
        entries.extend(crate::core::matrix::entries(
            label,
            &shown(spec),
            &lock,
            &identity,
            &name,
            variants,
            &crate::core::matrix::platforms(&lock),
            repo,
        ));
    }
    if problems.is_empty() {
        Ok(entries)
    } else {
        Err(Failure::new(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The identity the matrix tags with is the one `image` builds and pushes under, for a
    /// single-platform lock and for a fleet (whose platform images share the whole render's).
    #[test]
    fn the_matrix_identity_is_the_image_identity() {
        for dir in ["specs/torch29-cu128", "specs/fleet-h100-gh200"] {
            let spec = PathBuf::from(dir).join("envbuild.toml");
            let text = std::fs::read_to_string(PathBuf::from(dir).join("envbuild.lock")).unwrap();
            let lock = crate::core::lock::Lock::from_toml(&text).unwrap();
            let id = super::super::image::content_identity(&lock, None, &spec).unwrap();
            let none = crate::core::closure::Mirrors::default();
            let rendered =
                super::super::image::rendered_image(&lock, &[], None, &spec, &none).unwrap();
            assert_eq!(id, rendered.identity(), "{dir}");
            let platforms = lock.platforms();
            // What `image` builds (its primary tag) and `image --push` pushes, per platform.
            let tags: Vec<String> = if lock.fleet.is_empty() {
                vec![rendered.build_id().tag("runtime")]
            } else {
                super::super::image_fleet::platform_images(
                    &lock,
                    &[],
                    None,
                    &spec,
                    &none,
                    &platforms,
                )
                .unwrap()
                .iter()
                .map(|pi| pi.rendered.build_id().tag("runtime"))
                .collect()
            };
            let entries = crate::core::matrix::entries(
                "x",
                "s",
                &lock,
                &id,
                &rendered.image_name,
                &["runtime"],
                &platforms,
                Some("r.example/envs"),
            );
            assert_eq!(entries.len(), tags.len(), "{dir}");
            for (e, tag) in entries.iter().zip(&tags) {
                assert_eq!(e.image, format!("{}:{tag}", rendered.image_name), "{dir}");
                assert_eq!(e.pushed, Some(format!("r.example/envs:{tag}")), "{dir}");
            }
        }
    }

    #[test]
    fn labels_are_folder_names_unless_they_collide() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            labels(&[p("specs/a/envbuild.toml"), p("other/b.toml")]),
            ["a", "b"]
        );
        assert_eq!(
            labels(&[p("x/a/envbuild.toml"), p("y/a/envbuild.toml")]),
            ["x/a/envbuild.toml", "y/a/envbuild.toml"]
        );
    }
}
