//! Classifying pip lines (an environment file's `- pip:` list, or a requirements.txt): index
//! options (which name the wheel variant), torch with its local version, the companions, and
//! the extra packages. This module performs no I/O.

use super::codes::IMPORT_CHANGED;
use super::found::Extra;
use super::scan::Scan;
use crate::core::compat::variant_cuda;
use crate::core::diag::Diagnostic;
use crate::core::spec::codes::{INVALID_SPEC, UNNAMED_REFERENCE};
use crate::core::spec::{
    bare_reference, parse_pip_pkg, BareReference, PipPkg, PkgParse, REFERENCE_UNPINNED,
};
use crate::core::version::Version;

/// Options whose value is an index or a wheel location.
const INDEX_OPTIONS: [&str; 5] = [
    "--index-url",
    "--extra-index-url",
    "-i",
    "-f",
    "--find-links",
];

/// One pip line; `scan.line` is already set to it.
pub(super) fn line(scan: &mut Scan, line: &str) {
    let line = match line.find(" #") {
        Some(c) => &line[..c],
        None => line,
    }
    .trim();
    if line.is_empty() || line.starts_with('#') {
        return;
    }
    if crate::core::url::redact_text(line) != line {
        return scan.drop_item(line, crate::core::url::CARRIES_SECRET);
    }
    if let Some((opt, url)) = index_option(line) {
        return index(scan, line, opt, &url);
    }
    if !line.starts_with('-') {
        if let Some((req, marker)) = line.split_once(';') {
            return marked(scan, line, req.trim(), marker.trim());
        }
        if let Some((req, options)) = split_options(line) {
            trailing_options(scan, req, options);
            return self::line(scan, req);
        }
    }
    if let Some(b) = bare_reference(line) {
        return reference(scan, line, &b);
    }
    if let Some(why) = other_file(line) {
        return scan.drop_item(line, why);
    }
    if line.starts_with("-e ") || line.starts_with("--editable") {
        return scan.drop_item(
            line,
            "an editable install of a local directory (usually the project itself): the image does not carry the project's source; build a wheel of it into the spec's `[image] wheels` directory, or install it in the container",
        );
    }
    if line.starts_with('-') {
        return scan.drop_item(
            line,
            "pip options other than package indexes have no place in the spec; pass them to pip yourself if the build needs them",
        );
    }
    let name = line
        .split(['=', '<', '>', '!', '~', ' ', '[', '@', ';'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
        .replace('_', "-");
    if name != "torch" && scan.machine_only(line, &name, super::platform::Installer::Pip) {
        return;
    }
    // Spaces inside a requirement mean nothing to pip (`numba == 0.65.0`); a URL keeps them.
    let compact: String;
    let line = if line.contains("://") {
        line
    } else {
        compact = line.chars().filter(|c| !c.is_whitespace()).collect();
        compact.as_str()
    };
    if local_path(line) {
        return scan.drop_item(line, "a local path (a directory or an archive of the project's own checkout): the image does not carry the project's files; build a wheel of it into the spec's `[image] wheels` directory, or install it in the container");
    }
    match parse_pip_pkg(line) {
        PkgParse::Ok(p) => pinned(scan, p),
        PkgParse::Unpinned { why, .. } if why == REFERENCE_UNPINNED => {
            scan.unpinned_reference(line, why)
        }
        PkgParse::Unpinned { name, .. } => ranged(scan, line, &name),
        PkgParse::Invalid(m) => scan.invalid(format!("pip: {m}")),
    }
}

/// `req; marker`: the marker judged for the target; the requirement is kept without it when it
/// holds (said), dropped when it does not. A marker that asks for a Python the file leaves open
/// is carried on its extra, normalised, for the lock to judge once it chose the Python; any
/// other marker that cannot be judged is refused at its line.
fn marked(scan: &mut Scan, line: &str, req: &str, marker: &str) {
    let refuse = |scan: &mut Scan, why: String, hint: &str| {
        let d = Diagnostic::error(
            INVALID_SPEC,
            format!("`{line}` in {}: {why}", scan.shown_file()),
        )
        .with_hint(hint);
        scan.error(d);
    };
    let parsed = match crate::core::marker::parse(marker) {
        Ok(m) => m,
        Err(why) => return refuse(
            scan,
            why,
            "write the requirement without the marker if the target needs it, or remove the line",
        ),
    };
    let python = scan.found.python.as_deref().and_then(Version::parse);
    let env = crate::core::marker::Env {
        machine: scan.machine,
        windows: false,
        python: python.as_ref(),
    };
    let shown = format!(
        "Linux {}{}",
        scan.machine,
        python
            .as_ref()
            .map(|p| format!(", Python {p}"))
            .unwrap_or_default()
    );
    match parsed.holds(&env) {
        Ok(true) => {
            scan.note(
                IMPORT_CHANGED,
                format!("`{line}`: the marker holds for the target ({shown}), so the spec keeps `{req}`"),
            );
            self::line(scan, req);
        }
        Ok(false) => scan.drop_item(line, &format!("its marker excludes the target ({shown})")),
        Err(_) if python.is_none() && parsed.needs_python() => {
            let name = req
                .split(['=', '<', '>', '!', '~', ' ', '[', '@'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if ["torch", "torchvision", "torchaudio"].contains(&name.as_str()) {
                return refuse(scan, format!("the marker on `{name}`, which the spec manages through its own keys, depends on the Python, which the file leaves open"), "pass `--python X.Y` to judge the marker at import, or write the line without it");
            }
            let before = scan.found.pip.len();
            self::line(scan, req);
            // The extra the line became (none when it was dropped, with its own note).
            if scan.found.pip.len() == before + 1 {
                let x = &mut scan.found.pip[before];
                x.entry = format!("{}; {}", x.entry, parsed.canonical());
            }
        }
        Err(why) => refuse(
            scan,
            why,
            "write the requirement without the marker if the target needs it, or remove the line",
        ),
    }
}

/// A requirement with a range or no version (`tqdm>=4`, `einops`): kept as written (a bare
/// name is any version, `*`), for the resolver (torch, the companions) or the closure (extras)
/// to choose within.
fn ranged(scan: &mut Scan, line: &str, name: &str) {
    let written: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    let at = written
        .find(['<', '>', '=', '!', '~'])
        .unwrap_or(written.len());
    let req = match &written[at..] {
        "" => crate::core::spec::ANY_VERSION.to_string(),
        r => r.to_string(),
    };
    let here = scan.line;
    let f = &mut scan.found;
    if name == "torch" {
        f.torch_pip = Some((req, here));
    } else if let Some(c) = f.companion(name) {
        c.listed = true;
        if req != crate::core::spec::ANY_VERSION {
            c.range = Some((req, here));
        }
    } else {
        f.pip.push(Extra {
            name: name.to_string(),
            entry: written,
            line: here,
        });
    }
}

/// `-r other.txt`, `-c constraints.txt`: another file, which import does not follow; why.
fn other_file(line: &str) -> Option<&'static str> {
    let opt = line.split([' ', '=']).next().unwrap_or("");
    match opt {
        "-r" | "--requirement" => Some("it includes another requirements file, which import does not follow; import that file too and merge what you need into the spec"),
        "-c" | "--constraint" => Some("it names a constraints file, which import does not follow; pin what you need in the spec"),
        _ => None,
    }
}

/// A local directory or archive (`.`, `./pkg`, `submodules/simple-knn`, `dist/x.whl`,
/// `file:///...`): no URL scheme and no `NAME @`, but a path.
fn local_path(line: &str) -> bool {
    let l = line.trim();
    if l.starts_with("file:") {
        return true;
    }
    if l.contains("://") || l.contains(" @ ") || l.contains('@') {
        return false;
    }
    l.starts_with(['.', '/', '~'])
        || l.contains('/')
        || [".whl", ".tar.gz", ".zip"].iter().any(|e| l.ends_with(e))
}

/// A URL without `NAME @`: with `#egg=NAME` it is read as `NAME @ URL` (an editable one as a
/// regular install), and said; without a name it is `UNNAMED_REFERENCE`. Either way a branch,
/// tag or missing ref is then `UNPINNED_VERSION`, as for `NAME @ URL` written out.
fn reference(scan: &mut Scan, line: &str, b: &BareReference) {
    let Some(named) = b.named() else {
        let d = Diagnostic::error(
            UNNAMED_REFERENCE,
            format!(
                "`{line}` in {} installs from a URL without naming the package",
                scan.shown_file()
            ),
        )
        .with_hint(b.hint());
        return scan.error(d);
    };
    let editable = if b.editable {
        "; it is installed as a regular package, not editable (an image has no checkout to edit)"
    } else {
        ""
    };
    scan.note(
        IMPORT_CHANGED,
        format!("`{line}` is written as `{named}` (the name from `#egg=`){editable}"),
    );
    self::line(scan, &named);
}

/// An index option: PyTorch's wheel index names the torch variant (and the lock writes it
/// back); other indexes and find-links locations are carried over to the spec's
/// `pip-index-url`, `pip-extra-index-urls` and `pip-find-links`.
fn index(scan: &mut Scan, line: &str, opt: &str, url: &str) {
    if let Some(v) = index_variant(url) {
        scan.found.pip_variant = Some(v);
        return;
    }
    if url.contains("download.pytorch.org") {
        return scan.drop_item(line, "PyTorch's own wheel location; the lock installs torch from the wheel index of its CUDA variant");
    }
    if let Some(d) = crate::core::resolve::insecure_source(opt, url) {
        scan.notes
            .push(d.with_location(super::location(scan.file, scan.line)));
    }
    let at = (url.to_string(), scan.line);
    let f = &mut scan.found;
    match opt {
        "--index-url" | "-i" => {
            if let Some((old, _)) = f.index_url.replace(at) {
                scan.note(
                    IMPORT_CHANGED,
                    format!("`{line}` replaces the index `{old}` given before (pip uses the last `--index-url`)"),
                );
            }
        }
        "--extra-index-url" => f.extra_index_urls.push(at),
        _ => f.find_links.push(at),
    }
}

/// `torch==2.0.1+cu118 --index-url URL`: the requirement and the options after it. As pip
/// reads a line: the options start at the first word that starts with `-`.
fn split_options(line: &str) -> Option<(&str, &str)> {
    let at = line
        .char_indices()
        .find(|&(i, c)| c == '-' && line[..i].ends_with([' ', '\t']))
        .map(|(i, _)| i)?;
    Some((line[..at].trim_end(), &line[at..]))
}

/// The options after a requirement. pip applies only per-requirement options there (`--hash`,
/// `--config-settings`) and ignores index options, which belong on a line of their own; an
/// index option naming PyTorch's wheel index still says which torch variant the author meant,
/// so it is read as the file's index, and said.
fn trailing_options(scan: &mut Scan, req: &str, options: &str) {
    let words: Vec<&str> = options.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        let next = words.get(i + 1).copied().filter(|w| !w.starts_with('-'));
        let (opt, value, used) = match (words[i].split_once('='), next) {
            (Some((o, v)), _) => (o, v, 1),
            (None, Some(v)) => (words[i], v, 2),
            (None, None) => (words[i], "", 1),
        };
        let shown = words[i..i + used].join(" ");
        i += used;
        if INDEX_OPTIONS.contains(&opt) {
            if let Some(v) = index_variant(value) {
                scan.found.pip_variant.get_or_insert(v);
                scan.note(IMPORT_CHANGED, format!("`{shown}` after `{req}` is read as the file's index: PyTorch's wheel index of that variant, which the lock installs torch from (pip itself ignores index options on a requirement line; they belong on a line of their own)"));
            } else if !value.contains("download.pytorch.org") {
                scan.note(IMPORT_CHANGED, format!("`{shown}` after `{req}` is carried over as a location for the whole install (pip itself ignores index options on a requirement line; they belong on a line of their own)"));
                index(scan, &shown, opt, value);
            } else {
                index(scan, &shown, opt, value);
            }
        } else if opt == "--hash" {
            scan.drop_item(&format!("{shown}` after `{req}"), "the spec pins pip packages by version (the requirement is carried over); pip's hash-checking mode is not");
        } else {
            scan.drop_item(&format!("{shown}` after `{req}"), "per-requirement pip options have no place in the spec; pass them to pip yourself if the build needs them");
        }
    }
}

/// The option and value of an index option line (`--extra-index-url URL` or
/// `--index-url=URL`).
fn index_option(line: &str) -> Option<(&'static str, String)> {
    INDEX_OPTIONS.iter().find_map(|o| {
        line.strip_prefix(o)
            .filter(|r| r.starts_with([' ', '=']))
            .map(|r| (*o, r.trim_start_matches([' ', '=']).to_string()))
    })
}

/// `https://download.pytorch.org/whl/cu124` → `cu124`.
fn index_variant(url: &str) -> Option<String> {
    let rest = url.trim().trim_end_matches('/').rsplit('/').next()?;
    variant_cuda(rest).map(|_| rest.to_string())
}

fn pinned(scan: &mut Scan, p: PipPkg) {
    let line = scan.line;
    let f = &mut scan.found;
    match p.name.as_str() {
        "torch" if p.url.is_none() => {
            // `2.5.1+cu124`: the local version names the wheel variant.
            let (ver, local) = match p.version.split_once('+') {
                Some((v, l)) => (v.to_string(), Some(l.to_string())),
                None => (p.version.clone(), None),
            };
            f.torch_pip = Some((ver, line));
            if let Some(l) = local.filter(|l| variant_cuda(l).is_some()) {
                f.pip_variant = Some(l);
            }
        }
        "torchvision" | "torchaudio" if p.url.is_none() => {
            if let Some(c) = f.companion(&p.name) {
                c.listed = true;
                c.pin = Some((p.version.clone(), line));
            }
        }
        n if scan.auto_added.iter().any(|a| a == n) => {}
        _ => f.pip.push(Extra {
            name: p.name.clone(),
            entry: p.requirement(),
            line,
        }),
    }
}
