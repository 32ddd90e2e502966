//! The README is a short manual and docs/ holds the reference; both are tested where each claim
//! now lives: the README's worked example and the examples of docs/lock.md and
//! docs/diagnostics.md print what they show, the spec example in docs/spec.md locks, every spec
//! key, diagnostic code and `ENVBUILD_*` variable is documented, every test docs/guarantees.md
//! cites is a test, every `envbuild` command line in the docs parses, every relative link
//! resolves, and the README stays a manual (at most 400 lines).

use super::ci_docs::{command_lines, words};
use crate::support::*;
use clap::Parser;
use envbuild::cli::Cli;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README, ARCHITECTURE.md, CONTRIBUTING.md and every page under docs/, by path.
fn doc_files() -> Vec<String> {
    let mut files: Vec<String> = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut pages: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// A fenced block: its info string (`toml`, `text`, ...) and its text.
struct Block {
    lang: String,
    text: String,
}

/// The fenced blocks of a markdown text, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end().strip_prefix("```")) {
            (None, Some(lang)) => {
                current = Some(Block {
                    lang: lang.trim().to_string(),
                    text: String::new(),
                })
            }
            (Some(_), Some("")) => out.extend(current.take()),
            (Some(b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ``` block");
    out
}

/// The lines of a markdown text outside fenced blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The section of `text` that starts with the heading line `heading`, up to the next heading of
/// the same or a higher level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` section"))
        + 1;
    let level = heading.chars().take_while(|c| *c == '#').count();
    let rest = &text[start + heading.len()..];
    let end = rest
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, l)| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            hashes > 0 && hashes <= level && l[hashes..].starts_with(' ')
        })
        .map_or(rest.len(), |(at, _)| at);
    &text[start..start + heading.len() + end]
}

/// The backticked names in the first cell of each table row (`| `A`, `B` | ... |`).
fn first_cells(text: &str) -> Vec<Vec<String>> {
    prose_lines(text)
        .into_iter()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cell = l[1..].split(" | ").next().unwrap_or_default();
            cell.split('`')
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, s)| s.to_string())
                .collect()
        })
        .collect()
}

#[test]
fn the_spec_example_locks() {
    let text = read("docs/spec.md");
    let example = blocks(&text)
        .into_iter()
        .find(|b| b.lang == "toml" && b.text.starts_with("name = "))
        .expect("a full spec example in docs/spec.md");
    let tmp = tempdir();
    fs::write(tmp.path().join("envbuild.toml"), &example.text).unwrap();
    let out = envbuild()
        .arg("lock")
        .arg(tmp.path().join("envbuild.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// The spec's keys, from the as-written serde structs: `name`, `[target] driver`, ...
fn spec_keys() -> BTreeSet<String> {
    let raw = read("src/core/spec/raw.rs");
    // (struct, field, type) for every `pub field: Type` of every `pub struct`.
    let mut fields = Vec::new();
    let mut current = None;
    for line in raw.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("pub struct ") {
            current = rest.split_whitespace().next().map(str::to_string);
        } else if l == "}" {
            current = None;
        } else if let (Some(s), Some(rest)) = (&current, l.strip_prefix("pub ")) {
            if let Some((name, ty)) = rest.split_once(':') {
                let ty = ty.trim().trim_end_matches(',');
                fields.push((s.clone(), name.trim().to_string(), ty.to_string()));
            }
        }
    }
    // A field of RawSpec whose type is another struct names that struct's section.
    let sections: BTreeMap<String, String> = fields
        .iter()
        .filter(|(s, _, ty)| s == "RawSpec" && fields.iter().any(|(o, _, _)| o == ty))
        .map(|(_, name, ty)| (ty.clone(), name.replace('_', "-")))
        .collect();
    let keys: BTreeSet<String> = fields
        .iter()
        .filter(|(_, _, ty)| !sections.contains_key(ty))
        .map(|(s, name, _)| {
            let key = name.replace('_', "-");
            match sections.get(s) {
                Some(section) => format!("[{section}] {key}"),
                None => key,
            }
        })
        .collect();
    assert!(
        keys.len() >= 30 && keys.contains("[target] driver") && keys.contains("pytorch"),
        "the parse of raw.rs found {keys:?}"
    );
    keys
}

#[test]
fn every_spec_key_has_its_row() {
    let documented: BTreeSet<String> = first_cells(section(&read("docs/spec.md"), "## Keys"))
        .into_iter()
        .flatten()
        .collect();
    let keys = spec_keys();
    let missing: Vec<_> = keys.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&keys).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/spec.md's key table: missing {missing:?}, not a spec key {stale:?}"
    );
}

