//! URLs and their secrets: the one rule for what in a URL is a secret (a userinfo, user and
//! password alike: `https://user:pass@host`, `git+https://TOKEN@host`; conda's token path
//! segment, `https://host/t/TOKEN/channel`), how every output shows it (redacted, [`redact`]
//! and [`redact_text`]), and the placeholder a conda token becomes in a lock and the files
//! rendered from it ([`TOKEN_PLACEHOLDER`]), filled in only where a build needs the real one.
//! This module performs no I/O.

/// What a secret is shown as.
pub const REDACTED: &str = "***";

/// What a conda token becomes in a lock and the rendered files: `https://host/t/` +
/// this + `/channel/...`. `envbuild image` puts the token of `ENVBUILD_CONDA_CHANNEL_ALIAS`
/// back into the build's copy only.
pub const TOKEN_PLACEHOLDER: &str = "envbuild-conda-token";

/// Why `import` leaves out a line whose URL carries a secret.
pub const CARRIES_SECRET: &str = "its URL carries credentials (a user, a password or a token), \
     which the spec, the lock and the image's files would carry; write the URL without them \
     (pip reads credentials from a netrc file or its keyring at build time; a conda token goes \
     in ENVBUILD_CONDA_CHANNEL_ALIAS, which is never written)";

/// The refusal of a URL that carries a secret, where it enters a spec: the message shows it
/// redacted, the hint says where credentials go instead. `None` for a URL without one.
pub fn secret_refusal(url: &str) -> Option<(String, &'static str)> {
    has_secret(url).then(|| (format!("`{}`: {}", redact(url), SECRET_WHY), SECRET_HINT))
}

/// Why a URL with a secret is refused.
pub const SECRET_WHY: &str =
    "the URL carries credentials (a user, a password or a token), which the spec, the lock and \
     the image's files would carry";

/// Where the credentials go instead.
pub const SECRET_HINT: &str = "write the URL without them: pip reads credentials at build \
     time from a netrc file or its keyring; a conda token goes in ENVBUILD_CONDA_CHANNEL_ALIAS \
     (`https://HOST/t/<token>`), which is read from the environment and never written";

/// Where a URL's authority is: the byte range after `scheme://` up to the path, query or
/// fragment (or `end`).
fn authority(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let len = url[start..]
        .find(['/', '?', '#'])
        .unwrap_or(url.len() - start);
    Some((start, start + len))
}

/// The byte range of a URL's userinfo (before the authority's last `@`), when it has one.
fn userinfo(url: &str) -> Option<(usize, usize)> {
    let (start, end) = authority(url)?;
    let at = url[start..end].rfind('@')?;
    Some((start, start + at))
}

/// A character a conda token is made of.
fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The byte range of the token in conda's `/t/TOKEN/` path form (the placeholder is no
/// token), when the URL has one.
fn token(url: &str) -> Option<(usize, usize)> {
    let (_, path_start) = authority(url)?;
    let path = &url[path_start..];
    let mut from = 0;
    while let Some(i) = path[from..].find("/t/") {
        let start = from + i + 3;
        let len = path[start..].bytes().take_while(|b| token_char(*b)).count();
        let end = start + len;
        let closed = path.as_bytes().get(end).is_none_or(|b| *b == b'/');
        if len > 0 && closed && &path[start..end] != TOKEN_PLACEHOLDER {
            return Some((path_start + start, path_start + end));
        }
        from = start;
    }
    None
}

/// Whether `url` carries a secret: a userinfo, or a conda token.
pub fn has_secret(url: &str) -> bool {
    userinfo(url).is_some() || token(url).is_some()
}

/// Whether `url` carries a userinfo (a user, a password or a token before `@`).
pub fn has_userinfo(url: &str) -> bool {
    userinfo(url).is_some()
}

/// The conda token of `url` (`/t/TOKEN/`), when it has one.
pub fn conda_token(url: &str) -> Option<&str> {
    token(url).map(|(s, e)| &url[s..e])
}

