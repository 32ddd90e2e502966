//! Invariants over the real, embedded table, plus the queries the resolver relies on.

use super::*;

fn table() -> Table {
    Table::parse(EMBEDDED, "embedded").unwrap_or_else(|f| panic!("{f}"))
}

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

#[test]
fn embedded_table_satisfies_every_invariant() {
    assert!(table().check().is_empty());
}

#[test]
fn every_torch_variant_has_a_wheel_row_with_a_cuda_row() {
    let t = table();
    for row in &t.torch {
        for var in &row.variants {
            let w = t.wheel_row(&v(&row.series()), var).expect("wheel row");
            assert!(
                t.toolkit_driver(&w.cuda, Os::Linux).is_some(),
                "{} {var}",
                row.version
            );
            assert!(!w.arch.is_empty());
        }
    }
}

#[test]
fn check_finds_unsorted_rows_duplicates_and_dangling_references() {
    let mut t = table();
    t.torch.swap(0, 1);
    t.gpu.push(t.gpu[0].clone());
    t.torch[5].variants.push("cu999".into());
    t.wheel[0].source = "no-such-source".into();
    let problems = t.check().join("\n");
    assert!(
        problems.contains("[[torch]] rows are not sorted"),
        "{problems}"
    );
    assert!(problems.contains("appears twice"), "{problems}");
    assert!(
        problems.contains("cu999 with no [[wheel]] row"),
        "{problems}"
    );
    assert!(problems.contains("unknown source key"), "{problems}");
}

#[test]
fn toolkit_drivers_follow_nvidia_table() {
    let t = table();
    assert_eq!(
        t.toolkit_driver(&v("12.4.1"), Os::Linux)
            .unwrap()
            .version
            .as_str(),
        "550.54.15"
    );
    assert_eq!(
        t.toolkit_driver(&v("11.8.0"), Os::Windows)
            .unwrap()
            .version
            .as_str(),
        "520.06"
    );
    // A major.minor takes the newest patch's driver.
    assert_eq!(
        t.toolkit_driver(&v("11.6"), Os::Linux)
            .unwrap()
            .version
            .as_str(),
        "510.47.03"
    );
    // 13.0.3 and 13.2.2: the drivers in NVIDIA's installer names, a secondary source.
    let r = t.toolkit_driver(&v("13.0.3"), Os::Linux).unwrap();
    assert_eq!(r.version.as_str(), "580.126.20");
    assert_eq!(r.confidence, Confidence::Secondary);
    let r = t.toolkit_driver(&v("13.2.2"), Os::Linux).unwrap();
    assert_eq!(r.version.as_str(), "595.71.05");
    assert_eq!(r.confidence, Confidence::Secondary);
    // 12.3.2 still borrows from 12.3.1 and says so.
    let r = t.toolkit_driver(&v("12.3.2"), Os::Linux).unwrap();
    assert_eq!(r.version.as_str(), "545.23.08");
    assert!(r.confidence.is_unconfirmed());
    // 13.x has no Windows toolkit driver.
    assert!(t.toolkit_driver(&v("13.0.0"), Os::Windows).is_none());
}

/// A driver that reports CUDA X.Y runs every X.Y.z natively: the native floor is the minor's
/// first toolkit's driver, whatever update the build used or the table's patch precision.
#[test]
fn native_floor_is_the_minor_s_first_toolkit_driver() {
    let t = Table::embedded().unwrap();
    for (cuda, first) in [
        ("12.8.1", "12.8.0"),
        ("12.8", "12.8.0"),
        ("13.0.3", "13.0.0"),
        ("11.8.0", "11.8.0"),
    ] {
        assert_eq!(
            t.native_driver(&v(cuda), Os::Linux).map(|d| d.version),
            t.toolkit_driver(&v(first), Os::Linux).map(|d| d.version),
            "{cuda}"
        );
    }
    assert_eq!(
        t.native_driver(&v("13.0.3"), Os::Linux)
            .unwrap()
            .version
            .as_str(),
        "580.65.06"
    );
}