#[test]
fn every_diagnostic_code_is_documented() {
    use envbuild::core::codes::{Kind, ALL};
    let doc = read("docs/diagnostics.md");
    let documented: BTreeSet<String> = first_cells(&doc).into_iter().flatten().collect();
    let codes: BTreeSet<String> = ALL.iter().map(|c| c.code.to_string()).collect();
    let missing: Vec<_> = codes.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&codes).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/diagnostics.md: codes without a row {missing:?}, rows for no code {stale:?}"
    );
    // Each row sits under the heading of the severity the registry declares for its code.
    let warnings: BTreeSet<String> = [
        section(&doc, "## Warnings"),
        section(&doc, "## Notes from `envbuild lock`"),
        section(&doc, "## Notes from `envbuild import`"),
    ]
    .into_iter()
    .flat_map(first_cells)
    .flatten()
    .collect();
    let errors: BTreeSet<String> = first_cells(section(&doc, "## Errors"))
        .into_iter()
        .flatten()
        .collect();
    for c in ALL {
        let (error, warning) = (errors.contains(c.code), warnings.contains(c.code));
        let right = match c.kind {
            Kind::Error => error && !warning,
            Kind::Warning => warning && !error,
            Kind::Either => error || warning,
        };
        assert!(
            right,
            "{}: registered as {:?}, documented under Errors {error}, Warnings {warning}",
            c.code, c.kind
        );
    }
}