/// `url` with its secrets shown as [`REDACTED`]: `https://***@host/...`,
/// `https://host/t/***/channel`.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    // The token sits after the userinfo: replace it first, so the userinfo's range holds.
    if let Some((s, e)) = token(&out) {
        out.replace_range(s..e, REDACTED);
    }
    if let Some((s, e)) = userinfo(&out) {
        out.replace_range(s..e, REDACTED);
    }
    out
}

/// Where a URL written in free text ends: at a blank, a quote or a bracket.
fn url_end(b: u8) -> bool {
    b.is_ascii_whitespace() || b"\"'`<>()[]{}|\\^,;".contains(&b)
}

/// `text` with every URL in it redacted ([`redact`]): the rule every message, `--json`
/// document, JUnit file and progress line goes through.
pub fn redact_text(text: &str) -> String {
    map_urls(text, redact)
}

/// `text` with `f` applied to every URL written in it (`scheme://...` up to a blank, a quote
/// or a bracket).
fn map_urls(text: &str, f: fn(&str) -> String) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut search = 0;
    while let Some(i) = text[search..].find("://") {
        let sep = search + i;
        let start = text[..sep]
            .bytes()
            .rposition(|b| !(b.is_ascii_alphanumeric() || b"+.-".contains(&b)))
            .map_or(0, |p| p + 1)
            .max(done);
        let end = bytes[sep + 3..]
            .iter()
            .position(|b| url_end(*b))
            .map_or(text.len(), |p| sep + 3 + p);
        out.push_str(&text[done..start]);
        out.push_str(&f(&text[start..end]));
        done = end;
        search = end.max(sep + 3);
    }
    out.push_str(&text[done..]);
    out
}

/// `url` as a lock records it: a conda token becomes [`TOKEN_PLACEHOLDER`].
pub fn lock_form(url: &str) -> String {
    let mut out = url.to_string();
    if let Some((s, e)) = token(url) {
        out.replace_range(s..e, TOKEN_PLACEHOLDER);
    }
    out
}

/// `text` with every conda token of its URLs made the placeholder ([`lock_form`]).
pub fn lock_form_text(text: &str) -> String {
    map_urls(text, lock_form)
}

/// `text` with the placeholder replaced by `token`: for a build, or a solve, that needs the
/// real channel.
pub fn with_token(text: &str, token: &str) -> String {
    text.replace(&format!("/t/{TOKEN_PLACEHOLDER}"), &format!("/t/{token}"))
}

/// Whether `url`'s path, query and fragment hold no `..` segment (percent-encoded included).
pub fn no_dot_segments(url: &str) -> bool {
    let path = authority(url).map_or(url, |(_, end)| &url[end..]);
    let lower = path.to_ascii_lowercase().replace("%2e", ".");
    !lower.split(['/', '\\']).any(|s| s == ".." || s == ".")
}

/// Why `url` could name another folder than it reads, when it could: a `.` or `..` segment
/// (percent-encoded too, `%2e%2e`), a backslash (some servers take it for `/`), or a
/// percent-encoded `/`, `\\` or `%` (decoded once more on the way, any of them hides a
/// segment). The rule for the URLs envbuild builds others from (a channel alias, a mirror).
pub fn path_trick(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    if url.contains('\\') || lower.contains("%5c") {
        Some("a backslash")
    } else if lower.contains("%2f") || lower.contains("%25") {
        Some("a percent-encoded `/` or `%`")
    } else if !no_dot_segments(url) {
        Some("a `.` or `..` segment")
    } else {
        None
    }
}

