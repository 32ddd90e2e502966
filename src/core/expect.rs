//! What a locked environment must look like when the smoke test runs: the lock turned into the
//! script's [`Expectations`]. Used by `render` (the image's `expect.json`), `image`, `test` and
//! `smoke --lock`, so every path checks the same facts. This module performs no I/O.

use crate::core::lock::Lock;
use crate::core::smoke::Expectations;

/// Packages beside torch whose installed version the smoke test compares, when the lock has them.
const COMPANIONS: &[&str] = &["torchvision", "torchaudio", "numpy"];

/// The expectations a lock implies. Pure; anything the lock does not know stays `None`/empty so
/// the script only reports it.
pub fn expectations_from_lock(lock: &Lock) -> Expectations {
    let mut packages = std::collections::BTreeMap::new();
    for name in COMPANIONS {
        if let Some(v) = lock.packages.get(*name) {
            packages.insert((*name).to_string(), strip_local(v).to_string());
        }
    }
    // pip extras are Python distributions, so importlib.metadata can check them; conda-only
    // extras (mkl, cuda-version) have no Python metadata and are left out.
    for req in &lock.install.pip {
        if let Some((name, version)) = pip_name_version(req) {
            if name == "torch" {
                continue;
            }
            packages.insert(name, strip_local(&version).to_string());
        }
    }
    let mut arch_list = lock.arch_list.clone();
    arch_list.extend(lock.ptx.iter().cloned());
    Expectations {
        torch: lock
            .packages
            .get("torch")
            .map(|v| strip_local(v).to_string()),
        cuda: cuda_major_minor(&lock.cuda),
        cudnn: lock.cudnn.clone(),
        nccl: lock.nccl.clone(),
        arch_list,
        python: lock.packages.get("python").cloned(),
        packages,
        min_shm_bytes: parse_size_bytes(&lock.image.shm_size),
    }
}

/// `2.5.1+cu124` -> `2.5.1`: torch reports the local tag only for some builds.
fn strip_local(v: &str) -> &str {
    v.split_once('+').map_or(v, |(base, _)| base)
}

/// `12.4.1` -> `12.4`; `12.9` stays; anything else gives `None` (the script then only reports).
fn cuda_major_minor(cuda: &str) -> Option<String> {
    let mut parts = cuda.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(major) && numeric(minor)).then(|| format!("{major}.{minor}"))
}

/// `name[extra]==1.0` -> (`name`, `1.0`), name lower-cased with `_` as `-` (PEP 503 style).
fn pip_name_version(req: &str) -> Option<(String, String)> {
    let (name, version) = req.split_once("==")?;
    let name = name.split('[').next()?.trim();
    let version = version.trim_start_matches('=').trim();
    if name.is_empty() || version.is_empty() {
        return None;
    }
    Some((
        name.to_ascii_lowercase().replace('_', "-"),
        version.to_string(),
    ))
}

/// Docker's size syntax (`16g`, `512m`, `1024k`, `100b`, `65536`), binary units, as bytes.
pub fn parse_size_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let mult: u64 = match c.to_ascii_lowercase() {
                'b' => 1,
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                _ => return None,
            };
            (&s[..i], mult)
        }
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("16g"), Some(16 << 30));
        assert_eq!(parse_size_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_size_bytes("100b"), Some(100));
        assert_eq!(parse_size_bytes("4096"), Some(4096));
        assert_eq!(parse_size_bytes("g"), None);
        assert_eq!(parse_size_bytes("1t"), None);
        assert_eq!(parse_size_bytes("-1g"), None);
        assert_eq!(parse_size_bytes("99999999999999999999g"), None);
    }

    #[test]
    fn cuda_and_versions() {
        assert_eq!(cuda_major_minor("12.4.1").as_deref(), Some("12.4"));
        assert_eq!(cuda_major_minor("12.9").as_deref(), Some("12.9"));
        assert_eq!(cuda_major_minor("12"), None);
        assert_eq!(strip_local("2.5.1+cu124"), "2.5.1");
        assert_eq!(
            pip_name_version("Some_Pkg[extra]==1.0.0"),
            Some(("some-pkg".into(), "1.0.0".into()))
        );
        assert_eq!(pip_name_version("pkg>=1"), None);
    }
}