#[test]
fn the_quick_start_commands_are_the_ones_ci_runs() {
    let text = section(&read("README.md"), "## Quick start").to_string();
    let commands: Vec<String> = blocks(&text)
        .into_iter()
        .filter(|b| b.lang == "sh")
        .map(|b| b.text.trim().to_string())
        .collect();
    let uv = envbuild::core::closure::UV_VERSION;
    assert_eq!(
        commands,
        [
            format!("cargo install --locked --path . && python3 -m pip install --user uv=={uv} && PATH=\"$HOME/.local/bin:$PATH\" envbuild lock specs/pypi-torch214/envbuild.toml --upgrade --out /tmp/envbuild-demo && cat /tmp/envbuild-demo/envbuild.lock"),
            "cargo test --locked".to_string(),
        ]
    );
    let ci = read(".ci/run");
    assert!(ci.contains("\ncargo test --locked\n"), "{ci}");
    // CI installs the uv the README does (and the code names in its hints).
    assert!(ci.contains("\nbash .ci/uv-up.sh\n"), "{ci}");
    let up = read(".ci/uv-up.sh");
    assert!(
        up.contains(&format!("\nUV_VERSION={uv}\n"))
            && up.contains("python3 -m pip install --user --quiet \"uv==$UV_VERSION\""),
        "{up}"
    );
    assert!(envbuild::core::closure::UV_INSTALL.contains(&format!("uv=={uv}")));
    // The second half of the first command, as the README gives it, but `--offline` for
    // `--upgrade`: tests never reach PyPI (the closure is the committed lock's, reused). The
    // real command was run from a clean clone (docs/lock.md's figures).
    let tmp = tempdir();
    let out = envbuild()
        .current_dir(root())
        .args([
            "lock",
            "specs/pypi-torch214/envbuild.toml",
            "--offline",
            "--out",
        ])
        .arg(tmp.path().join("envbuild-demo"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lock = fs::read_to_string(tmp.path().join("envbuild-demo/envbuild.lock")).unwrap();
    assert!(
        lock.contains("[[closure]]") && lock.contains("closure_resolver = \"uv "),
        "{lock}"
    );
}

/// Apply a ```diff block (`-old` / `+new` line pairs) to `text`.
fn apply_diff(text: &str, diff: &str) -> String {
    let mut out = text.to_string();
    let lines: Vec<&str> = diff.lines().collect();
    assert!(lines.len().is_multiple_of(2) && !lines.is_empty(), "{diff}");
    for pair in lines.chunks(2) {
        let (old, new) = (
            pair[0].strip_prefix('-').expect("a `-` line"),
            pair[1].strip_prefix('+').expect("a `+` line"),
        );
        assert_eq!(out.matches(old).count(), 1, "`{old}` in the spec: {out}");
        out = out.replace(old, new);
    }
    out
}

/// Run each `$ envbuild ...` of a text block in `dir` and compare what it prints (stderr, then
/// stdout) with the lines the block shows under it; the number of commands run.
fn run_as_shown(block: &str, dir: &Path) -> usize {
    let mut runs = 0;
    for part in block.split("$ ").filter(|p| !p.is_empty()) {
        let (command, shown) = part.split_once('\n').unwrap_or((part, ""));
        let argv = words(command);
        assert_eq!(argv[0], "envbuild", "{command}");
        let out = envbuild()
            .current_dir(dir)
            .args(&argv[1..])
            .output()
            .unwrap();
        let real = format!("{}{}", stderr_of(&out), stdout_of(&out));
        assert_eq!(
            real.trim_end(),
            shown.trim_end(),
            "the docs show other output for `{command}`"
        );
        runs += 1;
    }
    runs
}

#[test]
fn the_readme_worked_example_runs_as_shown() {
    let readme = read("README.md");
    let example = section(&readme, "## A worked example");
    let tmp = tempdir();
    let spec = tmp.path().join("envbuild.toml");
    let (mut specs, mut diffs, mut runs) = (0, 0, 0);
    for b in blocks(example) {
        match b.lang.as_str() {
            "toml" => {
                fs::write(&spec, &b.text).unwrap();
                specs += 1;
            }
            "diff" => {
                let text = fs::read_to_string(&spec).unwrap();
                fs::write(&spec, apply_diff(&text, &b.text)).unwrap();
                diffs += 1;
            }
            "text" => runs += run_as_shown(&b.text, tmp.path()),
            _ => {}
        }
    }
    assert!(
        specs == 1 && diffs >= 1 && runs >= 3,
        "{specs} specs, {diffs} edits, {runs} commands"
    );
}

#[test]
fn the_lock_page_example_runs_as_shown() {
    let text = read("docs/lock.md");
    let example = blocks(&text)
        .into_iter()
        .find(|b| b.lang == "text" && b.text.starts_with("$ envbuild lock specs/"))
        .expect("an `envbuild lock` example in docs/lock.md");
    // A copy of the spec where the example's relative path finds it, so no lock is written
    // into the repository.
    let tmp = tempdir();
    let dir = tmp.path().join("specs/torch-gpu-env");
    fs::create_dir_all(&dir).unwrap();
    fs::copy(
        root().join("specs/torch-gpu-env/envbuild.toml"),
        dir.join("envbuild.toml"),
    )
    .unwrap();
    assert_eq!(run_as_shown(&example.text, tmp.path()), 1);
}

#[test]
fn the_diagnostics_page_example_is_what_lock_prints() {
    let text = read("docs/diagnostics.md");
    let shown = blocks(&text)
        .into_iter()
        .find(|b| b.lang == "text")
        .expect("an example in docs/diagnostics.md");
    let tmp = tempdir();
    fs::copy(
        root().join("tests/fixtures/errors/driver-too-old.toml"),
        tmp.path().join("driver-too-old.toml"),
    )
    .unwrap();
    let out = envbuild()
        .current_dir(tmp.path())
        .args(["lock", "driver-too-old.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_of(&out).trim_end(), shown.text.trim_end());
}

/// Every `fn NAME(` marked `#[test]` (or `#[tokio::test]`) under `dir`, and every Docker test
/// registered in a `trials![...]` list or a `trial("...", NAME)` call; those marked `#[ignore]`
/// (which a plain `cargo test` does not run) also go to `ignored`.
fn tests_in(dir: &Path, out: &mut BTreeSet<String>, ignored: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            tests_in(&path, out, ignored);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            let (mut marked, mut skipped) = (false, false);
            for line in text.lines() {
                let l = line.trim();
                if l == "#[test]" || l.starts_with("#[tokio::test") {
                    marked = true;
                } else if l.starts_with("#[ignore") {
                    skipped = true;
                } else if let Some(i) = l.find("fn ").filter(|_| marked) {
                    let name: String = l[i + 3..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if skipped {
                        ignored.insert(name.clone());
                    }
                    out.insert(name);
                    (marked, skipped) = (false, false);
                }
            }
            for list in text.split("trials![").skip(1) {
                for (name, is_ignored) in trial_names(list) {
                    if is_ignored {
                        ignored.insert(name.clone());
                    }
                    out.insert(name);
                }
            }
            for call in text.split("trial(").skip(1) {
                if let Some((_, rest)) = call.split_once(',') {
                    let name = rest.trim().trim_end_matches(')').trim();
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            }
        }
    }
}

/// The names of a `trials![...]` list (the text after `trials![`), up to its closing `]`, each
/// with whether an `#[ignore = "..."]` attribute precedes it.
fn trial_names(list: &str) -> Vec<(String, bool)> {
    let (mut depth, mut names, mut attr) = (1, String::new(), None);
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            break;
        }
        match (c, attr) {
            ('#', None) => attr = Some(depth + 1),
            (_, Some(inside)) if depth < inside && c == ']' => {
                attr = None;
                names.push('!');
            }
            (_, None) => names.push(c),
            _ => {}
        }
    }
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| match n.strip_prefix('!') {
            Some(name) => (name.trim().to_string(), true),
            None => (n.to_string(), false),
        })
        .collect()
}

/// docs/guarantees.md: (section, bullet) for every promise, and the names each cites.
fn promises(text: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for part in text.split("\n## ").skip(1) {
        let (title, body) = part.split_once('\n').unwrap_or((part, ""));
        for bullet in body.split("\n- ").skip(1) {
            let bullet = bullet.split("\n\n").next().unwrap_or_default();
            let cited = bullet
                .split_once("Held by")
                .map_or(Vec::new(), |(_, held)| {
                    held.split('`')
                        .enumerate()
                        .filter(|(i, _)| i % 2 == 1)
                        .map(|(_, s)| s.to_string())
                        .collect()
                });
            out.push((title.to_string(), bullet.to_string(), cited));
        }
    }
    out
}

#[test]
fn every_test_the_guarantees_cite_exists() {
    let text = read("docs/guarantees.md");
    for heading in [
        "## Writes",
        "## Reads",
        "## Paths that leave the project",
        "## Networks and bases",
        "## Outputs and signals",
        "## One validation",
        "## Tests that tell the truth",
        "## Locks and resolution",
        "## Rendered files, images and verdicts",
        "## Untested",
    ] {
        assert!(
            text.contains(&format!("\n{heading}\n")),
            "docs/guarantees.md lacks {heading}"
        );
    }
    let mut cited = 0;
    for (section, bullet, names) in &promises(&text) {
        if section == "Untested" {
            assert!(
                names.is_empty(),
                "an untested promise cites tests: {bullet}"
            );
            continue;
        }
        assert!(
            !names.is_empty(),
            "a promise without a test belongs under Untested: {bullet}"
        );
        cited += cited_tests_run("docs/guarantees.md", bullet, names);
    }
    // The parse found the citations (a broken parse must not pass with nothing to check).
    assert!(cited >= 80, "only {cited} citations found");
}

/// The tests a plain `cargo test` runs, by name: `#[test]` functions and registered trials, less
/// the ignored ones.
fn tests_that_run() -> &'static BTreeSet<String> {
    static RUN: std::sync::OnceLock<BTreeSet<String>> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let (mut defined, mut ignored) = (BTreeSet::new(), BTreeSet::new());
        tests_in(&root().join("tests"), &mut defined, &mut ignored);
        tests_in(&root().join("src"), &mut defined, &mut ignored);
        defined.difference(&ignored).cloned().collect()
    })
}

