//! docs/ci.md's workflows: every YAML block parses (serde-saphyr), and every `envbuild` command
//! line in them parses with the real command line (clap), with the matrix fields they use taken
//! from a real `envbuild matrix` of this repository's specs, and names spec files that exist.
//! Its command-line splitters also serve the other docs' checks (`readme.rs`).

use super::support::{envbuild, root};
use clap::Parser;
use envbuild::cli::{Cli, Command};
use std::collections::BTreeMap;

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/ci.md")).expect("docs/ci.md")
}

/// The ```yaml blocks, in order.
fn yaml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```yaml block");
    blocks
}

/// Every string value of a parsed YAML document.
fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The first entry of the real matrix of `specs/`, by field (`spec`, `variant`, `pushed`, ...).
fn matrix_entry() -> BTreeMap<String, String> {
    let out = envbuild()
        .current_dir(root())
        .args(["matrix", "specs", "--format", "json", "--repo"])
        .arg("ghcr.io/acme/envs")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["matrix"][0]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// The text with the CI systems' placeholders replaced by real values: `${{ matrix.F }}` and
/// `$ENVBUILD_F` by the matrix entry's field F (a field the matrix lacks fails the test), a
/// `for VAR in GLOB` loop's `$VAR` by the glob's first match, `$CI_REGISTRY_IMAGE` by a
/// registry path. Any other variable in an envbuild command line fails the test.
fn substitute(
    line: &str,
    entry: &BTreeMap<String, String>,
    loops: &BTreeMap<String, String>,
) -> String {
    let mut s = line.to_string();
    while let Some(start) = s.find("${{") {
        let end = s[start..].find("}}").expect("closed ${{ }}") + start + 2;
        let expr = s[start + 3..end - 2].trim();
        let value = match expr.strip_prefix("matrix.") {
            Some(field) => entry
                .get(field)
                .unwrap_or_else(|| panic!("`matrix.{field}` is not a field of `envbuild matrix`"))
                .clone(),
            None => panic!("an envbuild command line uses `${{{{ {expr} }}}}`"),
        };
        s.replace_range(start..end, &value);
    }
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let value = if let Some(field) = name.strip_prefix("ENVBUILD_") {
            entry
                .get(&field.to_lowercase())
                .unwrap_or_else(|| panic!("`${name}` is not a variable `envbuild matrix` sets"))
                .clone()
        } else if name == "CI_REGISTRY_IMAGE" {
            "registry.example.com/group/project".to_string()
        } else if let Some(v) = loops.get(&name) {
            v.clone()
        } else {
            panic!("an envbuild command line uses an unknown variable `${name}`: {line}")
        };
        out.push_str(&value);
        rest = &after[name.len()..];
    }
    out.push_str(rest);
    out
}

/// `for VAR in DIR/*/FILE` loops: VAR → the first match (sorted), as the shell would give it.
fn loop_vars(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for piece in text.split("for ").skip(1) {
        let mut words = piece.split_whitespace();
        let (Some(var), Some("in"), Some(glob)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let glob = glob.trim_end_matches(';');
        let (dir, file) = glob.split_once("/*/").expect("a DIR/*/FILE glob");
        let mut matches: Vec<String> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().join(file).is_file())
            .map(|e| format!("{dir}/{}/{file}", e.file_name().to_string_lossy()))
            .collect();
        matches.sort();
        assert!(
            !matches.is_empty(),
            "`{glob}` matches nothing in this repository"
        );
        vars.insert(var.to_string(), matches.remove(0));
    }
    vars
}

/// The `envbuild ...` command lines in a script text (`$(...)`, `;`, `|`, `&&`, redirections
/// end one), with `\`-newline continuations joined.
pub(crate) fn command_lines(script: &str) -> Vec<String> {
    let joined = script.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("envbuild ") {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            rest = &rest[i + "envbuild ".len()..];
            if !matches!(before, None | Some(' ' | '(' | '\t')) {
                continue;
            }
            let end = ["$(", ")", ";", "|", "&&", ">"]
                .iter()
                .filter_map(|stop| tail.find(stop))
                .min()
                .unwrap_or(tail.len());
            found.push(tail[..end].trim().to_string());
        }
    }
    found
}

/// Shell words: whitespace-separated, with '...' and "..." quoting.
pub(crate) fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    assert!(quote.is_none(), "unbalanced quotes: {line}");
    if any {
        out.push(cur);
    }
    out
}

/// The files a parsed command line names as inputs must exist (outputs need not).
fn inputs(cli: &Cli) -> Vec<std::path::PathBuf> {
    match &cli.command {
        Command::Lock(a) => vec![a.spec.clone()],
        Command::Image(a) => a.specs.clone(),
        Command::Matrix(a) => a.specs.clone(),
        Command::Test(a) => a.lock.iter().chain(&a.expect_file).cloned().collect(),
        Command::Render(a) => vec![a.input.clone()],
        _ => Vec::new(),
    }
}

#[test]
fn every_workflow_parses_and_every_envbuild_line_is_a_real_command() {
    let text = doc();
    let blocks = yaml_blocks(&text);
    assert!(
        blocks.len() >= 4,
        "GitHub and GitLab workflows: {}",
        blocks.len()
    );
    let entry = matrix_entry();
    let mut seen = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        let parsed: serde_json::Value = serde_saphyr::from_str(block)
            .unwrap_or_else(|e| panic!("yaml block {n} does not parse: {e}\n{block}"));
        let mut texts = Vec::new();
        strings(&parsed, &mut texts);
        for t in &texts {
            let loops = loop_vars(t);
            for line in command_lines(t) {
                let real = substitute(&line, &entry, &loops);
                let argv = words(&real);
                let cli = Cli::try_parse_from(&argv)
                    .unwrap_or_else(|e| panic!("`{line}` (as `{real}`) does not parse:\n{e}"));
                for input in inputs(&cli) {
                    assert!(
                        root().join(&input).exists(),
                        "`{line}` names a missing {input:?}"
                    );
                }
                seen.push(argv.join(" "));
            }
        }
    }
    // The workflows the page promises are there.
    for wanted in [
        "envbuild lock --locked specs/",
        "envbuild matrix specs --format github",
        "envbuild matrix specs --format gitlab",
        "--push ghcr.io/acme/envs",
        "--show-verdict",
        "envbuild image specs --jobs 2",
    ] {
        assert!(
            seen.iter().any(|l| l.contains(wanted)),
            "no command line with `{wanted}` in docs/ci.md: {seen:#?}"
        );
    }
}

/// The GitLab block the page shows as `envbuild matrix`'s output is that output (lock hashes
/// aside: they change with every lock).
#[test]
fn the_shown_gitlab_matrix_is_the_real_output() {
    let text = doc();
    let shown = yaml_blocks(&text)
        .into_iter()
        .find(|b| b.starts_with("parallel:"))
        .expect("the appended parallel: matrix: block");
    let out = envbuild()
        .current_dir(root())
        .args(["matrix", "specs/torch29-cu128", "--format", "gitlab"])
        .args([
            "--variant",
            "runtime",
            "--repo",
            "registry.example.com/team/envs",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // `-` and 12 hex digits, then a quote: a content-addressed tag's lock hash.
    let hashes = |s: &str| -> String {
        let b = s.as_bytes();
        let mut out = String::new();
        let mut i = 0;
        while i < b.len() {
            let tag = b[i] == b'-'
                && b.len() > i + 13
                && b[i + 1..i + 13].iter().all(u8::is_ascii_hexdigit)
                && b[i + 13] == b'"';
            if tag {
                out.push_str("-<hash12>");
                i += 13;
            } else {
                out.push(b[i] as char);
                i += 1;
            }
        }
        out
    };
    assert_eq!(
        hashes(&shown),
        hashes(&String::from_utf8_lossy(&out.stdout))
    );
}

#[test]
fn the_checker_rejects_what_it_should() {
    // A flag envbuild does not have, and a matrix field it does not print, are caught.
    let argv = words("envbuild image specs --no-such-flag");
    assert!(Cli::try_parse_from(&argv).is_err());
    let entry = matrix_entry();
    let r = std::panic::catch_unwind(|| {
        substitute(
            "envbuild image ${{ matrix.nope }}",
            &entry,
            &BTreeMap::new(),
        )
    });
    assert!(r.is_err());
    assert_eq!(
        command_lines("echo \"m=$(envbuild matrix specs --format github)\" >> \"$GITHUB_OUTPUT\""),
        ["envbuild matrix specs --format github"]
    );
    assert_eq!(
        words("envbuild test 'a b' \"c\""),
        ["envbuild", "test", "a b", "c"]
    );
}
