//! The one rule per kind of value that reaches a rendered file: image references, sizes,
//! package versions, paths and closure entries. The spec and a `--table` file are checked with these where their
//! values enter, and `render` checks a lock with the same ones, so a lock that locks renders.
//! This module performs no I/O.

use crate::core::image_ref::ImageRef;

/// No spec value needs more: longer ones are refused before they reach any output.
pub const MAX_VALUE_LEN: usize = 200;

/// A Docker image reference pinned by a tag other than `latest`, or by a digest, no longer
/// than a spec value may be. The rule is [`ImageRef::pinned`]'s; this adds only the spec's
/// value length, for the checks that see a value without the spec's safety pass (the table,
/// a lock being rendered).
pub fn image_ref(s: &str) -> Result<(), &'static str> {
    if s.len() > MAX_VALUE_LEN {
        return Err(crate::core::image_ref::NOT_A_REF);
    }
    ImageRef::pinned(s).map(drop)
}

/// A shared-memory size as the run snippets and the engine take it: digits with an optional
/// `k`/`m`/`g` (Docker's short form, parsed by the one size parser), no larger than the Engine
/// API's 64-bit field. Returns it in lower case.
pub fn shm_size(s: &str) -> Result<String, &'static str> {
    match parse_size(s) {
        Ok(size) if size.short && s.trim() == s && !s.starts_with('+') => {
            if size.bytes > i64::MAX as u64 {
                Err("is larger than the engine accepts")
            } else {
                Ok(s.to_ascii_lowercase())
            }
        }
        Ok(_) | Err(SizeError::Syntax) => Err("is not a size such as `16g` or `512m`"),
        Err(SizeError::TooLarge) => Err("is larger than the engine accepts"),
    }
}

/// A size that [`parse_size`] accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub bytes: u64,
    /// Written as digits and at most one unit letter (`16g`, `100b`, `4096`): the spelling that
    /// the spec, docker and the rendered Kubernetes quantity all read the same way.
    pub short: bool,
}

/// Why [`parse_size`] refused a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeError {
    /// Not in the grammar.
    Syntax,
    /// In the grammar, but more bytes than 64 bits hold.
    TooLarge,
}

/// The one size parser: docker's `--shm-size` grammar, binary units. Digits, then optionally a
/// unit `b`, `k`, `m` or `g`, where `k`/`m`/`g` may be followed by `b` or `ib`; case-insensitive,
/// surrounding blanks ignored: `4096`, `100b`, `64k`, `512m`, `512MB`, `512MiB`, `2g`. A leading
/// `+` is tolerated because `--shm-size` always took it.
pub fn parse_size(s: &str) -> Result<Size, SizeError> {
    let t = s.trim();
    let body = t.strip_prefix('+').unwrap_or(t);
    let (digits, unit) = body.split_at(
        body.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(body.len()),
    );
    if digits.is_empty() {
        return Err(SizeError::Syntax);
    }
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(SizeError::Syntax),
    };
    // Only ASCII digits are left, so a parse error is an overflow.
    let n: u64 = digits.parse().map_err(|_| SizeError::TooLarge)?;
    Ok(Size {
        bytes: n.checked_mul(mult).ok_or(SizeError::TooLarge)?,
        short: body.len() == t.len() && unit.len() <= 1,
    })
}

/// An exact package version (`2.5.1`, `0.20.1+cu124`, `1!152.20180717`): letters, digits and
/// `.`, `_`, `-`, `+`, starting with a letter or digit, with an optional epoch.
pub fn version(s: &str) -> bool {
    let s = match s.split_once('!') {
        Some((epoch, rest)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
            rest
        }
        _ => s,
    };
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
}

/// A package name (or an extra's) as PEP 508 has it, `^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`
/// case-insensitive: ASCII letters and digits, with `.`, `_` and `-` only inside, no longer than
/// a spec value. pip and uv refuse any other name at build time, so the spec, import and the
/// lock reader refuse it first.
pub fn package_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(u8::is_ascii_alphanumeric);
    s.len() <= MAX_VALUE_LEN
        && edge(b.first())
        && edge(b.last())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// A real calendar day written `YYYY-MM-DD` (proleptic Gregorian: February 29 only in a leap
