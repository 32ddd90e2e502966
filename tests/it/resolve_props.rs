//! Property tests of resolution against the real, embedded table, over specs generated from the
//! grammar (sources, releases and ranges, CUDA selectors, drivers, GPUs, Pythons, platforms):
//! every spec that locks satisfies every confirmed fact of the table, and every hint that names
//! values, applied to the spec, locks it without an error. Case counts are bounded so CI time
//! stays fixed.

use envbuild::core::compat::{variant_of, Confidence, Table};
use envbuild::core::lock::{DriverMode, Lock};
use envbuild::core::resolve::{parse_spec as parse, resolve};
use envbuild::core::spec::{Format, Platform, Source, Spec};
use envbuild::core::version::{Cc, Version};
use proptest::prelude::*;
use std::sync::OnceLock;

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Table::embedded().expect("embedded table"))
}

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

/// A generated spec, as the keys of its file.
#[derive(Debug, Clone)]
struct Gen {
    python: &'static str,
    pytorch: String,
    /// 0 PyPI, 1 index (inferred), 2 index (named), 3 conda-forge, 4 pytorch channel.
    source: u8,
    cuda: String,
    driver: Option<&'static str>,
    gpus: Vec<&'static str>,
    platform: &'static str,
    glibc: Option<&'static str>,
    forward_compat: bool,
}

impl Gen {
    fn text(&self) -> String {
        let mut s = format!(
            "name = \"p\"\npython = \"{}\"\npytorch = \"{}\"\n",
            self.python, self.pytorch
        );
        match self.source {
            0 => {}
            1 => s.push_str(&format!("cuda = \"{}\"\n", self.cuda)),
            2 => s.push_str(&format!(
                "source = \"pytorch-index\"\ncuda = \"{}\"\n",
                self.cuda
            )),
            3 => s.push_str(&format!(
                "channels = [\"conda-forge\"]\ncuda = \"{}\"\n",
                self.cuda
            )),
            _ => s.push_str(&format!("pytorch-cuda = \"{}\"\n", self.cuda)),
        }
        s.push_str(&format!("\n[target]\nplatform = \"{}\"\n", self.platform));
        if let Some(d) = self.driver {
            s.push_str(&format!("driver = \"{d}\"\n"));
        }
        if !self.gpus.is_empty() {
            let g: Vec<String> = self.gpus.iter().map(|g| format!("\"{g}\"")).collect();
            s.push_str(&format!("gpus = [{}]\n", g.join(", ")));
        }
        if let Some(g) = self.glibc {
            s.push_str(&format!("glibc = \"{g}\"\n"));
        }
        if self.forward_compat {
            s.push_str("forward-compat = true\n");
        }
        s
    }
}

fn torch_versions() -> Vec<String> {
    let mut out: Vec<String> = table()
        .torch
        .iter()
        .map(|t| t.version.to_string())
        .collect();
    // Ranges and floating versions, whose hint names a release.
    for r in [
        "latest",
        ">=2.3,<2.5a0",
        "2.*",
        ">=2.0,<2.6",
        "~=2.5.0",
        "<2.7",
        "2.9",
    ] {
        out.push(r.into());
    }
    out
}

fn gen() -> impl Strategy<Value = Gen> {
    let cudas = vec![
        "10.2", "11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0", "13.2",
    ];
    let drivers = vec![
        "418.87.01",
        "450.80.02",
        "470.82.01",
        "525.60.13",
        "535.104.05",
        "550.54.15",
        "560.35.05",
        "570.124.06",
        "575.57.08",
        "580.65.06",
        "580.95.05",
        "590.44.01",
        "595.45.04",
    ];
    let gpus = vec![
        "K80",
        "P100",
        "V100",
        "T4",
        "A100",
        "RTX 4090",
        "H100",
        "B200",
        "RTX 5090",
        "8.6",
        "12.1",
        "Jetson Thor",
    ];
    // Mostly exact; some ranges, whose hint must name a Python that locks.
    let pythons = vec![
        "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", ">=3.8", "<3.9", "3.*", ">=3.12",
    ];
    let platforms = vec![
        "linux-64",
        "linux-64",
        "linux-64",
        "linux-64",
        "win-64",
        "linux-aarch64",
    ];
    (
        prop::sample::select(pythons),
        prop::sample::select(torch_versions()),
        0u8..5,
        prop::sample::select(cudas),
        prop::option::weighted(0.85, prop::sample::select(drivers)),
        prop::collection::vec(prop::sample::select(gpus), 0..3),
        prop::sample::select(platforms),
        prop::option::weighted(0.2, prop::sample::select(vec!["2.17", "2.28", "2.35"])),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(python, pytorch, source, cuda, driver, gpus, platform, glibc, forward_compat)| Gen {
                python,
                pytorch,
                source,
                cuda: cuda.to_string(),
                driver,
                gpus,
                platform,
                glibc,
                forward_compat,
            },
        )
        // Mostly a CUDA the release publishes from that source, so that many specs lock.
        .prop_flat_map(|g| {
            (
                Just(g),
                any::<prop::sample::Index>(),
                prop::bool::weighted(0.75),
            )
        })
        .prop_map(|(mut g, i, real)| {
            let published = published_cuda(&g);
            if real && !published.is_empty() {
                g.cuda = i.get(&published).clone();
            }
            g
        })
}

