//! The character rules that keep spec values out of trouble in Dockerfiles, YAML and shells:
//! dangerous characters, length, names, paths and image references.
//! This module performs no I/O.

use crate::core::rules::MAX_VALUE_LEN;

/// Why `value` (the value of `key`) may not be passed on, as a message and a hint; `None` when
/// it is safe. Refuses characters that could end a Dockerfile line, a YAML scalar or a shell
/// word, and values longer than [`MAX_VALUE_LEN`].
pub(super) fn refusal(key: &str, value: &str) -> Option<(String, &'static str)> {
    if value.len() > MAX_VALUE_LEN {
        return Some((
            format!(
                "`{key}` is {} characters long (at most {MAX_VALUE_LEN})",
                value.len()
            ),
            "no spec value needs to be this long; check the file",
        ));
    }
    let c = value.chars().find(|c| is_dangerous(*c))?;
    Some((
        format!(
            "`{key}` contains {}, which envbuild never passes on to a Dockerfile, YAML file or shell",
            describe_char(c)
        ),
        "remove it: versions, names and paths need only letters, digits and . _ - / : + = @",
    ))
}

fn is_dangerous(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '$' | '`'
                | ';'
                | '&'
                | '|'
                | '\''
                | '"'
                | '\\'
                | '<'
                | '>'
                | '('
                | ')'
                | '{'
                | '}'
                | '#'
                | '!'
                | '*'
                | '?'
                | '~'
                | '%'
                | '^'
        )
        || !c.is_ascii()
}

fn describe_char(c: char) -> String {
    match c {
        '\n' => "a newline".into(),
        '\r' => "a carriage return".into(),
        '\t' => "a tab".into(),
        c if c.is_control() => format!("a control character (U+{:04X})", c as u32),
        c if !c.is_ascii() => format!("a non-ASCII character `{c}`"),
        c => format!("`{c}`"),
    }
}

/// An environment, image or package name: lowercase letters, digits, `.`, `_` and `-`,
/// starting with a letter or digit.
pub(super) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}
