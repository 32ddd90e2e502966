//! What the lock and the messages say about a choice: each key's `[choices]` entry (what was
//! asked, what was chosen, why), the ranges in one phrase, and the hint for a spec nothing
//! satisfies (a range widened, its choice proven by weighing again). This module performs no
//! I/O.

use super::{companions, source_name, widened_choice, Candidate, Cell, Weighed};
use crate::core::compat::Table;
use crate::core::spec::{Choice, Pin, Req, Source, Unpinned};
use std::collections::BTreeMap;

/// The `[choices]` of the chosen candidate `c`, one per key the spec gave as a range.
pub(super) fn choices(
    u: &Unpinned,
    table: &Table,
    w: &Weighed,
    c: &Candidate,
) -> BTreeMap<String, Choice> {
    let asked = u.rest.asked();
    let src = source_name(w.source);
    let mode = match &c.driver {
        Cell::Pass(m) if m == "native" => "the target driver runs it natively",
        Cell::Caveat(m) if m == "minor-compat" => {
            "the target driver runs it through CUDA minor-version compatibility"
        }
        Cell::Caveat(m) if m == "forward-compat" => {
            "the target runs it through forward compatibility"
        }
        _ => "it locks for this target",
    };
    // A GPU served only by PTX JIT is said: the order took it because no build in the ranges
    // carries a cubin for every GPU.
    let jit: Vec<String> = w
        .gpus
        .iter()
        .zip(&c.gpus)
        .filter_map(|(g, cell)| match cell {
            Cell::Caveat(p) => Some(format!(
                "{g} runs it through PTX JIT ({})",
                p.trim_start_matches("PTX ")
            )),
            _ => None,
        })
        .collect();
    let mode = if jit.is_empty() {
        mode.to_string()
    } else {
        format!(
            "{mode}; no build there carries a cubin for every target GPU: {}",
            jit.join(" and ")
        )
    };
    let kept =
        "kept from the lock: it still satisfies the spec (`envbuild lock --upgrade` chooses again)";
    let sel_key = u.rest.selector_key();
    let sel_text = c
        .selector
        .as_ref()
        .map(|s| format!(" with {sel_key} {s}"))
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    let mut add = |key: &str, req: &Req, with: String, chosen: String, why: String| {
        let reason = if w.held { kept.to_string() } else { why };
        out.insert(
            key.to_string(),
            Choice {
                asked: req.shown(),
                chosen,
                reason: format!("{key} {} on {src}{with}: {reason}", req.shown()),
            },
        );
    };
    if let Some(r) = &asked.pytorch {
        let why = format!("{} is the newest release there, and {mode}", c.pytorch);
        add("pytorch", r, sel_text.clone(), c.pytorch.to_string(), why);
    }
    if let (Some(r), Some(s)) = (&asked.selector, &c.selector) {
        let why = format!(
            "{s} ({}) is the newest build there, and {mode}",
            c.build_name
        );
        let with = format!(" for torch {}", c.pytorch);
        add(sel_key, r, with, s.to_string(), why);
    }
    if let Some(r) = &asked.python {
        let eol = matches!(&c.python_cell, Cell::Caveat(x) if x == "end of life");
        let why = format!(
            "{} is the newest Python it supports{}",
            c.python,
            if eol {
                ""
            } else {
                " that is not past its end of life"
            }
        );
        add(
            "python",
            r,
            format!(" for torch {}", c.pytorch),
            c.python.to_string(),
            why,
        );
    }
    if let Some(t) = table.torch_row(&c.pytorch) {
        let (vision, audio) = companions(t, w.source);
        for (key, req, v) in [
            ("torchvision", &asked.torchvision, vision),
            ("torchaudio", &asked.torchaudio, audio),
        ] {
            if let Some(r) = req {
                let why = format!("{v} is the release that goes with torch {}", c.pytorch);
                add(key, r, String::new(), v, why);
            }
        }
    }
    out
}

/// The spec's core keys in one phrase: `pytorch >=2.6 with pytorch-cuda 11.8 and python 3.10
/// on the pytorch channel`.
pub(super) fn asked_text(u: &Unpinned, source: Source) -> String {
    let asked = u.rest.asked();
    let pin = |p: &Pin, r: &Option<Req>| match (r, p) {
        (Some(r), _) => r.shown(),
        (None, Pin::Exact(v)) => v.to_string(),
        _ => "(invalid)".into(),
    };
    let mut parts = vec![format!("pytorch {}", pin(&u.pytorch, &asked.pytorch))];
    let key = u.rest.selector_key();
    match (&asked.selector, u.rest.selector()) {
        (Some(r), _) => parts.push(format!("{key} {}", r.shown())),
        (None, Some(v)) => parts.push(format!("{key} {v}")),
        _ => {}
    }
    parts.push(format!("python {}", pin(&u.python, &asked.python)));
    for (k, r) in [
        ("torchvision", &asked.torchvision),
        ("torchaudio", &asked.torchaudio),
    ] {
        if let Some(r) = r {
            parts.push(format!("{k} {}", r.shown()));
        }
    }
    format!("{} on {}", parts.join(", "), source_name(source))
}

/// A proven way out when nothing satisfies: widen one key (the CUDA selector, then Python, then
/// the companions, then pytorch), then all of them, and name the versions the widened spec
/// chooses (its choice locks: that is the proof).
pub(super) fn widen_hint(u: &Unpinned, table: &Table) -> Option<String> {
    let tries: [&[&str]; 6] = [
        &["selector"],
        &["python"],
        &["torchvision", "torchaudio"],
        &["pytorch"],
        &["pytorch", "selector"],
        &["pytorch", "selector", "python", "torchvision", "torchaudio"],
    ];
    tries.iter().find_map(|keys| {
        let (c, _) = widened_choice(u, table, keys)?;
        let mut set = vec![format!("pytorch = \"{}\"", c.pytorch)];
        if let Some(s) = &c.selector {
            set.push(format!("{} = \"{s}\"", u.rest.selector_key()));
        }
        set.push(format!("python = \"{}\"", c.python));
        let names: Vec<&str> = keys
            .iter()
            .map(|k| {
                if *k == "selector" {
                    u.rest.selector_key()
                } else {
                    k
                }
            })
            .collect();
        Some(format!(
            "use {} (widening {}): it satisfies the driver and every GPU",
            set.join(", "),
            names.join(", ")
        ))
    })
}
