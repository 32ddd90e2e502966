//! ARCHITECTURE.md's module index is generated, not kept by hand: one row per `.rs` file under
//! `src/` (the unit-test files `tests.rs` aside) with the first sentence of the file's `//!`
//! doc. The test fails when the section between the two marker comments differs from what the
//! files say; with `ENVBUILD_BLESS=1` it rewrites that section instead (after a rename:
//! `ENVBUILD_BLESS=1 cargo test --locked --test it module_index`).

use crate::support::root;
use std::path::{Path, PathBuf};

/// The comment lines that open and close the generated section.
pub const START: &str = "<!-- module-index:start (generated from each file's `//!` doc: ENVBUILD_BLESS=1 cargo test --locked --test it module_index) -->";
pub const END: &str = "<!-- module-index:end -->";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of the `//!` lines that open a file, up to its first blank doc line (the first
/// paragraph), joined by spaces.
fn first_paragraph(text: &str) -> String {
    let mut words = Vec::new();
    for line in text.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        let doc = doc.trim();
        if doc.is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        words.push(doc.to_string());
    }
    words.join(" ")
}

/// The first sentence of a paragraph: up to the first `.` that ends a word outside backticks
/// and is followed by a space or the end (so `3.11`, `e.g.` and `` `a.b` `` do not end it).
pub fn first_sentence(paragraph: &str) -> String {
    let chars: Vec<char> = paragraph.chars().collect();
    let mut in_code = false;
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '`' => in_code = !in_code,
            '.' if !in_code => {
                let ends = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
                let word: String = chars[..i]
                    .iter()
                    .rev()
                    .take_while(|c| !c.is_whitespace())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                let word = word.trim_start_matches(|c: char| !c.is_alphanumeric());
                let abbreviation = ["e.g", "i.e", "etc", "vs"].contains(&word);
                if ends && !abbreviation {
                    return chars[..i].iter().collect();
                }
            }
            _ => {}
        }
    }
    paragraph.trim_end_matches('.').to_string()
}

/// Reading order: the entry points, then the layers from the top (commands) down to core.
fn layer_rank(rel: &str) -> usize {
    let order = [
        "main.rs",
        "lib.rs",
        "commands/",
        "cli/",
        "app/",
        "infra/",
        "core/",
    ];
    order
        .iter()
        .position(|p| rel == *p || rel.starts_with(p))
        .unwrap_or(order.len())
}

/// The generated section: a table with one row per source file.
pub fn generated() -> String {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut rows: Vec<(usize, String, String)> = files
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(p).expect("read source");
            let sentence = first_sentence(&first_paragraph(&text)).replace('|', "\\|");
            (layer_rank(&rel), rel, sentence)
        })
        .collect();
    rows.sort();
    let mut out = String::from("| module | what it is for |\n|---|---|\n");
    for (_, rel, sentence) in rows {
        out.push_str(&format!("| `src/{rel}` | {sentence} |\n"));
    }
    out
}

/// ARCHITECTURE.md split around the generated section: (before START, the section, END and after).
fn split(text: &str) -> (&str, &str, &str) {
    let start = text
        .find(START)
        .expect("ARCHITECTURE.md has the module index's start marker");
    let body = start + START.len();
    let end = body
        + text[body..]
            .find(END)
            .expect("ARCHITECTURE.md has the module index's end marker");
    (&text[..body], &text[body..end], &text[end..])
}

#[test]
fn the_module_index_is_what_each_file_says() {
    let path = root().join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).expect("ARCHITECTURE.md");
    let (before, section, after) = split(&text);
    let wanted = format!("\n{}", generated());
    if section == wanted {
        return;
    }
    if std::env::var("ENVBUILD_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{before}{wanted}{after}")).expect("rewrite ARCHITECTURE.md");
        return;
    }
    let old: Vec<&str> = section.lines().collect();
    let new: Vec<&str> = wanted.lines().collect();
    let stale: Vec<&&str> = old.iter().filter(|l| !new.contains(l)).collect();
    let missing: Vec<&&str> = new.iter().filter(|l| !old.contains(l)).collect();
    panic!(
        "ARCHITECTURE.md's module index is out of date; regenerate it with \
         `ENVBUILD_BLESS=1 cargo test --locked --test it module_index`.\n\
         rows to remove: {stale:#?}\nrows to add: {missing:#?}"
    );
}

#[test]
fn the_first_sentence_ends_where_a_sentence_ends() {
    assert_eq!(first_sentence("One. Two."), "One");
    assert_eq!(
        first_sentence("Python 3.11 and `a.b. c` here. Next"),
        "Python 3.11 and `a.b. c` here"
    );
    assert_eq!(
        first_sentence("Sizes (e.g. 16g) only. More"),
        "Sizes (e.g. 16g) only"
    );
    assert_eq!(first_sentence("No period at all"), "No period at all");
    assert_eq!(
        first_paragraph("//! A\n//! b.\n//!\n//! Not this.\nuse x;"),
        "A b."
    );
    assert_eq!(first_paragraph("use x;\n//! late"), "");
}