/// Fail unless every name a promise of `doc` cites is a test that runs; the count.
fn cited_tests_run(doc: &str, bullet: &str, names: &[String]) -> usize {
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !tests_that_run().contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "{doc} cites what is not a test, or one `cargo test` skips: {missing:?} in: {bullet}"
    );
    names.len()
}

/// docs/security.md, the threat model: its sections are there, and every promise cites tests
/// that a plain `cargo test` runs (a promise under "Who is trusted" or "The boundaries" is prose).
#[test]
fn every_test_the_threat_model_cites_exists() {
    let text = read("docs/security.md");
    for heading in [
        "## Who is trusted",
        "## The boundaries",
        "## The checkout",
        "## Child processes",
        "## The lock",
        "## Outputs",
    ] {
        assert!(
            text.contains(&format!("\n{heading}\n")),
            "docs/security.md lacks {heading}"
        );
    }
    let mut cited = 0;
    for (section, bullet, names) in promises(&text) {
        if section == "Who is trusted" || section == "The boundaries" {
            continue;
        }
        assert!(
            !names.is_empty(),
            "a promise in docs/security.md ({section}) cites no test: {bullet}"
        );
        cited += cited_tests_run("docs/security.md", &bullet, &names);
    }
    assert!(
        cited >= 10,
        "only {cited} citations found in docs/security.md"
    );
}

