//! The deterministic build context: an in-memory tar of only the files the Dockerfile's
//! `COPY`/`ADD` instructions name, with sorted entries, mtime 0, owner 0:0 and fixed modes, so
//! the same rendered files always send the same bytes to the engine (and the engine's layer
//! cache, which hashes what it receives, hits). Also the small Dockerfile parser this needs.
//! This module performs no I/O.

use super::codes;
use crate::core::diag::{Diagnostic, Failure};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The tar to send, and what is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildContext {
    pub tar: Vec<u8>,
    /// File paths in the tar, sorted (directories not listed).
    pub files: Vec<String>,
    /// sha256 of `tar`, lower-case hex.
    pub sha256: String,
}

/// What envbuild needs to know about a Dockerfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerfileInfo {
    /// Images named by `FROM` that are not an earlier stage, `scratch` or an `ARG` expansion.
    pub base_images: Vec<String>,
    /// Stage names (`FROM x AS name`), lower-cased as the engine treats them.
    pub stages: Vec<String>,
    /// Context paths named by `COPY`/`ADD` (without `--from`), as written.
    pub copy_sources: Vec<String>,
    /// Number of instructions (the classic builder's "Step N/M" counts these).
    pub instructions: usize,
}

/// Logical Dockerfile lines: continuations joined, comments and blank lines dropped.
fn logical_lines(dockerfile: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in dockerfile.lines() {
        let trimmed = raw.trim();
        // Comment lines are dropped even inside a continuation, as the engine does.
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
        } else {
            current.push_str(trimmed);
            let line = std::mem::take(&mut current);
            if !line.trim().is_empty() {
                out.push(line.trim().to_string());
            }
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// Parse what the context and the base-image check need.
pub fn parse_dockerfile(dockerfile: &str) -> DockerfileInfo {
    let mut info = DockerfileInfo::default();
    for line in logical_lines(dockerfile) {
        let (instr, rest) = match line.split_once(char::is_whitespace) {
            Some((i, r)) => (i.to_ascii_uppercase(), r.trim()),
            None => (line.to_ascii_uppercase(), ""),
        };
        info.instructions += 1;
        match instr.as_str() {
            "FROM" => {
                let words: Vec<&str> = rest
                    .split_whitespace()
                    .filter(|w| !w.starts_with("--"))
                    .collect();
                if let Some(image) = words.first() {
                    let lower = image.to_ascii_lowercase();
                    if lower != "scratch"
                        && !image.contains('$')
                        && !info.stages.contains(&lower)
                        && !info.base_images.iter().any(|b| b == image)
                    {
                        info.base_images.push(image.to_string());
                    }
                }
                if words.len() >= 3 && words[1].eq_ignore_ascii_case("as") {
                    info.stages.push(words[2].to_ascii_lowercase());
                }
            }
            // BuildKit's `RUN --mount=type=bind,source=X` reads X from the context (unless
            // `from=` names a stage or image), so the context must carry it like a COPY source.
            "RUN" => info.copy_sources.extend(run_bind_sources(rest)),
            "COPY" | "ADD" => {
                let mut args: Vec<String> = Vec::new();
                let mut from_stage = false;
                let mut rest = rest;
                // Flags come first: `--chown=..`, `--chmod=..`, `--from=..`, `--link`.
                while rest.starts_with("--") {
                    let (flag, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    if flag.starts_with("--from") {
                        from_stage = true;
                    }
                    rest = tail.trim_start();
                }
                if rest.starts_with('[') {
                    if let Ok(list) = serde_json::from_str::<Vec<String>>(rest) {
                        args = list;
                    }
                } else {
                    args = rest.split_whitespace().map(str::to_string).collect();
                }
                if from_stage || args.len() < 2 {
                    continue;
                }
                args.pop(); // the destination
                for src in args {
                    let is_remote = src.contains("://") || src.starts_with("git@");
                    if src.starts_with("<<") || (instr == "ADD" && is_remote) {
                        continue;
                    }
                    info.copy_sources.push(src);
                }
            }
            _ => {}
        }
    }
    info
}

/// The context paths of a `RUN`'s `--mount=type=bind` flags without `from=` (the whole
/// context, `.`, when `source` is absent).
fn run_bind_sources(mut rest: &str) -> Vec<String> {
    let mut sources = Vec::new();
    while let Some(flag) = rest.strip_prefix("--") {
        let (flag, tail) = flag.split_once(char::is_whitespace).unwrap_or((flag, ""));
        rest = tail.trim_start();
        let Some(opts) = flag.strip_prefix("mount=") else {
            continue;
        };
        let kv: BTreeMap<&str, &str> = opts
            .split(',')
            .map(|o| o.split_once('=').unwrap_or((o, "")))
            .collect();
        if kv.get("type") == Some(&"bind") && !kv.contains_key("from") {
            let src = kv.get("source").or(kv.get("src")).copied().unwrap_or(".");
            sources.push(src.to_string());
        }
    }
    sources
}

/// Quote a label value for a Dockerfile `LABEL`: double quotes, with `\`, `"` and `$` escaped
/// (an unescaped `$` would be expanded by the builder) and newlines flattened.
fn quote_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '\\' | '"' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The Dockerfile with one `LABEL` instruction holding every label, added at the end of the
/// `target` stage (the last stage when `target` is empty or not found).
///
/// Why not the API's `labels` option: the classic builder turns it into one `LABEL` step (one
/// container commit, about a second each here) per label, all redone for every new lock.
/// Keys are envbuild's own constants; values are quoted.
pub fn label_target_stage(
    dockerfile: &str,
    target: &str,
    labels: &BTreeMap<String, String>,
) -> String {
    if labels.is_empty() {
        return dockerfile.to_string();
    }
    let label_line = {
        let pairs: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{}={}", k, quote_label(v)))
            .collect();
        format!("LABEL {}\n", pairs.join(" \\\n      "))
    };
    let lines: Vec<&str> = dockerfile.split_inclusive('\n').collect();
    // Physical line index of each stage's FROM, with the stage's name.
    let mut stages: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let starts_instruction = !continued && !t.starts_with('#');
        if starts_instruction {
            let words: Vec<&str> = t
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            if words
                .first()
                .is_some_and(|w| w.eq_ignore_ascii_case("FROM"))
            {
                let name = if words.len() >= 4 && words[2].eq_ignore_ascii_case("as") {
                    words[3].to_ascii_lowercase()
                } else {
                    String::new()
                };
                stages.push((i, name));
            }
        }
        if !t.starts_with('#') {
            continued = t.ends_with('\\');
        }
    }
    let target = target.to_ascii_lowercase();
    let insert_at = stages
        .iter()
        .position(|(_, name)| !target.is_empty() && *name == target)
        .and_then(|k| stages.get(k + 1))
        .map(|(line, _)| *line);
    let mut out = String::with_capacity(dockerfile.len() + label_line.len() + 1);
    match insert_at {
        Some(at) => {
            for line in &lines[..at] {
                out.push_str(line);
            }
            out.push_str(&label_line);
            for line in &lines[at..] {
                out.push_str(line);
            }
        }
        None => {
            out.push_str(dockerfile);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&label_line);
        }
    }
    out
}

/// `*` and `?` as the engine's filepath.Match treats them (no crossing of `/`).
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], name)
                || (!name.is_empty() && name[0] != b'/' && glob_match(pattern, &name[1..]))
        }
        (Some(b'?'), Some(c)) if *c != b'/' => glob_match(&pattern[1..], &name[1..]),
        (Some(p), Some(c)) if p == c => glob_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