/// `scheme://authority` of a URL in lower case (`file://` for a file URL), without its
/// userinfo: the origin its files must share.
pub fn origin(url: &str) -> Option<String> {
    let (start, end) = authority(url)?;
    let auth = &url[start..end];
    let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    Some(format!("{}{host}", &url[..start]).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_tricks_are_named() {
        for (bad, why) in [
            ("https://m.example/conda/..", "`..`"),
            ("https://m.example/a/../conda", "`..`"),
            ("https://m.example/./conda", "`.`"),
            ("https://m.example/%2e%2E/conda", "`..`"),
            ("https://m.example/a%2fb", "`/`"),
            ("https://m.example/a%252e%252e", "`%`"),
            ("https://m.example/a\\..", "backslash"),
            ("https://m.example/a%5c", "backslash"),
            ("file:///srv/mirror/../etc", "`..`"),
        ] {
            assert!(path_trick(bad).is_some_and(|w| w.contains(why)), "{bad}");
        }
        for ok in [
            "https://conda.anaconda.org",
            "https://m.example/conda",
            "http://127.0.0.1:8080/x.y/z..w",
            "file:///srv/mirror",
            "https://m.example/t/tk-1/conda",
        ] {
            assert_eq!(path_trick(ok), None, "{ok}");
        }
    }

    #[test]
    fn userinfo_and_tokens_are_secrets_and_redacted() {
        let cases = [
            (
                "https://user:pass@host.example/simple",
                "https://***@host.example/simple",
            ),
            (
                "git+https://ghp_abc@github.com/o/r@0123abcd",
                "git+https://***@github.com/o/r@0123abcd",
            ),
            (
                "https://conda.example/t/ab-12_Cd/conda-forge",
                "https://conda.example/t/***/conda-forge",
            ),
            ("https://conda.example/t/tok", "https://conda.example/t/***"),
            ("https://pypi.org/simple", "https://pypi.org/simple"),
            ("https://h.example/a@b/c", "https://h.example/a@b/c"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
            assert_eq!(has_secret(url), url != shown, "{url}");
        }
        let placeholder = format!("https://c.example/t/{TOKEN_PLACEHOLDER}/x");
        assert!(!has_secret(&placeholder));
        assert_eq!(redact(&placeholder), placeholder);
    }

    #[test]
    fn every_url_in_a_text_is_redacted() {
        let text = "`https://u:pw@a.example/x` and (git+https://tok@b.example/y) then \
                    https://c.example/t/TOK1/ch, plain https://d.example/ and a@b";
        let shown = redact_text(text);
        for secret in ["pw", "tok@", "TOK1"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("`https://***@a.example/x`"), "{shown}");
        assert!(shown.contains("(git+https://***@b.example/y)"), "{shown}");
        assert!(shown.contains("https://c.example/t/***/ch"), "{shown}");
        assert!(
            shown.ends_with("plain https://d.example/ and a@b"),
            "{shown}"
        );
        assert_eq!(redact_text("no url: a@b"), "no url: a@b");
    }

    #[test]
    fn tokens_become_the_placeholder_and_come_back() {
        let url = "https://c.example/t/SECRET-1/conda-forge/noarch/x-1-0.conda";
        let lock = lock_form(url);
        assert_eq!(
            lock,
            format!("https://c.example/t/{TOKEN_PLACEHOLDER}/conda-forge/noarch/x-1-0.conda")
        );
        assert_eq!(with_token(&lock, "SECRET-1"), url);
        let json = format!("{{\"channels\":[\"{url}\",\"https://c.example/t/SECRET-1\"]}}");
        let form = lock_form_text(&json);
        assert!(!form.contains("SECRET-1"), "{form}");
        assert_eq!(conda_token(url), Some("SECRET-1"));
    }

    #[test]
    fn dot_segments_and_origins() {
        assert!(no_dot_segments("https://h/a/b.whl"));
        assert!(!no_dot_segments("https://h/a/../b.whl"));
        assert!(!no_dot_segments("https://h/a/%2E%2e/b.whl"));
        assert_eq!(
            origin("https://u:p@Files.Example:443/x").as_deref(),
            Some("https://files.example:443")
        );
        assert_eq!(origin("file:///tmp/x").as_deref(), Some("file://"));
    }
}
