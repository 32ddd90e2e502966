//! What a locked environment must look like when the smoke test runs: the lock turned into the
//! script's [`Expectations`]. Used by `render` (the image's `expect.json`), `image`, `test` and
//! `smoke --lock`, so every path checks the same facts. This module performs no I/O.

use crate::core::lock::Lock;
use crate::core::rules::parse_size;
use crate::core::smoke::{CondaRecord, Expectations};

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
    let (arch_list, unconfirmed) = arch_and_unconfirmed(lock);
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
        machine: crate::core::platform::machine(lock.platform).map(str::to_string),
        packages,
        // pip entries are Python distributions (importlib.metadata); conda entries are
        // `conda-meta` records, compared with their build too.
        closure: lock
            .closure
            .iter()
            .filter(|p| p.kind != "conda")
            .map(|p| (p.name.clone(), p.version.clone()))
            .collect(),
        conda_closure: lock
            .closure
            .iter()
            .filter(|p| p.kind == "conda")
            .map(|p| {
                let record = CondaRecord {
                    version: p.version.clone(),
                    build: p.build.clone().unwrap_or_default(),
                };
                (p.name.clone(), record)
            })
            .collect(),
        closure_ignore: if lock.closure.is_empty() {
            Vec::new()
        } else {
            lock.image.base_provides.clone()
        },
        min_shm_bytes: parse_size(&lock.image.shm_size).ok().map(|s| s.bytes),
        target_ccs: lock.gpus.iter().map(|g| g.cc.clone()).collect(),
        unconfirmed,
        check_timeout_s: None,
        budget_s: None,
    }
}

/// The arch list the image must carry and the expectation keys whose facts are unconfirmed,
/// from the lock's `unconfirmed`. The script's keys are the lock's for `cuda`, `cudnn`, `nccl`,
/// `arch_list` and `ptx`; it has no key for one entry, so an entry the table is unsure of
/// (`arch_list:sm_37`) is not expected at all: a missing one then cannot fail the run, and
/// `arch_coverage` still checks every GPU the test sees.
fn arch_and_unconfirmed(lock: &Lock) -> (Vec<String>, Vec<String>) {
    let unsure_entry = |a: &String| lock.unconfirmed.contains(&format!("arch_list:{a}"));
    let arch_list = lock
        .arch_list
        .iter()
        .chain(&lock.ptx)
        .filter(|a| !unsure_entry(a))
        .cloned()
        .collect();
    let unconfirmed = lock
        .unconfirmed
        .iter()
        .filter(|k| !k.starts_with("arch_list:"))
        .cloned()
        .collect();
    (arch_list, unconfirmed)
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
    // A marker the lock kept holds for the image; its text is no part of the version.
    let req = req.split(';').next().unwrap_or(req);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn committed(text: &str) -> Lock {
        Lock::from_toml(text).expect("a committed lock")
    }

    #[test]
    fn target_gpus_and_unconfirmed_facts_reach_the_script() {
        let lock = committed(include_str!("../../specs/torch26-cu118-py39/envbuild.lock"));
        assert_eq!(lock.unconfirmed, ["arch_list:sm_37"]);
        let e = expectations_from_lock(&lock);
        let ccs: Vec<&str> = lock.gpus.iter().map(|g| g.cc.as_str()).collect();
        assert_eq!(e.target_ccs, ccs);
        assert!(!e.target_ccs.is_empty());
        // The doubtful sm_37 is not expected; every confirmed entry still is.
        assert!(
            !e.arch_list.contains(&"sm_37".to_string()),
            "{:?}",
            e.arch_list
        );
        assert_eq!(e.arch_list.len(), lock.arch_list.len() - 1);
        assert!(e.unconfirmed.is_empty());
        // The budget is the caller's (its own time limit), never the lock's.
        assert_eq!((e.check_timeout_s, e.budget_s), (None, None));

        let mut lock = lock;
        lock.unconfirmed = vec!["cudnn".into(), "nccl".into(), "ptx".into()];
        lock.ptx = vec!["compute_90".into()];
        let e = expectations_from_lock(&lock);
        assert_eq!(e.unconfirmed, ["cudnn", "nccl", "ptx"]);
        assert!(e.arch_list.contains(&"compute_90".to_string()));
        assert!(e.arch_list.contains(&"sm_37".to_string()));
        let back = Expectations::from_json(&e.to_json(), "x").unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn a_conda_closure_is_expected_as_records_and_its_pip_part_as_distributions() {
        let mut lock = committed(include_str!(
            "../../tests/fixtures/conda-closure/envbuild.lock"
        ));
        let e = expectations_from_lock(&lock);
        assert_eq!(
            e.closure,
            BTreeMap::from([("einops".to_string(), "0.8.1".to_string())])
        );
        let conda = lock.closure.iter().filter(|p| p.kind == "conda").count();
        assert!(conda >= 10, "{conda}");
        assert_eq!(e.conda_closure.len(), conda);
        assert_eq!(
            e.conda_closure["pytorch"],
            CondaRecord {
                version: "2.10.0".into(),
                build: "cuda129_generic_py312_h3b5d2a4_200".into()
            }
        );
        assert!(!e.closure.contains_key("pytorch") && !e.conda_closure.contains_key("einops"));
        assert!(e.closure_ignore.is_empty());
        let json = e.to_json();
        assert!(
            json.contains(r#""numpy": {"#) && json.contains(r#""build": "py312h33ff503_0""#),
            "{json}"
        );
        assert_eq!(Expectations::from_json(&json, "x").unwrap(), e);

        // A record without a build string in the lock is compared by version only.
        let numpy = lock.closure.iter_mut().find(|p| p.name == "numpy").unwrap();
        numpy.build = None;
        let e = expectations_from_lock(&lock);
        assert_eq!(e.conda_closure["numpy"].build, "");
        assert!(!e.to_json().contains(r#""build": """#));
        // A lock without a closure expects none.
        let plain = committed(include_str!(
            "../../specs/conda-forge-torch210/envbuild.lock"
        ));
        let e = expectations_from_lock(&plain);
        assert!(e.closure.is_empty() && e.conda_closure.is_empty());
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