/// year, never February 30 or April 31): the table's dates and `table learn`'s.
pub fn date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse::<u32>().ok())
            .flatten()
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    y >= 1 && (1..=days).contains(&d)
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

/// A directory strictly inside the project, named relative to it (`wheels`, `dist/local`):
/// a safe relative path with no empty, `.` or `..` segment, so never the project itself.
pub fn project_subdir(p: &str) -> bool {
    is_safe_path(p, false) && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

/// The longest value a lock may carry (a wheel's URL on PyPI runs past 200 characters): the
/// bound `render` holds every lock value to.
pub const MAX_LOCK_VALUE_LEN: usize = 1024;

/// A non-empty word of ASCII letters, digits and `extra`, no longer than a lock value may be,
/// not starting with `-` (it would read as an option) and free of control characters.
pub fn word(s: &str, extra: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LOCK_VALUE_LEN
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// `len` hex digits, lower case: how a lock writes a sha256 (64) or an md5 (32).
pub fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The values of one closure entry (a lock's `[[closure]]`), as the rules see them.
#[derive(Debug, Clone, Copy)]
pub struct ClosureValues<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub url: &'a str,
    pub index: &'a str,
    pub sha256: &'a str,
    pub build: Option<&'a str>,
    pub subdir: Option<&'a str>,
    pub md5: Option<&'a str>,
}

/// The first value of a closure entry that no rendered file could carry, as (field, what it
/// must be): the rules `render` checks a lock's closure with, applied where an entry enters
/// (a conda solve's record, a pip report's item) so that a lock that locks renders.
pub fn closure_entry(p: ClosureValues<'_>) -> Option<(&'static str, &'static str)> {
    let url_ok = |u: &str| {
        ["https://", "http://", "file:///"]
            .iter()
            .any(|s| u.starts_with(s))
    };
    // The fields a file URL is made of first, so a bad build string is named as such.
    let checks: [(&'static str, bool, &'static str); 10] = [
        (
            "name",
            // conda's own names may start with `_` (`_openmp_mutex`); pip's are PEP 508 names.
            if p.kind == "conda" {
                word(p.name, "._-")
            } else {
                package_name(p.name)
            },
            "a package name",
        ),
        ("version", word(p.version, "._-+!"), "a version"),
        (
            "kind",
            p.kind == "pip" || p.kind == "conda",
            "`pip` or `conda`",
        ),
        (
            "build",
            p.build.is_none_or(|b| word(b, "._+")),
            "a conda build string (letters, digits, `._+`)",
        ),
        (
            "subdir",
            p.subdir.is_none_or(|s| word(s, "-")),
            "a conda subdir",
        ),
        (
            "md5",
            p.md5.is_none_or(|m| lower_hex(m, 32)),
            "an md5 (32 lower-case hex digits)",
        ),
        (
            "url",
            url_ok(p.url) && word(p.url, "._-:/~%+=@"),
            "a file URL of plain characters",
        ),
        (
            "url",
            p.kind != "conda" || p.url.ends_with(".conda") || p.url.ends_with(".tar.bz2"),
            "a conda package file URL (`.conda` or `.tar.bz2`)",
        ),
        (
            "index",
            url_ok(p.index) && word(p.index, "._-:/~%+"),
            "an index URL of plain characters",
        ),
        (
            "sha256",
            lower_hex(p.sha256, 64),
            "a sha256 (64 lower-case hex digits)",
        ),
    ];
    checks
        .iter()
        .find(|(_, ok, _)| !ok)
        .map(|(field, _, rule)| (*field, *rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_real_calendar_days() {
        for ok in [
            "2026-12-01",
            "2024-02-29",
            "2000-02-29",
            "2026-04-30",
            "2026-12-31",
        ] {
            assert!(date(ok), "{ok}");
        }
        for bad in [
            "2026-02-30",
            "2026-02-29",
            "1900-02-29",
            "2026-04-31",
            "2026-13-01",
            "2026-00-10",
            "2026-12-00",
            "0000-01-01",
            "2026-12-1",
            "20261201",
            "2026-1x-01",
            "+026-12-01",
            "2026-12-01 ",
        ] {
            assert!(!date(bad), "{bad}");
        }
    }

    #[test]
    fn package_names_are_pep_508_names() {
        for ok in [
            "a",
            "Z9",
            "torch",
            "nvidia-cublas-cu12",
            "zope.interface",
            "typing_extensions",
        ] {
            assert!(package_name(ok), "{ok}");
        }
        let long = "a".repeat(MAX_VALUE_LEN + 1);
        for bad in [
            "", "foo_", "foo.", "foo-", "-foo", "_foo", ".foo", "fo o", "foo+", "é", &long,
        ] {
            assert!(!package_name(bad), "{bad}");
        }
    }

    #[test]
    fn image_references_must_be_pinned_single_words() {
        for ok in [
            "python:3.11-slim-bookworm",
            "nvcr.io/nvidia/pytorch:24.05-py3",
            "localhost:5000/img:1.0",
            "nvidia/cuda:12.4.1-cudnn-RUNTIME-ubuntu22.04",
            &format!("busybox@sha256:{}", "a".repeat(64)),
            &format!("busybox:1.36@sha256:{}", "a".repeat(64)),
        ] {
            assert_eq!(image_ref(ok), Ok(()), "{ok}");
        }
        for bad in [
            "python",
            "python:latest",
            "localhost:5000/img",
            "img@sha256:zz",
            "busybox AS evil FROM alpine:3",
            "busybox:1 AS x",
            "Python:3.11",
            "-x:1",
            "/x:1",
            "x:",
            "x:-1",
            "x//y:1",
            "",
        ] {
            assert!(image_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_are_short_docker_sizes_the_engine_takes() {
        assert_eq!(shm_size("16G").as_deref(), Ok("16g"));
        assert_eq!(shm_size("4096").as_deref(), Ok("4096"));
        for bad in [
            "999999999999g",
            "99999999999999999999",
            "512mb",
            " 1g",
            "+1g",
            "1t",
            "g",
        ] {
            assert!(shm_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_paths_and_subdirectories() {
        assert!(version("0.20.1+cu124") && version("1!152.20180717"));
        for bad in ["*", "", "2.*", ">=1", "1 2", "-1", "1;x"] {
            assert!(!version(bad), "{bad}");
        }
        assert!(is_safe_path("wheels/local", false));
        assert!(!is_safe_path("../etc", false));
        assert!(!is_safe_path("/abs", false));
        assert!(is_safe_path("/data", true));
        assert!(!is_safe_path("/data/../x", true));
        assert!(!is_safe_path("---", false));
        assert!(!is_safe_path("/data/-rf", true));
        assert!(project_subdir("wheels") && project_subdir("dist/local.d"));
        for bad in [
            ".", "./", "./wheels", "a/./b", "a//b", "a/", "..", "a/..", "/w",
        ] {
            assert!(!project_subdir(bad), "{bad}");
        }
    }

    fn bytes(s: &str) -> Option<u64> {
        parse_size(s).ok().map(|s| s.bytes)
    }

    #[test]
    fn sizes_in_docker_grammar() {
        for (text, want, short) in [
            ("16g", 16u64 << 30, true),
            ("512M", 512 << 20, true),
            ("100b", 100, true),
            ("100B", 100, true),
            ("4096", 4096, true),
            ("0", 0, true),
            ("64k", 64 << 10, true),
            (" 2g ", 2 << 30, true),
            ("512mb", 512 << 20, false),
            ("512MiB", 512 << 20, false),
            ("1Gb", 1 << 30, false),
            ("8kib", 8 << 10, false),
            ("+1g", 1 << 30, false),
        ] {
            assert_eq!(
                parse_size(text),
                Ok(Size { bytes: want, short }),
                "{text:?}"
            );
        }
        for bad in [
            "", "g", "mb", "1t", "-1g", "1.5g", "1 g", "1gg", "1bb", "1ib", "1mi", "++1g", "0x10",
        ] {
            assert_eq!(parse_size(bad), Err(SizeError::Syntax), "{bad:?}");
        }
        assert_eq!(
            parse_size("99999999999999999999g"),
            Err(SizeError::TooLarge)
        );
        assert_eq!(parse_size("99999999999g"), Err(SizeError::TooLarge));
        assert_eq!(bytes("17179869184g"), None);
    }
}