#[test]
fn minor_version_floors_exist_from_cuda_11_only() {
    let t = table();
    assert!(t.family_floor(10, Os::Linux).is_none());
    assert_eq!(
        t.family_floor(11, Os::Linux).unwrap().version.as_str(),
        "450.80.02"
    );
    assert_eq!(
        t.family_floor(12, Os::Linux).unwrap().version.as_str(),
        "525.60.13"
    );
    assert_eq!(
        t.family_floor(13, Os::Linux).unwrap().version.as_str(),
        "580.65.06"
    );
}

#[test]
fn driver_branches_report_their_max_cuda() {
    let t = table();
    assert_eq!(
        t.driver_max_cuda(&v("535.104.05"))
            .unwrap()
            .max_cuda
            .as_str(),
        "12.2"
    );
    assert_eq!(
        t.driver_max_cuda(&v("565.57.01"))
            .unwrap()
            .max_cuda
            .as_str(),
        "12.7"
    );
    assert_eq!(
        t.driver_max_cuda(&v("580.65.06"))
            .unwrap()
            .max_cuda
            .as_str(),
        "13.0"
    );
    assert!(t.driver_max_cuda(&v("390.1")).is_none());
}

#[test]
fn gpu_names_are_found_in_nvidia_smi_spellings() {
    let t = table();
    let cc = |s: &str| t.find_gpu(s).map(|m| m.cc.to_string());
    assert_eq!(cc("NVIDIA A100-SXM4-80GB").as_deref(), Some("8.0"));
    assert_eq!(cc("Tesla V100-SXM2-16GB").as_deref(), Some("7.0"));
    assert_eq!(cc("NVIDIA GeForce RTX 4090").as_deref(), Some("8.9"));
    assert_eq!(cc("NVIDIA H100 80GB HBM3").as_deref(), Some("9.0"));
    assert_eq!(cc("rtx 6000 ada generation").as_deref(), Some("8.9"));
    assert_eq!(cc("Quadro RTX 6000").as_deref(), Some("7.5"));
    assert_eq!(
        cc("NVIDIA RTX PRO 6000 Blackwell Server Edition").as_deref(),
        Some("12.0")
    );
    assert_eq!(cc("sm_89").as_deref(), Some("8.9"));
    assert_eq!(cc("A1000"), None, "no prefix match inside a word");
    assert_eq!(cc("Radeon"), None);
    assert!(t.gpu_suggestions("H10").contains(&"H100".to_string()));
}

#[test]
fn one_entry_names_one_gpu() {
    let t = table();
    let cc = |s: &str| t.find_gpu(s).map(|m| m.cc.to_string());
    // A qualifier may follow the model; a second model or a compute capability may not.
    for two in [
        "H100 P100",
        "H100 8.0",
        "NVIDIA A100 sm_90",
        "A100 and V100",
        "L4 H100",
    ] {
        assert_eq!(cc(two), None, "{two}");
    }
    assert_eq!(t.gpus_named_in("H100 P100"), ["H100", "P100"]);
    assert_eq!(t.gpus_named_in("A100 and sm_90"), ["A100", "sm_90"]);
    assert_eq!(cc("NVIDIA A100 80GB PCIe").as_deref(), Some("8.0"));
    assert_eq!(cc("NVIDIA H100 NVL").as_deref(), Some("9.0"));
}

#[test]
fn pytorch_channel_ends_at_2_5_1() {
    let t = table();
    let last = t
        .torch
        .iter()
        .rfind(|r| !r.pytorch_channel.is_empty())
        .unwrap();
    assert_eq!(last.version.as_str(), "2.5.1");
    assert_eq!(
        t.channel_row("pytorch")
            .unwrap()
            .last_torch
            .as_ref()
            .unwrap()
            .as_str(),
        "2.5.1"
    );
}

#[test]
fn variant_names_map_to_cuda_versions() {
    assert_eq!(variant_cuda("cu124").unwrap().as_str(), "12.4");
    assert_eq!(variant_cuda("cu102").unwrap().as_str(), "10.2");
    assert_eq!(variant_cuda("cu130").unwrap().as_str(), "13.0");
    assert!(variant_cuda("cpu").is_none());
    assert_eq!(variant_of(&v("12.8.1")), "cu128");
}

