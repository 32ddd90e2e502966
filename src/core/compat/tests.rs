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
    // 13.0.3 has no published driver: borrowed from 13.0.2 and marked unconfirmed.
    let r = t.toolkit_driver(&v("13.0.3"), Os::Linux).unwrap();
    assert_eq!(r.version.as_str(), "580.95.05");
    assert!(r.confidence.is_unconfirmed());
    // 13.x has no Windows toolkit driver.
    assert!(t.toolkit_driver(&v("13.0.0"), Os::Windows).is_none());
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