/// The CUDA selectors the generated release publishes from the generated source.
fn published_cuda(g: &Gen) -> Vec<String> {
    let Some(t) = Version::parse(&g.pytorch).and_then(|p| table().torch_row(&p)) else {
        return Vec::new();
    };
    let list: Vec<Version> = match g.source {
        1 | 2 => t
            .variants
            .iter()
            .filter_map(|var| envbuild::core::compat::variant_cuda(var))
            .collect(),
        3 => t.conda_forge.clone(),
        4 => t.pytorch_channel.clone(),
        _ => Vec::new(),
    };
    list.iter().map(|v| v.to_string()).collect()
}

use crate::support::hint_apply::apply_hint as apply;

/// The alternatives a hint proposes, when it proposes values (`use key = "value"`,
/// `pin it: key = "value"`); hints with "e.g." show syntax and claim nothing.
fn proposals(hint: &str) -> Vec<&str> {
    let body = match hint
        .strip_prefix("use ")
        .or_else(|| hint.strip_prefix("pin it: "))
    {
        Some(b) if b.contains(" = ") => b,
        _ => return Vec::new(),
    };
    let body = body.split(": it satisfies").next().unwrap();
    body.split(", or ").filter(|a| a.contains(" = ")).collect()
}

fn assert_locks(text: &str, why: &str) {
    let spec = parse(text, Format::Toml, "hinted", table())
        .unwrap_or_else(|e| panic!("{why}: the hinted spec does not parse:\n{text}\n{e}"));
    let r = resolve(&spec, table(), "0");
    assert!(
        r.lock.is_some() && !r.has_errors(),
        "{why}: the hinted spec does not lock:\n{text}\n{:#?}",
        r.diagnostics
    );
}

/// A cubin sm_XY serves sm_XZ with Z >= Y (same major); PTX compute_XY serves XY and higher.
fn served(cubins: &[Cc], ptx: &[Cc], device: Cc) -> bool {
    cubins
        .iter()
        .any(|c| c.major == device.major && c.minor <= device.minor)
        || ptx.iter().any(|p| *p <= device)
}

fn has_cubin(cubins: &[Cc], device: Cc) -> bool {
    served(cubins, &[], device)
}

/// The build's GPU code on linux-64 at its most generous reading (entries in doubt present;
/// unknown PTX as any architecture of the build), when the list as a whole is confirmed.
fn build_code(spec: &Spec, lock: &Lock) -> Option<(Vec<Cc>, Vec<Cc>)> {
    let series = v(&v(&lock.packages["torch"]).major_minor());
    let (arch, ptx, confidence, ptx_confidence) = match spec.source {
        Source::CondaForge => {
            let b = table().conda_forge_build(&v(&lock.cuda))?;
            (b.arch.clone(), b.ptx.clone(), b.confidence, b.confidence)
        }
        _ => {
            let variant = match spec.source {
                Source::PytorchChannel => variant_of(spec.pytorch_cuda.as_ref()?),
                _ => lock.cuda_variant.clone()?,
            };
            let w = table().wheel_row(&series, &variant)?;
            (
                w.arch.clone(),
                w.ptx.clone(),
                w.confidence,
                w.ptx_confidence,
            )
        }
    };
    if confidence == Confidence::Unconfirmed {
        return None;
    }
    let ptx = if ptx_confidence == Confidence::Unconfirmed {
        arch.clone()
    } else {
        ptx
    };
    Some((arch, ptx))
}