#[test]
fn a_broken_table_file_is_a_coded_error_not_a_panic() {
    for text in ["", "not toml [", "[meta]\nversion = 1"] {
        let err = Table::parse(text, "t.toml").unwrap_err();
        assert_eq!(err.diagnostics[0].code, TABLE_INVALID);
    }
}

/// Source keys that mean "read off a real artifact" (a wheel, an image), not a document.
const OBSERVED: [&str; 2] = ["observed-wheel-2026-12-01", "observed-image-2026-12-01"];

fn cites(source: &str, key: &str) -> bool {
    source.split_whitespace().any(|k| k == key)
}

fn observed(source: &str) -> bool {
    OBSERVED.iter().any(|k| cites(source, k))
}

fn ccs(list: &[&str]) -> Vec<Cc> {
    list.iter().map(|s| Cc::parse(s).unwrap()).collect()
}

#[test]
fn every_row_of_every_section_cites_known_sources() {
    // `check` covers torch, wheel, cuda, gpu, arch, channel and base_image rows; the rest here.
    let t = table();
    let known = |s: &str| s.split_whitespace().all(|k| t.sources.contains_key(k));
    let rest = t
        .cuda_family
        .iter()
        .map(|r| &r.source)
        .chain(t.python.iter().map(|r| &r.source))
        .chain(t.numpy1.iter().map(|r| &r.source))
        .chain(t.wheel_aarch64.iter().map(|r| &r.source))
        .chain(t.conda_forge_build.iter().map(|r| &r.source));
    for s in rest {
        assert!(!s.trim().is_empty() && known(s), "unknown source `{s}`");
    }
    for (key, text) in &t.sources {
        assert!(!text.trim().is_empty(), "source {key} has no description");
    }
}

#[test]
fn ptx_claims_not_read_off_an_artifact_are_unconfirmed() {
    // PyPI torch 2.14.1 carried no PTX where every document said 12.0+PTX: a PTX claim stands
    // only when it was read off a built artifact.
    let t = table();
    for w in t.wheel.iter().filter(|w| !w.ptx.is_empty()) {
        if !observed(&w.source) {
            assert!(
                w.ptx_confidence.is_unconfirmed() && cites(&w.source, "ptx-doc-only"),
                "wheel {} {}: PTX from documents only must be unconfirmed",
                w.torch,
                w.variant
            );
        }
    }
    for a in t.wheel_aarch64.iter().filter(|a| !a.ptx.is_empty()) {
        assert!(
            a.confidence.is_unconfirmed() && cites(&a.source, "ptx-doc-only"),
            "aarch64 {}",
            a.variant
        );
    }
    for b in t.conda_forge_build.iter().filter(|b| !b.ptx.is_empty()) {
        if !observed(&b.source) {
            assert!(
                b.confidence.is_unconfirmed() && cites(&b.source, "ptx-doc-only"),
                "conda-forge {}",
                b.cuda
            );
        }
    }
}