#[test]
fn the_citation_parser_finds_tests_and_only_tests() {
    assert_eq!(
        trial_names("\n  #[ignore = \"bench [x]\"]\n  a_b,\n  c,\n]\n}\nfn d() {}"),
        [("a_b".to_string(), true), ("c".to_string(), false)]
    );
    assert_eq!(trial_names("one,]"), [("one".to_string(), false)]);
    let found = promises("# G\n\n## S\n\n- A. Held by `x_y`, `z`.\n- B, untested.\n");
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].2, ["x_y", "z"]);
    assert!(found[1].2.is_empty());
}

#[test]
fn the_readme_is_a_manual_of_at_most_400_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines: move reference text to docs/"
    );
}

/// GitHub's anchor for a heading: lower case, only letters, digits, `-`, `_` and spaces, spaces
/// as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown text's headings (a repeated heading gets `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links `[text](target)` outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        for piece in prose.split("](").skip(1) {
            if let Some(end) = piece.find(')') {
                out.push(piece[..end].to_string());
            }
        }
    }
    out
}

/// The broken relative links of `file` (a path under the root): a missing file, or an anchor
/// that no heading of the target has.
fn broken_links(file: &str, text: &str) -> Vec<String> {
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for target in links(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved: PathBuf = if path.is_empty() {
            PathBuf::from(file)
        } else {
            dir.join(path)
        };
        let full = root().join(&resolved);
        if !full.exists() {
            broken.push(format!("{file}: `{target}` (no {})", resolved.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let target_text = fs::read_to_string(&full).unwrap_or_default();
            if !anchors(&target_text).contains(anchor) {
                broken.push(format!("{file}: `{target}` (no such heading)"));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_points_to_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let text = read(&file);
        checked += links(&text).len();
        broken.extend(broken_links(&file, &text));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 60, "only {checked} links found");
}

#[test]
fn the_link_checker_catches_what_it_should() {
    assert_eq!(
        slug(" Real builds correct the table: `TABLE_MISMATCH` and `envbuild table learn`"),
        "real-builds-correct-the-table-table_mismatch-and-envbuild-table-learn"
    );
    let text = "# A\n## B c\n```sh\n# not a heading\n```\n## B c\n";
    assert_eq!(
        anchors(text),
        ["a", "b-c", "b-c-1"].map(String::from).into()
    );
    assert_eq!(
        links("see [x](a.md#b) and `[y](in-code.md)`\n```\n[z](fenced.md)\n```\n"),
        ["a.md#b"]
    );
    let broken = broken_links(
        "docs/x.md",
        "[a](spec.md#keys) [b](spec.md#no-such) [c](nope.md) [d](../README.md) [e](https://x.y/z)",
    );
    assert_eq!(broken.len(), 2, "{broken:?}");
}

#[test]
fn every_envbuild_command_line_in_the_docs_parses() {
    let mut seen = 0;
    for file in doc_files() {
        let text = read(&file);
        for b in blocks(&text) {
            // Shell blocks hold command lines; text blocks show them after `$ `.
            let lines: Vec<String> = match b.lang.as_str() {
                "sh" | "bash" | "console" => command_lines(&b.text),
                "text" => b
                    .text
                    .lines()
                    .filter_map(|l| l.strip_prefix("$ "))
                    .flat_map(command_lines)
                    .collect(),
                _ => continue,
            };
            for line in lines {
                let argv = words(&line);
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("{file}: `{line}` does not parse:\n{e}");
                }
                for arg in argv.iter().filter(|a| a.starts_with("specs/")) {
                    assert!(root().join(arg).exists(), "{file}: `{line}` names {arg}");
                }
                seen += 1;
            }
        }
    }
    assert!(seen >= 15, "only {seen} command lines found");
}

#[test]
fn every_envbuild_variable_is_documented() {
    fn names_in(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                names_in(&path, out);
                continue;
            }
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            for piece in text.split("\"ENVBUILD_").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(format!("ENVBUILD_{name}"));
                }
            }
        }
    }
    let mut names = BTreeSet::new();
    names_in(&root().join("src"), &mut names);
    names_in(&root().join("templates"), &mut names);
    assert!(names.len() >= 20, "{names:?}");
    let docs: String = doc_files()
        .iter()
        .filter(|f| f.starts_with("docs/"))
        .map(|f| read(f))
        .collect();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !docs.contains(&format!("`{n}")) && !docs.contains(&format!("{n}=")))
        .collect();
    assert!(missing.is_empty(), "not named in docs/: {missing:?}");
}