/// A lock breaks no confirmed fact of the table.
fn check_lock(spec: &Spec, lock: &Lock) {
    let t = table();
    let torch = t.torch_row(&v(&lock.packages["torch"])).unwrap();
    let py = v(&spec.python.major_minor());
    assert!(
        torch.python.contains(&py),
        "Python {py} with torch {}",
        torch.version
    );
    let os = spec.target.platform.os();
    let cuda = v(&lock.cuda);
    let native = t.native_driver(&cuda, os);
    let floor = t.family_floor(cuda.major(), os);
    let confirmed = |c: Confidence| c != Confidence::Unconfirmed;
    if let Some(d) = &spec.target.driver {
        if lock.driver_mode != Some(DriverMode::ForwardCompat) {
            match &floor {
                // Nothing below the family floor runs any toolkit of the family.
                Some(f) if confirmed(f.confidence) => {
                    assert!(
                        *d >= f.version,
                        "driver {d} below the {} floor {}",
                        cuda.major(),
                        f.version
                    )
                }
                None => {
                    if let Some(n) = native.as_ref().filter(|n| confirmed(n.confidence)) {
                        assert!(
                            *d >= n.version,
                            "driver {d} below CUDA {cuda}'s {}",
                            n.version
                        )
                    }
                }
                _ => {}
            }
            if let Some(n) = native.as_ref().filter(|n| confirmed(n.confidence)) {
                if lock.driver_mode == Some(DriverMode::Native) {
                    assert!(
                        *d >= n.version,
                        "native mode with driver {d} < {}",
                        n.version
                    );
                }
            }
        }
        for g in &spec.target.gpus {
            let m = t.find_gpu(g).unwrap();
            let min = m
                .row
                .filter(|r| confirmed(r.confidence))
                .and_then(|r| r.min_driver.clone());
            if let Some(min) = min {
                assert!(*d >= min, "{g} needs driver {min}, the target has {d}");
            }
        }
    }
    if spec.target.platform != Platform::Linux64 {
        return;
    }
    let Some((cubins, ptx)) = build_code(spec, lock) else {
        return;
    };
    let certainly_minor_compat = spec.target.driver.as_ref().is_some_and(|d| {
        !spec.target.forward_compat
            && native
                .as_ref()
                .is_some_and(|n| confirmed(n.confidence) && *d < n.version)
    });
    for g in &spec.target.gpus {
        let cc = t.find_gpu(g).unwrap().cc;
        assert!(
            served(&cubins, &ptx, cc),
            "{g} ({cc}) has no kernel in {cubins:?} + PTX {ptx:?}"
        );
        // PTX JIT needs the native driver.
        assert!(
            has_cubin(&cubins, cc) || !certainly_minor_compat,
            "{g} ({cc}) runs only through PTX, under minor-version compatibility"
        );
    }
    if let (Some(g), Source::PytorchIndex | Source::Pypi) = (&spec.target.glibc, spec.source) {
        if confirmed(torch.glibc_confidence) {
            assert!(*g >= v(&lock.glibc_min), "glibc {g} < {}", lock.glibc_min);
        }
    }
}

