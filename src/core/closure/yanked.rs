//! Yanked releases (PEP 592) in a pip closure: what the index disowned is never taken
//! silently. uv takes a yanked release only when a requirement or constraint pins it exactly
//! (`==`), and says so only in a warning, which pylock.toml does not carry; envbuild reads that
//! warning, records the yank on the entry (`yanked`, the index's reason) and judges it: a
//! release the spec pins exactly is locked with a `YANKED_RELEASE` warning on every `lock`,
//! any other (held by the lock on disk through a constraint) is refused. This module performs
//! no I/O.

use super::canonical_name;
use crate::core::diag::{printable, Diagnostic};
use crate::core::lock::{ClosurePkg, Lock};

/// The code, declared in the one registry ([`crate::core::codes`]).
pub use crate::core::codes::closure::YANKED_RELEASE;

/// The longest reason a lock keeps: an index's text, bounded like any lock value.
const MAX_REASON: usize = 200;

/// One release uv said is yanked: canonical name, version, the index's reason (may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Yank {
    pub name: String,
    pub version: String,
    pub reason: String,
}

/// The yanked releases uv names in its output: lines `` warning: `NAME==VERSION` is yanked ``,
/// optionally followed by ` (reason: "...")`, the reason kept printable and bounded.
pub fn from_uv_output(stderr: &str) -> Vec<Yank> {
    let mut out = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.trim().strip_prefix("warning: `") else {
            continue;
        };
        let Some((dist, tail)) = rest.split_once("` is yanked") else {
            continue;
        };
        let Some((name, version)) = dist.split_once("==") else {
            continue;
        };
        let reason = tail
            .trim()
            .strip_prefix("(reason: \"")
            .map(|r| r.trim_end_matches(')').trim_end_matches('"'))
            .unwrap_or_default();
        out.push(Yank {
            name: canonical_name(name.trim()),
            version: version.trim().to_string(),
            reason: bounded(reason),
        });
    }
    out
}

/// An index's reason as a lock keeps it: printable, one line, at most [`MAX_REASON`] bytes.
fn bounded(reason: &str) -> String {
    let mut out = String::new();
    for c in printable(reason).chars() {
        if out.len() + c.len_utf8() > MAX_REASON {
            break;
        }
        out.push(c);
    }
    out
}

/// Record each of `yanks` on its pip entry of `closure`.
pub fn mark(closure: &mut [ClosurePkg], yanks: &[Yank]) {
    for p in closure.iter_mut().filter(|p| p.kind == "pip") {
        if let Some(y) = yanks
            .iter()
            .find(|y| y.name == p.name && y.version == p.version)
        {
            p.yanked = Some(y.reason.clone());
        }
    }
}

/// Whether `requirements` (the lock's pip lines) pin `name` to exactly `version`:
/// `name==version` or `name[extras]==version`, a marker aside.
fn pinned_exactly(requirements: &[String], name: &str, version: &str) -> bool {
    requirements.iter().any(|r| {
        let r = r.split(';').next().unwrap_or_default();
        let Some((n, v)) = r.split_once("==") else {
            return false;
        };
        let n = n.split('[').next().unwrap_or_default();
        let v = v.trim().trim_start_matches('=');
        canonical_name(n.trim()) == name && v == version
    })
}

/// The judgement of every yanked entry of `lock` (its fleet's included): a warning where the
/// spec pins the release exactly, else an error. Empty when nothing is yanked.
pub fn judge(lock: &Lock) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for l in std::iter::once(lock).chain(&lock.fleet) {
        for p in &l.closure {
            let Some(reason) = &p.yanked else { continue };
            let why = if reason.is_empty() {
                String::new()
            } else {
                format!(" (its reason: \"{reason}\")")
            };
            let what = format!(
                "`{}` {} is yanked on its index `{}`{why}",
                printable(&p.name),
                printable(&p.version),
                crate::core::url::redact(&p.index)
            );
            if pinned_exactly(&l.install.pip, &p.name, &p.version) {
                out.push(
                    Diagnostic::warning(
                        YANKED_RELEASE,
                        format!("{what}; locked because the spec pins it exactly"),
                    )
                    .with_hint(format!(
                        "the index disowns this release: move the pin off {} unless you need \
                         it",
                        printable(&p.version)
                    )),
                );
            } else {
                out.push(
                    Diagnostic::error(
                        YANKED_RELEASE,
                        format!("{what}, and the spec does not pin it exactly"),
                    )
                    .with_hint(format!(
                        "re-resolve without it (`envbuild lock --upgrade-package {}`), or pin it \
                         in the spec (`{}=={}`) to take it knowingly",
                        printable(&p.name),
                        printable(&p.name),
                        printable(&p.version)
                    )),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uv_s_yank_warnings_are_read_and_bounded() {
        let err = "Resolved 3 packages in 4ms\n\
                   warning: `Foo_Bar==1.1` is yanked (reason: \"broken \\\"build\\\"\")\n\
                   warning: `baz==2.0` is yanked\n\
                   warning: something else\n";
        let y = from_uv_output(err);
        assert_eq!(y.len(), 2, "{y:?}");
        assert_eq!(y[0].name, "foo-bar");
        assert_eq!(y[0].version, "1.1");
        assert!(y[0].reason.starts_with("broken"), "{}", y[0].reason);
        assert_eq!(
            y[1],
            Yank {
                name: "baz".into(),
                version: "2.0".into(),
                reason: String::new()
            }
        );
        let long = format!(
            "warning: `a==1` is yanked (reason: \"{}\")",
            "x".repeat(999)
        );
        assert_eq!(from_uv_output(&long)[0].reason.len(), MAX_REASON);
        let ctl = "warning: `a==1` is yanked (reason: \"a\u{1b}[31mred\")";
        assert!(!from_uv_output(ctl)[0].reason.contains('\u{1b}'));
    }

    #[test]
    fn only_an_exact_pin_takes_a_yanked_release() {
        let reqs = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(pinned_exactly(&reqs(&["Foo_Bar==1.1"]), "foo-bar", "1.1"));
        assert!(pinned_exactly(
            &reqs(&["foo[x]==1.1; python_version >= \"3\""]),
            "foo",
            "1.1"
        ));
        assert!(pinned_exactly(&reqs(&["foo===1.1"]), "foo", "1.1"));
        assert!(!pinned_exactly(&reqs(&["foo>=1.0"]), "foo", "1.1"));
        assert!(!pinned_exactly(&reqs(&["foo==1.0"]), "foo", "1.1"));
        assert!(!pinned_exactly(&reqs(&["bar==1.1"]), "foo", "1.1"));
    }
}
