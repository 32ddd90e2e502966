//! `envbuild explain`'s output: the candidates the resolver weighed for a spec
//! ([`crate::core::resolve::choose::Weighed`]) as a table (candidate x constraint: Python, the
//! build, the driver, each GPU, the proof that it locks), the chosen one marked, in plain text
//! or Markdown (a CI summary). The JSON form is the `Weighed` value itself. This module
//! performs no I/O.

use crate::core::resolve::choose::{Candidate, Cell, Weighed};

/// Which candidates a view shows: every one, or the best `top` plus the chosen.
fn shown(w: &Weighed, all: bool, top: usize) -> Vec<usize> {
    (0..w.candidates.len())
        .filter(|&i| all || i < top || Some(i) == w.chosen)
        .collect()
}

/// A cell as text: `ok native`, `~ minor-compat`, `no DRIVER_TOO_OLD`, `-`.
fn cell(c: &Cell, limit: usize) -> String {
    let (mark, text) = match c {
        Cell::Pass(s) => ("ok", s.as_str()),
        Cell::Caveat(s) => ("~", s.as_str()),
        Cell::Fail(s) => ("no", s.as_str()),
        Cell::Unchecked => return "-".into(),
    };
    let mut t = format!("{mark} {text}");
    if t.chars().count() > limit {
        t = t.chars().take(limit.saturating_sub(3)).collect::<String>() + "...";
    }
    t
}

/// The header and rows of the table: one row per candidate shown.
fn grid(w: &Weighed, rows: &[usize], limit: usize) -> (Vec<String>, Vec<Vec<String>>) {
    let mut head: Vec<String> = ["", "#", "torch", "build", "python", "python support"]
        .iter()
        .map(|s| s.to_string())
        .chain(["build published".into(), "driver".into()])
        .collect();
    head.extend(w.gpus.iter().cloned());
    head.push("locks".into());
    let body = rows
        .iter()
        .map(|&i| {
            let c: &Candidate = &w.candidates[i];
            let mut r = vec![
                if Some(i) == w.chosen { "*" } else { "" }.to_string(),
                (i + 1).to_string(),
                c.pytorch.to_string(),
                c.build_name.clone(),
                c.python.to_string(),
                cell(&c.python_cell, limit),
                cell(&c.build, limit),
                cell(&c.driver, limit),
            ];
            r.extend(c.gpus.iter().map(|g| cell(g, limit)));
            r.push(cell(&c.locks, limit));
            r
        })
        .collect();
    (head, body)
}

/// The line that says what was weighed and what was chosen.
fn summary(w: &Weighed, rows: usize) -> String {
    let chosen = match w.chosen.map(|i| &w.candidates[i]) {
        Some(c) => format!(
            "chosen (*): torch {} {} with Python {}{}",
            c.pytorch,
            c.build_name,
            c.python,
            if w.held { ", kept from the lock" } else { "" }
        ),
        None => "nothing locks (NO_MATCHING_BUILD)".into(),
    };
    let all = w.candidates.len();
    let more = if rows < all {
        format!("; showing {rows} (--all shows every one)")
    } else {
        String::new()
    };
    format!(
        "{}: {all} candidates weighed, best first{more}\n{chosen}\n",
        w.asked
    )
}

/// Plain text: aligned columns.
pub fn text(w: &Weighed, all: bool, top: usize) -> String {
    let rows = shown(w, all, top);
    let (head, body) = grid(w, &rows, 40);
    let widths: Vec<usize> = (0..head.len())
        .map(|j| {
            std::iter::once(&head)
                .chain(&body)
                .map(|r| r[j].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String]| {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        cells.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = summary(w, rows.len());
    out.push('\n');
    out.push_str(&line(&head));
    for r in &body {
        out.push_str(&line(r));
    }
    out
}

/// Markdown: a table for a CI job summary.
pub fn markdown(w: &Weighed, all: bool, top: usize) -> String {
    let rows = shown(w, all, top);
    let (head, body) = grid(w, &rows, 200);
    let esc = |s: &str| s.replace('|', "\\|");
    let line = |r: &[String]| {
        format!(
            "| {} |\n",
            r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
        )
    };
    let mut out = String::from("### envbuild explain\n\n");
    for l in summary(w, rows.len()).lines() {
        out.push_str(&format!("{}\n\n", esc(l)));
    }
    out.push_str(&line(&head));
    out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
    for r in &body {
        out.push_str(&line(r));
    }
    out
}