fn invalid(message: String) -> Failure {
    Failure::one(
        Diagnostic::error(codes::CONTEXT_INVALID, message).with_hint(
            "the Dockerfile (from the templates) may only COPY/ADD files rendered beside it, \
             by relative paths without `..`",
        ),
    )
}

/// Normalise a COPY source to a context-relative path, refusing escapes from the context.
fn normalise_source(src: &str) -> Result<String, Failure> {
    if src.starts_with('/') || src.starts_with('\\') {
        return Err(invalid(format!(
            "COPY/ADD source `{src}` is an absolute path; the build context holds only the \
             rendered files"
        )));
    }
    let mut parts = Vec::new();
    for part in src.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(invalid(format!(
                    "COPY/ADD source `{src}` leaves the build context (`..`)"
                )))
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Which of `files` a normalised source selects: the file itself, everything under a
/// directory, glob matches of either, or everything for `.`.
fn select<'a>(source: &str, files: &'a BTreeMap<String, Vec<u8>>) -> Vec<&'a String> {
    files
        .keys()
        .filter(|path| {
            if source.is_empty() {
                return true;
            }
            // The path itself or any of its ancestor directories may match.
            let mut prefix_ends: Vec<usize> = path.match_indices('/').map(|(i, _)| i).collect();
            prefix_ends.push(path.len());
            prefix_ends
                .into_iter()
                .any(|end| glob_match(source.as_bytes(), &path.as_bytes()[..end]))
        })
        .collect()
}

