//! Applying a hint to a spec's text, for the tests that check every hint locks: the property
//! test over the real table (tests/it/resolve_props.rs). The resolver's unit tests apply hints
//! with the library's own `core::resolve::proposal`. Performs no I/O.

/// The spec text changed as one alternative of a hint says: its `key = "value"` (or
/// `key = [...]`) assignments set, its `without key` keys removed.
pub fn apply_hint(text: &str, alternative: &str) -> String {
    let mut doc: toml::Table = toml::from_str(text).unwrap();
    let mut rest = alternative;
    while let Some(i) = rest.find(" = ") {
        let key: String = rest[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        let after = &rest[i + 3..];
        let close = if after.starts_with('[') { ']' } else { '"' };
        let end = after[1..].find(close).unwrap() + 2;
        let value: toml::Table = toml::from_str(&format!("v = {}", &after[..end])).unwrap();
        doc.insert(key, value["v"].clone());
        rest = &after[end..];
    }
    if let Some((_, gone)) = alternative.split_once(" without ") {
        for key in gone.split(" or ") {
            doc.remove(key.split([':', ' ']).next().unwrap());
        }
    }
    toml::to_string(&doc).unwrap()
}
