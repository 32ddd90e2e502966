//! Classifying the `- pip:` lines of an environment file: index options (which name the
//! wheel variant), torch with its local version, the companions, and the extra packages.
//! This module performs no I/O.

use super::Scan;
use crate::core::compat::variant_cuda;
use crate::core::spec::{parse_pip_pkg, PipPkg, PkgParse};

/// Options whose value is an index or a wheel location.
const INDEX_OPTIONS: [&str; 5] = [
    "--index-url",
    "--extra-index-url",
    "-i",
    "-f",
    "--find-links",
];

/// The lines of one `- pip:` list.
pub(super) fn lines(scan: &mut Scan, pip: &[String]) {
    for line in pip.iter().map(|l| l.trim()) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(url) = index_option(line) {
            if let Some(v) = index_variant(&url) {
                scan.found.pip_variant = Some(v);
            }
            continue;
        }
        match parse_pip_pkg(line) {
            PkgParse::Ok(p) => pinned(scan, p),
            PkgParse::Unpinned { name, .. } => {
                if !scan.found.companion(&name) {
                    scan.unpinned(line, &name, "==");
                }
            }
            PkgParse::Invalid(m) => scan.invalid(format!("pip: {m}")),
        }
    }
}

/// The value of an index option line (`--extra-index-url URL` or `--index-url=URL`).
fn index_option(line: &str) -> Option<String> {
    INDEX_OPTIONS.iter().find_map(|o| {
        line.strip_prefix(o)
            .map(|r| r.trim_start_matches([' ', '=']).to_string())
    })
}

/// `https://download.pytorch.org/whl/cu124` → `cu124`.
fn index_variant(url: &str) -> Option<String> {
    let rest = url.trim().trim_end_matches('/').rsplit('/').next()?;
    variant_cuda(rest).map(|_| rest.to_string())
}

fn pinned(scan: &mut Scan, p: PipPkg) {
    let f = &mut scan.found;
    match p.name.as_str() {
        "torch" => {
            // `2.5.1+cu124`: the local version names the wheel variant.
            let (ver, local) = match p.version.split_once('+') {
                Some((v, l)) => (v.to_string(), Some(l.to_string())),
                None => (p.version.clone(), None),
            };
            f.torch_pip = Some(ver);
            if let Some(l) = local.filter(|l| variant_cuda(l).is_some()) {
                f.pip_variant = Some(l);
            }
        }
        "torchvision" => f.torchvision = true,
        "torchaudio" => f.torchaudio = true,
        n if scan.auto_added.iter().any(|a| a == n) => {}
        _ => f.pip.push(p.requirement()),
    }
}