fn file_mode(content: &[u8]) -> u32 {
    // Scripts keep their executable bit; the engine copies modes as they are in the tar.
    if content.starts_with(b"#!") {
        0o755
    } else {
        0o644
    }
}

fn header(size: u64, mode: u32, kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    // Names are cleared so the owner is the same whatever user the build ran as.
    let _ = h.set_username("");
    let _ = h.set_groupname("");
    h
}

/// A file to put in a tar: its mode and its bytes.
pub(super) type TarFile<'a> = (u32, &'a [u8]);

/// A tar of `files` (path -> (mode, bytes)) and of every directory above them, in path order,
/// with fixed metadata: the same files always give the same bytes. The directories are listed
/// so that the engine creates them with a known mode. `what` names the tar in errors.
pub(super) fn deterministic_tar(
    files: &BTreeMap<&str, TarFile<'_>>,
    what: &str,
) -> Result<Vec<u8>, Failure> {
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for path in files.keys() {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            dirs.insert(format!("{}/", &path[..end + i]));
            end += i + 1;
        }
    }
    // One sorted list of (path, content; `None` for a directory) so the entry order is fixed.
    let mut entries: Vec<(&str, Option<TarFile<'_>>)> =
        dirs.iter().map(|d| (d.as_str(), None)).collect();
    entries.extend(files.iter().map(|(path, file)| (*path, Some(*file))));
    entries.sort_by(|a, b| a.0.cmp(b.0));

    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, content) in entries {
        let result = match content {
            None => {
                let mut h = header(0, 0o755, tar::EntryType::Directory);
                builder.append_data(&mut h, path, std::io::empty())
            }
            Some((mode, bytes)) => {
                let mut h = header(bytes.len() as u64, mode, tar::EntryType::Regular);
                builder.append_data(&mut h, path, bytes)
            }
        };
        result.map_err(|e| Failure::bug(format!("cannot add `{path}` to {what}: {e}")))?;
    }
    builder
        .into_inner()
        .map_err(|e| Failure::bug(format!("cannot finish {what}: {e}")))
}

