//! A hint's proposal as data: one alternative a hint names (`pytorch = "2.7.0"`, `source =
//! "pytorch-index", cuda = "12.4" (the cu124 wheels) without pytorch-cuda`) read back into the
//! spec keys it sets and the keys it removes, and applied to a spec's TOML text. It is how a
//! user acts on a hint, so checking that the applied spec locks checks the hint's text, not only
//! the proof behind it. This module performs no I/O.

/// The keys one alternative of a hint sets (each with its TOML value) and removes.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    set: Vec<(String, toml::Value)>,
    remove: Vec<String>,
}

impl Proposal {
    /// Read one alternative: its `key = "value"` and `key = [...]` assignments, and the keys
    /// after ` without ` (`without cuda or pytorch-cuda`). Text around them (an explanation in
    /// parentheses) is skipped. `None` when an assignment is not a TOML string or list.
    pub fn parse(alternative: &str) -> Option<Proposal> {
        let mut set = Vec::new();
        let mut rest = alternative;
        while let Some(i) = rest.find(" = ") {
            let key_start = rest[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(0, |j| j + 1);
            let key = &rest[key_start..i];
            let after = &rest[i + 3..];
            let close = if after.starts_with('[') { ']' } else { '"' };
            // Both delimiters are ASCII, so these offsets are character boundaries.
            let end = after.get(1..)?.find(close)? + 2;
            let value: toml::Table = toml::from_str(&format!("v = {}", &after[..end])).ok()?;
            if key.is_empty() {
                return None;
            }
            set.push((key.to_string(), value.get("v")?.clone()));
            rest = &after[end..];
        }
        let remove = match alternative.split_once(" without ") {
            Some((_, gone)) => gone
                .split(" or ")
                .filter_map(|k| k.split([':', ' ']).next())
                .map(str::to_string)
                .collect(),
            None => Vec::new(),
        };
        Some(Proposal { set, remove })
    }

    /// The spec's TOML text with the proposal applied (top-level keys set, then removed);
    /// `None` when the text is not a TOML table. Comments and key order are not kept.
    pub fn apply(&self, spec_toml: &str) -> Option<String> {
        let mut doc: toml::Table = toml::from_str(spec_toml).ok()?;
        for (key, value) in &self.set {
            doc.insert(key.clone(), value.clone());
        }
        for key in &self.remove {
            doc.remove(key);
        }
        toml::to_string(&doc).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(text: &str, key: &str) -> Option<toml::Value> {
        toml::from_str::<toml::Table>(text).ok()?.get(key).cloned()
    }

    #[test]
    fn an_alternative_sets_and_removes_the_keys_it_names() {
        let spec =
            "name = \"t\"\npython = \"3.11\"\npytorch = \"2.5.1\"\npytorch-cuda = \"12.4\"\n";
        let p = Proposal::parse(
            "source = \"conda-forge\", channels = [\"conda-forge\"], cuda = \"12.6\" (the newest) without pytorch-cuda",
        )
        .unwrap();
        let out = p.apply(spec).unwrap();
        assert_eq!(get(&out, "source").unwrap().as_str(), Some("conda-forge"));
        assert_eq!(get(&out, "cuda").unwrap().as_str(), Some("12.6"));
        assert_eq!(
            get(&out, "channels").unwrap().as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(get(&out, "pytorch-cuda"), None);
        assert_eq!(get(&out, "python").unwrap().as_str(), Some("3.11"));
        // The explanation after a value is not read as a key.
        let p = Proposal::parse("pytorch = \"2.7.0\" (the newest release that fits)").unwrap();
        let out = p.apply(spec).unwrap();
        assert_eq!(get(&out, "pytorch").unwrap().as_str(), Some("2.7.0"));
    }

    #[test]
    fn what_is_not_a_proposal_is_refused_without_a_panic() {
        for bad in [
            "x = ",
            "x = \"open",
            "x = [\"open\"",
            " = \"v\"",
            "x = nope",
        ] {
            assert_eq!(Proposal::parse(bad), None, "{bad}");
        }
        let nothing = Proposal::parse("upgrade the driver").unwrap();
        assert_eq!(nothing.apply("a = 1\n").as_deref(), Some("a = 1\n"));
        assert_eq!(nothing.apply("not toml ["), None);
    }
}
