//! The character rules that keep spec values out of trouble in Dockerfiles, YAML and shells:
//! dangerous characters, length, names, paths and image references.
//! This module performs no I/O.

/// No spec value needs more; longer ones are refused before they reach any output.
pub const MAX_VALUE_LEN: usize = 200;

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

/// A path safe to COPY or mount: relative (inside the project) or absolute as asked, no `..`,
/// and no segment starting with `-` (it would read as an option).
pub fn is_safe_path(p: &str, absolute: bool) -> bool {
    !p.is_empty()
        && p.len() <= MAX_VALUE_LEN
        && p.starts_with('/') == absolute
        && p.split('/').all(|s| s != ".." && !s.starts_with('-'))
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
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

/// A Docker image reference, pinned by a tag other than `latest` or by a digest.
pub(super) fn check_image_ref(s: &str) -> Result<(), &'static str> {
    let ok_chars = s.bytes().all(|b| {
        b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || matches!(b, b'.' | b'_' | b'-' | b'/' | b':' | b'@')
    });
    let upper_ok = s
        .rsplit_once(':')
        .map(|(_, tag)| {
            tag.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
        .unwrap_or(false);
    if s.is_empty() || !(ok_chars || upper_ok) || s.starts_with(['-', '.', '/', ':', '@']) {
        return Err("is not an image reference such as `python:3.11-slim-bookworm`");
    }
    if let Some((_, digest)) = s.split_once("@sha256:") {
        if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(());
        }
        return Err("has a malformed digest (want @sha256:<64 hex>)");
    }
    let last = s.rsplit('/').next().unwrap_or(s);
    match last.split_once(':') {
        Some((_, "latest")) => Err("uses the floating tag `latest`"),
        Some((_, tag)) if !tag.is_empty() => Ok(()),
        _ => Err("has no tag, so it floats like `latest`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_must_be_pinned() {
        assert!(check_image_ref("python:3.11-slim-bookworm").is_ok());
        assert!(check_image_ref("nvcr.io/nvidia/pytorch:24.05-py3").is_ok());
        assert!(check_image_ref(&format!("busybox@sha256:{}", "a".repeat(64))).is_ok());
        assert!(check_image_ref("localhost:5000/img:1.0").is_ok());
        assert!(check_image_ref("python").is_err());
        assert!(check_image_ref("python:latest").is_err());
        assert!(check_image_ref("localhost:5000/img").is_err());
        assert!(check_image_ref("img@sha256:zz").is_err());
    }

    #[test]
    fn paths_stay_inside() {
        assert!(is_safe_path("wheels/local", false));
        assert!(!is_safe_path("../etc", false));
        assert!(!is_safe_path("/abs", false));
        assert!(is_safe_path("/data", true));
        assert!(!is_safe_path("/data/../x", true));
        assert!(!is_safe_path("---", false));
        assert!(!is_safe_path("/data/-rf", true));
    }
}
