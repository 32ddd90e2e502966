//! Finding where a key sits in the spec text, for diagnostics raised after parsing.
//! This module performs no I/O.

use crate::core::diag::Location;

/// Finds where a key sits in the spec text, for diagnostics raised after parsing. Works for
/// both TOML (`key = ...` under `[table]`) and YAML (`key: ...` under `table:`).
pub struct Locator<'a> {
    text: &'a str,
    file: &'a str,
}

impl<'a> Locator<'a> {
    pub fn new(text: &'a str, file: &'a str) -> Self {
        Locator { text, file }
    }

    /// `key` is a dotted path such as `pytorch` or `target.driver`.
    pub fn find(&self, key: &str) -> Option<Location> {
        let (table, leaf) = match key.split_once('.') {
            Some((t, l)) => (Some(t), l),
            None => (None, key),
        };
        // Inside a TOML `[table]` until the next header; inside a YAML `table:` mapping while
        // lines are indented.
        #[derive(PartialEq)]
        enum In {
            Top,
            TomlTable(bool),
            YamlTable(bool),
        }
        let mut state = In::Top;
        for (i, line) in self.text.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if trimmed.starts_with('[') && !trimmed.starts_with("[[") {
                let name = trimmed
                    .trim_end()
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                state = In::TomlTable(Some(name) == table);
                continue;
            }
            if indent == 0 {
                if let In::YamlTable(_) = state {
                    state = In::Top;
                }
                if state == In::Top
                    && table.is_some_and(|t| is_key_line(trimmed, t))
                    && trimmed.trim_end().ends_with(':')
                {
                    state = In::YamlTable(true);
                    continue;
                }
            }
            let here = match (&state, table) {
                (In::Top, None) => indent == 0,
                (In::TomlTable(true), Some(_)) => true,
                (In::YamlTable(true), Some(_)) => indent > 0,
                _ => false,
            };
            if here && is_key_line(trimmed, leaf) {
                return Some(Location {
                    file: self.file.to_string(),
                    line: i + 1,
                    column: indent + 1,
                });
            }
        }
        None
    }
}

fn is_key_line(trimmed: &str, key: &str) -> bool {
    let rest = match trimmed.strip_prefix(key) {
        Some(r) => r,
        None => return false,
    };
    let rest = rest.trim_start();
    rest.starts_with('=') || rest.starts_with(':')
}

#[cfg(test)]
mod tests {
    use super::Locator;

    #[test]
    fn finds_keys_in_toml_tables_and_yaml_mappings() {
        let toml =
            "name = \"x\"\n\n[target]\ndriver = \"1\"\ngpus = [\"A\"]\n\n[image]\nbase = \"b\"\n";
        let l = Locator::new(toml, "s.toml");
        assert_eq!(l.find("target.gpus").map(|l| l.line), Some(5));
        assert_eq!(l.find("image.base").map(|l| l.line), Some(8));
        assert_eq!(l.find("name").map(|l| l.line), Some(1));
        assert_eq!(l.find("target.base"), None);
        let yaml = "name: x\ntarget:\n  driver: 1\n  gpus: [A]\nimage:\n  base: b\npython: 3.11\n";
        let l = Locator::new(yaml, "s.yml");
        assert_eq!(
            l.find("target.gpus").map(|l| (l.line, l.column)),
            Some((4, 3))
        );
        assert_eq!(l.find("image.base").map(|l| l.line), Some(6));
        assert_eq!(l.find("python").map(|l| l.line), Some(7));
    }
}