/// Build the context for `dockerfile` (a key of `files`): the Dockerfile plus the files its
/// `COPY`/`ADD` instructions select, nothing else.
pub fn build_context(
    files: &BTreeMap<String, Vec<u8>>,
    dockerfile: &str,
) -> Result<BuildContext, Failure> {
    let df_bytes = files.get(dockerfile).ok_or_else(|| {
        Failure::bug(format!(
            "the rendered files have no `{dockerfile}` to build from"
        ))
    })?;
    let df_text = std::str::from_utf8(df_bytes)
        .map_err(|_| invalid(format!("`{dockerfile}` is not UTF-8 text")))?;
    let info = parse_dockerfile(df_text);

    let mut selected: BTreeSet<&String> = BTreeSet::new();
    selected.insert(
        files
            .keys()
            .find(|k| k.as_str() == dockerfile)
            .ok_or_else(|| {
                Failure::bug(format!("`{dockerfile}` vanished from the rendered files"))
            })?,
    );
    for src in &info.copy_sources {
        let norm = normalise_source(src)?;
        let hits = select(&norm, files);
        if hits.is_empty() {
            return Err(invalid(format!(
                "COPY/ADD source `{src}` in `{dockerfile}` is not among the rendered files ({})",
                files.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        selected.extend(hits);
    }
    for path in &selected {
        // Keys come from the renderer; refuse anything that would escape the context anyway.
        normalise_source(path)?;
    }

    let entries: BTreeMap<&str, TarFile<'_>> = selected
        .iter()
        .filter_map(|path| {
            let bytes = files.get(*path)?;
            Some((path.as_str(), (file_mode(bytes), bytes.as_slice())))
        })
        .collect();
    let tar = deterministic_tar(&entries, "the build context")?;
    let sha256 = crate::core::hash::hex(&Sha256::digest(&tar));
    Ok(BuildContext {
        tar,
        files: selected.into_iter().cloned().collect(),
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    const DF: &str = "# generated\nFROM base:1 AS runtime\nCOPY environment.yml /tmp/\n\
        COPY --chown=0:0 envbuild/ /opt/envbuild/\nRUN echo hi \\\n  && true\n\
        FROM runtime AS dev\nCOPY --from=runtime /x /y\nADD [\"requirements.txt\", \"/r/\"]\n";

    fn rendered() -> BTreeMap<String, Vec<u8>> {
        files(&[
            ("Dockerfile", DF),
            ("environment.yml", "name: x\n"),
            ("requirements.txt", "torch==2.5.1\n"),
            (
                "envbuild/envbuild_smoke.py",
                "#!/usr/bin/env python3\nprint(1)\n",
            ),
            ("envbuild/expect.json", "{}"),
            ("run/docker-run.sh", "docker run ...\n"),
            (".dockerignore", "*\n"),
        ])
    }

    fn listing(tar: &[u8]) -> Vec<(String, u32, u64, u64)> {
        let mut a = tar::Archive::new(tar);
        a.entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    h.mode().unwrap(),
                    h.mtime().unwrap(),
                    h.uid().unwrap() + h.gid().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn parses_bases_stages_and_sources() {
        let info = parse_dockerfile(DF);
        assert_eq!(info.base_images, vec!["base:1"]);
        assert_eq!(info.stages, vec!["runtime", "dev"]);
        assert_eq!(
            info.copy_sources,
            vec!["environment.yml", "envbuild/", "requirements.txt"]
        );
        assert_eq!(info.instructions, 7);
    }

    #[test]
    fn run_bind_mounts_from_the_context_are_sources() {
        let info = parse_dockerfile(
            "FROM a:1 AS s\nRUN --mount=type=cache,target=/root/.cache/pip \\\n    \
             --mount=type=bind,source=wheels,target=/w pip install /w/*.whl\n\
             RUN --mount=type=bind,from=s,source=/x,target=/y true\n\
             RUN --mount=type=bind,target=/all true\nRUN echo --mount=type=bind,source=no\n",
        );
        assert_eq!(info.copy_sources, vec!["wheels", "."]);
    }

    #[test]
    fn from_ignores_scratch_args_and_flags() {
        let info = parse_dockerfile(
            "ARG B=x\nFROM --platform=linux/amd64 $B\nFROM scratch AS s\nFROM s\nFROM a:1\n",
        );
        assert_eq!(info.base_images, vec!["a:1"]);
    }

    #[test]
    fn context_holds_only_needed_files_with_fixed_metadata() {
        let ctx = build_context(&rendered(), "Dockerfile").unwrap();
        assert_eq!(
            ctx.files,
            vec![
                "Dockerfile",
                "envbuild/envbuild_smoke.py",
                "envbuild/expect.json",
                "environment.yml",
                "requirements.txt"
            ]
        );
        let list = listing(&ctx.tar);
        assert_eq!(
            list,
            vec![
                ("Dockerfile".into(), 0o644, 0, 0),
                ("envbuild/".into(), 0o755, 0, 0),
                ("envbuild/envbuild_smoke.py".into(), 0o755, 0, 0),
                ("envbuild/expect.json".into(), 0o644, 0, 0),
                ("environment.yml".into(), 0o644, 0, 0),
                ("requirements.txt".into(), 0o644, 0, 0),
            ]
        );
    }

    #[test]
    fn same_input_same_bytes_and_changes_change_the_hash() {
        let a = build_context(&rendered(), "Dockerfile").unwrap();
        let b = build_context(&rendered(), "Dockerfile").unwrap();
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(a.tar, b.tar);
        // A file the Dockerfile does not need changes nothing...
        let mut other = rendered();
        other.insert("run/docker-run.sh".into(), b"changed".to_vec());
        assert_eq!(
            build_context(&other, "Dockerfile").unwrap().sha256,
            a.sha256
        );
        // ...a needed one changes the bytes.
        other.insert("environment.yml".into(), b"name: y\n".to_vec());
        assert_ne!(
            build_context(&other, "Dockerfile").unwrap().sha256,
            a.sha256
        );
    }

    #[test]
    fn globs_and_dot_select_files() {
        let mut f = rendered();
        f.insert(
            "Dockerfile".into(),
            b"FROM a\nCOPY env*.yml e?vbuild /x/\n".to_vec(),
        );
        let ctx = build_context(&f, "Dockerfile").unwrap();
        assert_eq!(
            ctx.files,
            vec![
                "Dockerfile",
                "envbuild/envbuild_smoke.py",
                "envbuild/expect.json",
                "environment.yml"
            ]
        );
        f.insert("Dockerfile".into(), b"FROM a\nCOPY . /x/\n".to_vec());
        assert_eq!(build_context(&f, "Dockerfile").unwrap().files.len(), 7);
    }

    #[test]
    fn refuses_escapes_and_missing_sources() {
        for bad in [
            "COPY ../secret /x",
            "COPY /etc/passwd /x",
            "COPY a/../../b /x",
        ] {
            let mut f = rendered();
            f.insert("Dockerfile".into(), format!("FROM a\n{bad}\n").into_bytes());
            let err = build_context(&f, "Dockerfile").unwrap_err();
            assert_eq!(err.diagnostics[0].code, codes::CONTEXT_INVALID, "{bad}");
        }
        let mut f = rendered();
        f.insert(
            "Dockerfile".into(),
            b"FROM a\nCOPY nothere.txt /x\n".to_vec(),
        );
        let err = build_context(&f, "Dockerfile").unwrap_err();
        assert!(err.diagnostics[0].message.contains("nothere.txt"));
    }

    #[test]
    fn labels_go_to_the_end_of_the_target_stage_in_one_instruction() {
        let mut labels = BTreeMap::new();
        labels.insert("a.b".to_string(), "x \"q\" $HOME \\".to_string());
        labels.insert("c".to_string(), "two\nlines".to_string());
        let df = "FROM base AS runtime\nRUN a \\\n  FROM not-a-stage\nFROM runtime AS dev\nRUN b\n";
        let out = label_target_stage(df, "runtime", &labels);
        assert_eq!(
            out,
            "FROM base AS runtime\nRUN a \\\n  FROM not-a-stage\n\
             LABEL a.b=\"x \\\"q\\\" \\$HOME \\\\\" \\\n      c=\"two lines\"\n\
             FROM runtime AS dev\nRUN b\n"
        );
        let dev = label_target_stage(df, "dev", &labels);
        assert!(
            dev.starts_with(df) && dev.ends_with("c=\"two lines\"\n"),
            "{dev}"
        );
        let info = parse_dockerfile(&out);
        assert_eq!(info.instructions, parse_dockerfile(df).instructions + 1);
    }

    #[test]
    fn missing_dockerfile_is_a_bug_not_a_panic() {
        let err = build_context(&BTreeMap::new(), "Dockerfile").unwrap_err();
        assert_eq!(err.exit_code, crate::core::diag::exit::USAGE);
    }
}