fn check(g: &Gen) {
    let text = g.text();
    let spec = match parse(&text, Format::Toml, "p", table()) {
        Ok(s) => s,
        Err(e) => {
            // A python hint and a pytorch hint are claims about the spec with both pinned:
            // each alternative is applied with the other errors' first proposals.
            let errors: Vec<Vec<&str>> = e
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.hint.as_deref().map(proposals).unwrap_or_default())
                .collect();
            for (i, alts) in errors.iter().enumerate() {
                let others: Option<Vec<&str>> = (errors.iter().enumerate())
                    .filter(|(j, _)| *j != i)
                    .map(|(_, a)| a.first().copied())
                    .collect();
                let Some(others) = others else { continue };
                for alt in alts {
                    let hinted = others.iter().fold(apply(&text, alt), |t, o| apply(&t, o));
                    assert_locks(&hinted, &format!("{alt} with {others:?}\n{text}"));
                }
            }
            return;
        }
    };
    let r = resolve(&spec, table(), "0");
    if let (Some(lock), false) = (&r.lock, r.has_errors()) {
        check_lock(&spec, lock);
    }
    for d in r.diagnostics.iter().filter(|d| d.is_error()) {
        for alt in d.hint.as_deref().map(proposals).unwrap_or_default() {
            assert_locks(&apply(&text, alt), &format!("{}: {alt}\n{text}", d.code));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn locks_keep_confirmed_facts_and_hints_lock(g in gen()) {
        check(&g);
    }
}

#[test]
fn the_known_wrong_cases_now_fail() {
    // torch 2.8.0 cu128 starts at sm_70: no PTX of it could serve a P100 (sm_60).
    let p100 = Gen {
        python: "3.11",
        pytorch: "2.8.0".into(),
        source: 1,
        cuda: "12.8".into(),
        driver: Some("570.124.06"),
        gpus: vec!["P100"],
        platform: "linux-64",
        glibc: None,
        forward_compat: false,
    };
    // PyPI's 2.14.1 is CUDA 13: below the confirmed 13.x floor on R550.
    let pypi = Gen {
        python: "3.12",
        pytorch: "2.14.1".into(),
        source: 0,
        driver: Some("550.54.15"),
        gpus: vec![],
        ..p100.clone()
    };
    for (g, code) in [(p100, "ARCH_NOT_IN_WHEEL"), (pypi, "DRIVER_TOO_OLD")] {
        let spec = parse(&g.text(), Format::Toml, "p", table()).unwrap();
        let r = resolve(&spec, table(), "0");
        assert!(r.lock.is_none(), "{g:?} locked");
        assert!(
            r.diagnostics.iter().any(|d| d.code == code && d.is_error()),
            "{:#?}",
            r.diagnostics
        );
        check(&g);
    }
}

#[test]
fn a_pytorch_range_chooses_the_newest_release_of_its_range_that_locks() {
    let base = Gen {
        python: "3.10",
        pytorch: ">=2.3,<2.5a0".into(),
        source: 1,
        cuda: "12.1".into(),
        driver: Some("535.104.05"),
        gpus: vec!["A100"],
        platform: "linux-64",
        glibc: None,
        forward_compat: false,
    };
    let chosen = |g: &Gen| {
        parse(&g.text(), Format::Toml, "p", table())
            .unwrap()
            .pytorch
    };
    assert_eq!(chosen(&base), v("2.4.1"));
    // On the pytorch channel, never above its last release.
    let channel = Gen {
        pytorch: "latest".into(),
        source: 4,
        ..base.clone()
    };
    let last = table()
        .channel_row("pytorch")
        .unwrap()
        .last_torch
        .clone()
        .unwrap();
    assert_eq!(chosen(&channel), last);
    check(&base);
    check(&channel);
}

#[test]
fn a_python_range_chooses_a_version_that_locks_or_refuses_with_a_proven_hint() {
    let base = Gen {
        python: "<3.9",
        pytorch: "2.5.1".into(),
        source: 1,
        cuda: "12.4".into(),
        driver: Some("550.54.15"),
        gpus: vec!["A100"],
        platform: "linux-64",
        glibc: None,
        forward_compat: false,
    };
    // torch 2.5.1 has no Python below 3.9: nothing satisfies, and the hint (widening python)
    // names a Python that locks, never 3.8.
    let e = parse(&base.text(), Format::Toml, "p", table()).unwrap_err();
    let d = &e.diagnostics[0];
    assert_eq!(d.code, "NO_MATCHING_BUILD", "{e}");
    let hint = d.hint.clone().unwrap();
    assert!(!hint.contains("python = \"3.8\""), "{hint}");
    assert!(hint.contains("python = \"3.12\""), "{hint}");
    check(&base);
    // 2.0.1's Windows wheels stop at 3.11: the newest of `>=3.8` that locks is 3.11.
    let windows = Gen {
        python: ">=3.8",
        pytorch: "2.0.1".into(),
        cuda: "11.8".into(),
        platform: "win-64",
        gpus: vec![],
        ..base.clone()
    };
    let spec = parse(&windows.text(), Format::Toml, "p", table()).unwrap();
    assert_eq!(spec.python, v("3.11"));
    check(&windows);
    // Both ranges: chosen together, and the two lock together.
    let both = Gen {
        pytorch: ">=2.1".into(),
        ..windows.clone()
    };
    let spec = parse(&both.text(), Format::Toml, "p", table()).unwrap();
    assert!(spec.pytorch >= v("2.1"), "{}", spec.pytorch);
    assert_eq!(spec.choices.len(), 2, "{:?}", spec.choices);
    check(&both);
}