#[test]
fn rows_read_off_real_wheels_say_what_was_read() {
    // docs/table-evidence.md: the PyPI default wheel of one release per series, read on
    // 2026-12-01 (compiled architectures, METADATA pins). Such a row is fully confirmed.
    let t = table();
    let kepler = ccs(&["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6"]);
    let old = ccs(&["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]);
    let volta = ccs(&["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]);
    let turing = ccs(&["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]);
    let read = [
        ("2.0", "cu117", &kepler, "11.7.1", "8.5.0.96", "2.14.3"),
        ("2.1", "cu121", &old, "12.1.1", "8.9.2.26", "2.18.1"),
        ("2.2", "cu121", &old, "12.1.1", "8.9.2.26", "2.19.3"),
        ("2.3", "cu121", &old, "12.1.1", "8.9.2.26", "2.20.5"),
        ("2.4", "cu121", &old, "12.1.1", "9.1.0.70", "2.20.5"),
        ("2.5", "cu124", &old, "12.4.1", "9.1.0.70", "2.21.5"),
        ("2.6", "cu124", &old, "12.4.1", "9.1.0.70", "2.21.5"),
        ("2.7", "cu126", &old, "12.6.3", "9.5.1.17", "2.26.2"),
        ("2.8", "cu128", &volta, "12.8.1", "9.10.2.21", "2.27.3"),
        ("2.9", "cu128", &volta, "12.8.1", "9.10.2.21", "2.27.5"),
        ("2.10", "cu128", &volta, "12.8.1", "9.10.2.21", "2.27.5"),
        ("2.11", "cu130", &turing, "13.0.2", "9.19.0.56", "2.28.9"),
        ("2.12", "cu130", &turing, "13.0.2", "9.20.0.48", "2.29.7"),
        ("2.13", "cu130", &turing, "13.0.3", "9.20.0.48", "2.29.7"),
        ("2.14", "cu130", &turing, "13.0.3", "9.24.0.43", "2.30.7"),
        ("2.15", "cu132", &turing, "13.2.2", "9.26.0.51", "2.30.7"),
    ];
    for (series, variant, arch, cuda, cudnn, nccl) in read {
        let w = t.wheel_row(&v(series), variant).expect("wheel row");
        let at = format!("wheel {series} {variant}");
        assert!(cites(&w.source, "observed-wheel-2026-12-01"), "{at}");
        assert_eq!(&w.arch, arch, "{at}");
        assert!(w.ptx.is_empty(), "{at}: no PTX in the real wheel");
        assert_eq!(w.cuda.as_str(), cuda, "{at}");
        assert_eq!(w.cudnn, cudnn, "{at}");
        assert_eq!(w.nccl.as_deref(), Some(nccl), "{at}");
        assert_eq!(w.confidence, Confidence::Primary, "{at}");
        assert_eq!(w.ptx_confidence, Confidence::Primary, "{at}");
        assert_eq!(w.cudnn_confidence, Confidence::Primary, "{at}");
        assert!(w.unconfirmed_arch.is_empty(), "{at}");
    }
    // 1.12.1 (CUDA 10.2 bundled) and 1.13.1 (no NCCL pin) were read too.
    let w = t.wheel_row(&v("1.12"), "cu102").unwrap();
    assert_eq!(w.arch, ccs(&["3.7", "5.0", "6.0", "7.0"]));
    let w = t.wheel_row(&v("1.13"), "cu117").unwrap();
    assert_eq!(
        (w.arch.clone(), w.cudnn.as_str()),
        (kepler.clone(), "8.5.0.96")
    );
    assert_eq!(
        t.torch_row(&v("1.12.1")).unwrap().pypi_default_confidence,
        Confidence::Primary
    );
    // And the observed source is not claimed by a row nobody read.
    let mut read_rows: Vec<(&str, &str)> = read.iter().map(|r| (r.0, r.1)).collect();
    read_rows.extend([("1.12", "cu102"), ("1.13", "cu117")]);
    for w in &t.wheel {
        let key = (w.torch.as_str(), w.variant.as_str());
        assert_eq!(
            cites(&w.source, "observed-wheel-2026-12-01"),
            read_rows.contains(&key),
            "wheel {} {}",
            w.torch,
            w.variant
        );
    }
}

#[test]
fn corrections_checked_against_real_artifacts_hold() {
    // compat-facts section 7 (2026-12-01).
    let t = table();
    let torch = |s: &str| t.torch_row(&v(s)).expect("torch row");
    let vs = |l: &[&str]| l.iter().map(|s| v(s)).collect::<Vec<_>>();
    // torch 2.6.0's builds disagree on glibc (cu118/cu124 2.17, cu126 2.28): the release says
    // 2.17 (read off the PyPI cu124 wheel) and the cu126 row its own 2.28.
    assert_eq!(torch("2.6.0").glibc.as_str(), "2.17");
    assert!(!torch("2.6.0").glibc_confidence.is_unconfirmed());
    let glibc = |var: &str| t.wheel_row(&v("2.6"), var).and_then(|w| w.glibc.clone());
    assert_eq!(glibc("cu126"), Some(v("2.28")));
    assert_eq!((glibc("cu118"), glibc("cu124")), (None, None));
    // A release's glibc is never below that of an older release.
    for w in t.torch.windows(2) {
        assert!(
            w[0].glibc <= w[1].glibc,
            "{} > {}",
            w[0].version,
            w[1].version
        );
    }
    // conda-forge builds, from the feedstock's history.
    assert!(
        torch("2.5.0").conda_forge.is_empty(),
        "2.5.0 was never built"
    );
    assert_eq!(torch("2.10.0").conda_forge, vs(&["12.9", "13.0"]));
    assert_eq!(torch("2.10.0").conda_forge_win, vs(&["12.8", "13.0"]));
    assert_eq!(torch("2.7.1").conda_forge, vs(&["12.6", "12.9"]));
    assert_eq!(
        torch("2.7.1").conda_forge_win,
        vs(&["12.6", "12.8", "12.9"])
    );
    assert_eq!(torch("2.5.1").conda_forge_win, vs(&["12.0", "12.6"]));
    assert_eq!(torch("2.4.1").conda_forge, vs(&["11.8", "12.0"]));
    assert_eq!(torch("2.0.0").conda_forge, vs(&["11.2", "11.8", "12.0"]));
    for r in ["1.12.0", "1.13.0"] {
        assert_eq!(
            torch(r).conda_forge,
            vs(&["10.2", "11.0", "11.1", "11.2"]),
            "{r}"
        );
    }
    for r in [
        "2.10.0", "2.7.1", "2.5.1", "2.4.1", "2.0.0", "1.12.0", "1.13.0",
    ] {
        assert!(cites(&torch(r).source, "cf-feedstock-history"), "{r}");
        assert_eq!(torch(r).conda_forge_confidence, Confidence::Primary, "{r}");
    }
    // Python 3.12 is experimental in 2.2 and 2.3.
    for r in ["2.2.0", "2.2.1", "2.2.2", "2.3.0", "2.3.1"] {
        assert!(torch(r).python_experimental.contains(&v("3.12")), "{r}");
    }
    // cu117 was CUDA 11.7.1 (runtime 11.7.99); 2.14.1's cu132 is CUDA 13.2.2.
    for series in ["1.13", "2.0"] {
        let w = t.wheel_row(&v(series), "cu117").unwrap();
        assert_eq!(w.cuda.as_str(), "11.7.1", "{series}");
    }
    assert_eq!(
        t.wheel_row(&v("2.14"), "cu132").unwrap().cuda.as_str(),
        "13.2.2"
    );
}

#[test]
fn aarch64_rows_hold_what_was_read_off_the_aarch64_wheels() {
    // docs/table-evidence.md section 8: PyPI's aarch64 CUDA wheels of 2.11 to 2.15.
    let t = table();
    let arm = ccs(&["8.0", "9.0", "10.0", "11.0", "12.0"]);
    let py = |l: &[&str]| l.iter().map(|s| v(s)).collect::<Vec<_>>();
    let from310 = py(&["3.10", "3.11", "3.12", "3.13", "3.14"]);
    let read = [
        ("2.11", "cu130", "13.0.2", &from310),
        ("2.12", "cu130", "13.0.2", &from310),
        ("2.13", "cu130", "13.0.3", &from310),
        ("2.14", "cu130", "13.0.3", &from310),
        (
            "2.15",
            "cu132",
            "13.2.2",
            &py(&["3.11", "3.12", "3.13", "3.14", "3.15"]),
        ),
    ];
    for (series, variant, cuda, python) in read {
        let a = t
            .wheel_aarch64_row(&v(series), variant)
            .expect("aarch64 row");
        assert_eq!(
            a.torch.as_ref(),
            Some(&v(series)),
            "{series}: the series' own row"
        );
        assert_eq!(a.arch, arm, "{series}");
        assert!(a.ptx.is_empty(), "{series}: no PTX");
        assert_eq!(a.glibc, Some(v("2.28")), "{series}: manylinux_2_28");
        assert_eq!(a.cuda, Some(v(cuda)), "{series}");
        assert_eq!(&a.python, python, "{series}");
        assert!(
            !a.confidence.is_unconfirmed() && cites(&a.source, "observed-wheel-aarch64-2026-12-02")
        );
        // The same pins as the release's x86_64 wheel, and the same Pythons as the release.
        assert_eq!(
            t.wheel_row(&v(series), variant).map(|w| &w.cuda),
            Some(&v(cuda))
        );
        let newest = t.torch.iter().rfind(|r| r.series() == series).unwrap();
        assert_eq!(&newest.python, python, "{series}");
        assert_eq!(newest.pypi_default, variant, "{series}: PyPI's own build");
    }
    // A series without its own row falls back to the variant's, from build scripts only.
    let generic = t
        .wheel_aarch64_row(&v("2.7"), "cu128")
        .expect("variant row");
    assert!(generic.torch.is_none() && generic.confidence.is_unconfirmed());
}

#[test]
fn every_gpu_names_the_machines_it_comes_in() {
    use crate::core::compat::CpuArch::{Aarch64, X86_64};
    let t = table();
    for g in &t.gpu {
        assert!(!g.cpu_arch.is_empty(), "{}: no cpu_arch", g.name);
    }
    let gpu = |n: &str| t.find_gpu(n).and_then(|m| m.row).expect(n);
    for n in [
        "GH200",
        "GB200",
        "GB300",
        "GB10",
        "DGX Spark",
        "Jetson Thor",
        "Jetson Orin",
        "Jetson Xavier",
    ] {
        assert_eq!(gpu(n).cpu_arch, [Aarch64], "{n}");
    }
    for n in ["T4", "A100", "L4", "H100", "H200", "B200"] {
        assert_eq!(gpu(n).cpu_arch, [X86_64, Aarch64], "{n}");
    }
    for n in ["RTX 4090", "RTX 5090", "GTX 1080", "RTX A6000"] {
        assert_eq!(gpu(n).cpu_arch, [X86_64], "{n}");
    }
    let jetpack: Vec<&str> = t
        .gpu
        .iter()
        .filter(|g| g.jetpack)
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(jetpack, ["Jetson Xavier", "Jetson Orin"]);
}

/// Every row kind refuses a second row with its key (issue 38): the seven kinds that are not
/// kept sorted each get a copy of their first row, and each copy is named.
#[test]
fn every_row_kind_refuses_a_repeat_of_its_key() {
    let mut t = table();
    t.cuda_family.push(t.cuda_family[0].clone());
    t.gpu_peak.push(t.gpu_peak[0].clone());
    t.numpy1.push(t.numpy1[0].clone());
    t.channel.push(t.channel[0].clone());
    let mut base = t.base_image[1].clone();
    base.image = "python:3.99-slim-bookworm".into();
    t.base_image.push(base);
    t.wheel_aarch64.push(t.wheel_aarch64[0].clone());
    t.conda_forge_build.push(t.conda_forge_build[0].clone());
    let problems = t.check().join("\n");
    for kind in [
        "cuda_family",
        "gpu_peak",
        "numpy1",
        "channel",
        "base_image",
        "wheel_aarch64",
        "conda_forge_build",
    ] {
        assert!(
            problems.contains(&format!("[[{kind}]] repeats the key")),
            "{kind}: {problems}"
        );
    }
    // The sorted kinds refuse a repeat too (their order check), and GPU names their own.
    let mut t = table();
    t.cuda.push(t.cuda.last().unwrap().clone());
    t.driver_branch
        .push(t.driver_branch.last().unwrap().clone());
    t.arch.push(t.arch.last().unwrap().clone());
    t.python.push(t.python.last().unwrap().clone());
    t.torch.push(t.torch.last().unwrap().clone());
    t.wheel.push(t.wheel.last().unwrap().clone());
    let problems = t.check().join("\n");
    for kind in ["cuda", "driver_branch", "arch", "python", "torch", "wheel"] {
        assert!(
            problems.contains(&format!("[[{kind}]] rows are not sorted or repeat a key")),
            "{kind}: {problems}"
        );
    }
}

#[test]
fn the_tables_dates_are_real_days() {
    let mut t = table();
    t.meta.as_of = "2026-02-30".into();
    t.python[0].eol = "2023-04-31".into();
    let problems = t.check().join("\n");
    assert!(problems.contains("[meta] as_of `2026-02-30`"), "{problems}");
    assert!(problems.contains("eol `2023-04-31`"), "{problems}");
}
