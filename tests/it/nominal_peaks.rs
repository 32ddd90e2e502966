//! The smoke script's `NOMINAL_PEAKS` is generated from the compatibility table's
//! `[[gpu_peak]]` rows, not kept by hand: the test fails when the section between the script's
//! two marker comments differs from what the table says; with `ENVBUILD_BLESS=1` it rewrites
//! that section instead (`ENVBUILD_BLESS=1 cargo test --locked --test it nominal_peaks`).

use crate::support::root;
use envbuild::core::compat::{Confidence, GpuPeakRow, Table};

const START: &str = "# nominal-peaks:start\n";
const END: &str = "# nominal-peaks:end\n";

/// The Python list the rows give, one tuple per row in the table's order (first match wins).
fn python_list(rows: &[GpuPeakRow]) -> String {
    let mut s = String::from("NOMINAL_PEAKS = [\n");
    for r in rows {
        // `{:?}` keeps the `.0` of a whole float, as Python writes it.
        s.push_str(&format!(
            "    (\"{}\", {{\"bf16\": {:?}, \"tf32\": {:?}, \"h2d\": {:?}, \"sms\": {}}}),\n",
            r.name, r.bf16, r.tf32, r.h2d, r.sms
        ));
    }
    s.push_str("]\n");
    s
}

fn table() -> Table {
    Table::embedded().expect("the embedded table parses")
}

#[test]
fn nominal_peaks_in_the_script_are_the_tables() {
    let path = root().join("templates/smoke/envbuild_smoke.py");
    let script = std::fs::read_to_string(&path).expect("read the smoke script");
    let start = script.find(START).expect("the script has the start marker") + START.len();
    let end = script.find(END).expect("the script has the end marker");
    assert!(start <= end, "the markers are in order");
    let want = python_list(&table().gpu_peak);
    if script[start..end] == want {
        return;
    }
    if std::env::var("ENVBUILD_BLESS").is_ok_and(|v| v == "1") {
        let new = format!("{}{want}{}", &script[..start], &script[end..]);
        std::fs::write(&path, new).expect("write the smoke script");
        return;
    }
    panic!(
        "templates/smoke/envbuild_smoke.py's NOMINAL_PEAKS differs from the table's [[gpu_peak]] \
         rows; run `ENVBUILD_BLESS=1 cargo test --locked --test it nominal_peaks`.\n\
         script:\n{}\ntable:\n{want}",
        &script[start..end]
    );
}

#[test]
fn peak_rows_are_sound() {
    let t = table();
    let rows = &t.gpu_peak;
    assert!(rows.len() >= 13, "the rows the script had: {}", rows.len());
    for r in rows {
        assert_eq!(r.source, "nv-datasheets", "{}", r.name);
        assert_eq!(r.confidence, Confidence::Secondary, "{}", r.name);
        assert!(t.sources.contains_key(&r.source), "{}", r.source);
        assert!(
            r.bf16 > 0.0 && r.tf32 > 0.0 && r.h2d > 0.0 && r.sms > 0,
            "{}",
            r.name
        );
        // A name the smoke script's word match can carry into a Python string literal.
        assert!(
            r.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ' '),
            "{}",
            r.name
        );
    }
    // First match wins: a row whose words occur in a later row's name would hide that row
    // ("H100" before "H100 PCIE" would give every H100 PCIe the SXM figures).
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            let (aw, bw): (Vec<&str>, Vec<&str>) = (
                a.name.split_whitespace().collect(),
                b.name.split_whitespace().collect(),
            );
            let hides = bw.windows(aw.len()).any(|w| w == aw.as_slice());
            assert!(
                !hides,
                "`{}` comes before `{}` and hides it",
                a.name, b.name
            );
        }
    }
    // Every name is a GPU the table knows by name or alias (the whole name, or its first word).
    for r in rows {
        let first = r.name.split_whitespace().next().unwrap_or_default();
        let known = t.gpu.iter().any(|g| {
            std::iter::once(&g.name)
                .chain(&g.aliases)
                .any(|n| *n == r.name || n == first)
        });
        assert!(known, "`{}` names no [[gpu]] row", r.name);
    }
}
