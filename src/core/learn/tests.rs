//! Unit tests of `core::learn`: facts read from reports, the comparison rules, and learning.
//! Facts about the embedded table are read from it, never restated, so a corrected row does not
//! break them.

use super::*;
use crate::core::compat::{Table, EMBEDDED};
use crate::core::diag::exit;
use crate::core::lock::Lock;
use crate::core::report::{Check, Status, Verdict};
use serde_json::json;

/// The real observation (compat-facts §7): PyPI torch 2.14.1 (cu130) in a built image,
/// `torch._C._cuda_getArchFlags()` = `sm_75 sm_80 sm_86 sm_90 sm_100 sm_120`, no PTX.
const REAL_2141_FLAGS: &str = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120";

fn check(name: &str, status: Status) -> Check {
    Check {
        name: name.into(),
        status,
        code: if status == Status::Pass { "OK" } else { "X" }.into(),
        detail: "d".into(),
        required: true,
        value: None,
        unit: None,
        hint: None,
    }
}

/// A passing report of a torch with these facts (`arch` as torch prints its flags).
fn report(torch: &str, cuda: &str, arch: &str, python: &str, tags: &[&str]) -> SmokeReport {
    let env = json!({
        "python": python,
        "torch": torch,
        "cuda": cuda,
        "cudnn": "9.24.0",
        "nccl": "2.30.7",
        "arch_list": arch.split_whitespace().collect::<Vec<_>>(),
        "torch_wheel_tags": tags,
        "date": "2026-12-01",
    });
    SmokeReport {
        schema: 1,
        status: Verdict::Pass,
        mode: "cpu".into(),
        duration_s: 1.0,
        environment: env.as_object().unwrap().clone(),
        checks: vec![check("python", Status::Pass)],
    }
}

fn real_2141() -> SmokeReport {
    report(
        "2.14.1+cu130",
        "13.0",
        REAL_2141_FLAGS,
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_x86_64"],
    )
}

fn input(r: SmokeReport, image: &str) -> ReportInput {
    ReportInput {
        origin: format!("{image}.json"),
        image: Some(image.into()),
        passed: true,
        report: r,
    }
}

fn embedded() -> Table {
    Table::embedded().unwrap()
}

/// The embedded table's 2.14 cu130 row as torch would print its flags.
fn row_flags(t: &Table) -> (String, Vec<Cc>) {
    let w = t
        .wheel_row(&Version::parse("2.14").unwrap(), "cu130")
        .unwrap();
    let mut flags: Vec<String> = w.arch.iter().map(Cc::sm).collect();
    flags.extend(
        w.ptx
            .iter()
            .map(|c| format!("compute_{}{}", c.major, c.minor)),
    );
    (flags.join(" "), w.ptx.clone())
}

#[test]
fn wheel_tags_give_machine_and_glibc_floor() {
    let tags = |t: &[&str]| wheel_platform(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let p = tags(&["cp312-cp312-manylinux_2_28_x86_64"]).unwrap();
    assert_eq!(
        (p.machine.as_str(), p.glibc.clone()),
        ("x86_64", Version::parse("2.28"))
    );
    // Compressed tag sets: pip accepts any, so the lowest floor is the wheel's.
    let p = tags(&["cp39-cp39-manylinux_2_17_x86_64.manylinux2014_x86_64"]).unwrap();
    assert_eq!(p.informative_glibc(), Version::parse("2.17").as_ref());
    // manylinux1 (glibc 2.5) is what PyTorch tagged 2.17-built wheels: no floor to learn.
    let p = tags(&["cp312-cp312-manylinux1_x86_64"]).unwrap();
    assert_eq!(p.glibc, Version::parse("2.5"));
    assert_eq!(p.informative_glibc(), None);
    let p = tags(&["cp312-cp312-manylinux_2_28_aarch64"]).unwrap();
    assert_eq!(p.machine, "aarch64");
    // A wheel built on the machine (conda-forge, a source build) has no manylinux floor.
    let p = tags(&["cp312-cp312-linux_x86_64"]).unwrap();
    assert_eq!((p.machine.as_str(), p.glibc.clone()), ("x86_64", None));
    assert_eq!(tags(&["cp312-cp312-win_amd64"]), None);
    assert_eq!(tags(&[]), None);
}

#[test]
fn arch_lists_split_into_cubins_and_ptx() {
    let list: Vec<String> = ["sm_90", "compute_120", "sm_80", "sm_90a", "bogus", "sm_80"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (cubins, ptx) = split_arch(&list);
    assert_eq!(cubins, vec![Cc::new(8, 0), Cc::new(9, 0)]);
    assert_eq!(ptx, vec![Cc::new(12, 0)]);
}

#[test]
fn dates_are_checked() {
    assert!(is_date("2026-12-01"));
    for bad in [
        "2026-12-1",
        "2026-00-10",
        "2026-12-32",
        "20261201",
        "2026-1x-01",
        "2026-02-30",
        "2026-04-31",
    ] {
        assert!(!is_date(bad), "{bad}");
    }
}

#[test]
fn the_real_2141_report_reads_as_no_ptx() {
    let o = Observed::from_report(&real_2141());
    assert_eq!(o.torch, Version::parse("2.14.1"));
    assert_eq!(o.cuda, Version::parse("13.0"));
    assert_eq!(o.python, Version::parse("3.13"));
    let (cubins, ptx) = o.arch.unwrap();
    assert_eq!(cubins.len(), 6);
    assert!(ptx.is_empty());
    assert_eq!(o.date.as_deref(), Some("2026-12-01"));
    // A report without the facts gives none, rather than guesses.
    let mut bare = real_2141();
    bare.environment.clear();
    assert_eq!(Observed::from_report(&bare), Observed::default());
}

fn row(ptx: &[Cc]) -> RowFacts {
    RowFacts {
        row: "[[wheel]] torch 2.14 cu130 (torch 2.14.1 from pypi)".into(),
        arch_row: None,
        torch: Version::parse("2.14.1").unwrap(),
        cuda: Version::parse("13.0.3").unwrap(),
        cudnn: Version::parse("9.24.0.43"),
        nccl: Version::parse("2.30.7"),
        arch: split_arch(
            &REAL_2141_FLAGS
                .split(' ')
                .map(str::to_string)
                .collect::<Vec<_>>(),
        )
        .0,
        ptx: ptx.to_vec(),
        python: Some(
            ["3.10", "3.11", "3.12", "3.13", "3.14"]
                .iter()
                .map(|p| Version::parse(p).unwrap())
                .collect(),
        ),
        glibc: Some((Version::parse("2.28").unwrap(), true)),
        pypi_row: None,
    }
}

#[test]
fn a_row_that_claims_ptx_mismatches_the_real_build() {
    let obs = Observed::from_report(&real_2141());
    let m = compare(&obs, &row(&[Cc::new(12, 0)]));
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        (m[0].fact, m[0].table.as_str(), m[0].observed.as_str()),
        ("PTX", "compute_120", "none")
    );
    let d = m[0].diagnostic("img:tag");
    assert_eq!(d.code, codes::TABLE_MISMATCH);
    assert!(!d.is_error(), "a mismatch only warns");
    assert!(
        d.message.contains("torch 2.14 cu130") && d.message.contains("`img:tag`"),
        "{}",
        d.message
    );
    assert!(d.hint.unwrap().contains("table learn"));
    // A row that is right has nothing to say; cuDNN is compared on what torch reports (x.y.z).
    assert!(compare(&obs, &row(&[])).is_empty());
}

#[test]
fn only_the_locked_build_is_compared() {
    let r = row(&[Cc::new(12, 0)]);
    for (torch, cuda) in [("2.14.0+cu130", "13.0"), ("2.14.1+cu126", "12.6")] {
        let other = report(torch, cuda, REAL_2141_FLAGS, "3.13.1", &[]);
        assert!(
            compare(&Observed::from_report(&other), &r).is_empty(),
            "{torch}"
        );
    }
    // From PyPI, the locked release with another CUDA means the table's PyPI build is wrong.
    let pypi = RowFacts {
        pypi_row: Some("[[torch]] 2.14.1 (torch 2.14.1 from pypi)".into()),
        ..r.clone()
    };
    let cu128 = report("2.14.1+cu128", "12.8", REAL_2141_FLAGS, "3.13.1", &[]);
    let m = compare(&Observed::from_report(&cu128), &pypi);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        (m[0].table.as_str(), m[0].observed.as_str()),
        ("cu130", "a CUDA 12.8 build (cu128)")
    );
    assert!(m[0].row.starts_with("[[torch]] 2.14.1"));
    // A CPU build (no CUDA) or an unread arch list compares nothing it lacks.
    let mut cpu = real_2141();
    cpu.environment.remove("cuda");
    assert!(compare(&Observed::from_report(&cpu), &r).is_empty());
    let mut unread = real_2141();
    unread.environment.insert("arch_list".into(), json!([]));
    assert!(compare(&Observed::from_report(&unread), &r).is_empty());
}

#[test]
fn cudnn_nccl_and_python_mismatches_are_named() {
    let mut r = real_2141();
    r.environment.insert("cudnn".into(), json!("9.19.0"));
    r.environment.insert("nccl".into(), json!("2.29.3"));
    r.environment.insert("python".into(), json!("3.15.0"));
    let m = compare(&Observed::from_report(&r), &row(&[]));
    let facts: Vec<(&str, &str, &str)> = m
        .iter()
        .map(|m| (m.fact, m.table.as_str(), m.observed.as_str()))
        .collect();
    assert_eq!(
        facts,
        vec![
            ("cuDNN", "9.24.0.43", "9.19.0"),
            ("NCCL", "2.30.7", "2.29.3"),
            (
                "wheels for Python",
                "3.10 3.11 3.12 3.13 3.14",
                "Python 3.15"
            ),
        ]
    );
}

#[test]
fn the_glibc_floor_follows_the_default_build_and_only_rises_from_others() {
    let with_tag = |tag: &str| {
        Observed::from_report(&report(
            "2.14.1+cu130",
            "13.0",
            REAL_2141_FLAGS,
            "3.13.1",
            &[tag],
        ))
    };
    let mut r = row(&[]);
    let lower = with_tag("cp313-cp313-manylinux_2_17_x86_64");
    assert_eq!(compare(&lower, &r)[0].fact, "glibc floor");
    // Another build that needs less says nothing about the default build's floor...
    r.glibc = Some((Version::parse("2.28").unwrap(), false));
    assert!(compare(&lower, &r).is_empty());
    // ...but one that needs more contradicts the table.
    r.glibc = Some((Version::parse("2.17").unwrap(), false));
    let higher = with_tag("cp313-cp313-manylinux_2_28_x86_64");
    assert_eq!(
        compare(&higher, &r)[0].observed,
        "a wheel tagged for glibc 2.28"
    );
    // manylinux1 tells no floor.
    r.glibc = Some((Version::parse("2.17").unwrap(), true));
    assert!(compare(&with_tag("cp313-cp313-manylinux1_x86_64"), &r).is_empty());
}

#[test]
fn the_row_of_a_lock_is_the_tables_row() {
    let table = embedded();
    let lock = Lock::from_toml(include_str!("../../../specs/pypi-torch214/envbuild.lock")).unwrap();
    let r = row_facts(&lock, &table).unwrap();
    let w = table
        .wheel_row(&Version::parse("2.14").unwrap(), "cu130")
        .unwrap();
    assert_eq!(
        (r.arch.clone(), r.ptx.clone()),
        (w.arch.clone(), w.ptx.clone())
    );
    assert!(
        r.row.contains("torch 2.14 cu130") && r.row.contains("pypi"),
        "{}",
        r.row
    );
    let t = table.torch_row(&Version::parse("2.14.1").unwrap()).unwrap();
    assert_eq!(r.glibc, Some((t.glibc.clone(), true)));
    assert!(
        r.pypi_row.is_some(),
        "a PyPI lock names the row of its default build"
    );

    let cf = Lock::from_toml(include_str!(
        "../../../specs/conda-forge-torch210/envbuild.lock"
    ))
    .unwrap();
    let r = row_facts(&cf, &table).unwrap();
    let b = table
        .conda_forge_build(&Version::parse("12.9").unwrap())
        .unwrap();
    assert_eq!(
        (r.arch.clone(), r.ptx.clone()),
        (b.arch.clone(), b.ptx.clone())
    );
    assert!(r.row.contains("conda_forge_build") && r.row.contains("conda-forge"));
    assert_eq!((r.python, r.glibc, r.pypi_row), (None, None, None));
}

#[test]
fn mismatches_against_the_embedded_row_whatever_it_says() {
    // Report the opposite of the embedded row's PTX: the table must be told.
    let table = embedded();
    let (flags, ptx) = row_flags(&table);
    let flipped = if ptx.is_empty() {
        format!("{flags} compute_120")
    } else {
        REAL_2141_FLAGS.to_string()
    };
    let r = report("2.14.1+cu130", "13.0", &flipped, "3.13.1", &[]);
    let lock = Lock::from_toml(include_str!("../../../specs/pypi-torch214/envbuild.lock")).unwrap();
    let d = table_mismatches(&r, &lock, &table, "x");
    assert!(d.iter().any(|d| d.message.contains("PTX")), "{d:?}");
    // What the row says is what the build reports: nothing.
    let same = report("2.14.1+cu130", "13.0", &flags, "3.13.1", &[]);
    assert!(table_mismatches(&same, &lock, &table, "x").is_empty());
}

fn learn_one(r: SmokeReport) -> Result<Learned, crate::core::diag::Failure> {
    learn(
        EMBEDDED,
        "embedded",
        &[input(r, "img:tag")],
        &LearnOptions::default(),
    )
}

#[test]
fn learning_rewrites_the_row_and_keeps_the_rest_of_the_text() {
    let (_, ptx) = row_flags(&embedded());
    let flags = if ptx.is_empty() {
        format!("{REAL_2141_FLAGS} compute_120")
    } else {
        REAL_2141_FLAGS.to_string()
    };
    let learned = learn_one(report(
        "2.14.1+cu130",
        "13.0",
        &flags,
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_x86_64"],
    ))
    .unwrap();
    let t = Table::parse(&learned.text, "learned").unwrap();
    let w = t
        .wheel_row(&Version::parse("2.14").unwrap(), "cu130")
        .unwrap();
    assert_ne!(w.ptx, ptx, "the PTX is the build's");
    assert_eq!(w.confidence, crate::core::compat::Confidence::Observed);
    assert_eq!(w.ptx_confidence, crate::core::compat::Confidence::Observed);
    assert!(w.unconfirmed_arch.is_empty());
    assert!(
        w.source.ends_with("observed-2026-12-01-img-tag"),
        "{}",
        w.source
    );
    assert!(t.sources["observed-2026-12-01-img-tag"].contains("`img:tag`"));
    assert_eq!(
        t.meta.version,
        format!("{}+learned.2026-12-01", embedded().meta.version)
    );
    assert!(
        learned
            .changes
            .iter()
            .any(|c| c.contains("PTX") && c.contains("->")),
        "{:?}",
        learned.changes
    );
    // Only the learned rows change: every other line of the embedded text is still there.
    let kept = EMBEDDED
        .lines()
        .filter(|l| learned.text.contains(l))
        .count();
    assert!(EMBEDDED.lines().count() - kept <= 8, "{}", learned.text);
    // Learning again from the learned table changes nothing but nothing breaks either.
    let again = learn(
        &learned.text,
        "learned",
        &[input(
            report(
                "2.14.1+cu130",
                "13.0",
                &flags,
                "3.13.1",
                &["cp313-cp313-manylinux_2_28_x86_64"],
            ),
            "img:tag",
        )],
        &LearnOptions::default(),
    )
    .unwrap();
    assert_eq!(again.text, learned.text);
}

#[test]
fn learning_is_deterministic_and_adds_pythons_and_floors() {
    let a = report(
        "2.14.1+cu130",
        "13.0",
        REAL_2141_FLAGS,
        "3.15.0",
        &["cp315-cp315-manylinux_2_28_x86_64"],
    );
    let b = report(
        "2.14.0+cu130",
        "13.0",
        REAL_2141_FLAGS,
        "3.12.3",
        &["cp312-cp312-manylinux_2_28_x86_64"],
    );
    let one = learn(
        EMBEDDED,
        "e",
        &[input(a.clone(), "a"), input(b.clone(), "b")],
        &LearnOptions::default(),
    )
    .unwrap();
    let two = learn(
        EMBEDDED,
        "e",
        &[input(b, "b"), input(a, "a")],
        &LearnOptions::default(),
    )
    .unwrap();
    assert_eq!(one, two);
    let t = Table::parse(&one.text, "learned").unwrap();
    let row = t.torch_row(&Version::parse("2.14.1").unwrap()).unwrap();
    assert!(row.python.contains(&Version::parse("3.15").unwrap()));
    assert!(row.python.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        row.glibc_confidence,
        crate::core::compat::Confidence::Observed
    );
}

#[test]
fn a_non_default_build_only_raises_the_floor() {
    let base = embedded();
    let t = base
        .torch_row(&Version::parse("2.14.1").unwrap())
        .unwrap()
        .clone();
    let other = t
        .variants
        .iter()
        .find(|v| **v != t.pypi_default)
        .unwrap()
        .clone();
    let cuda = crate::core::compat::variant_cuda(&other)
        .unwrap()
        .to_string();
    let w = base
        .wheel_row(&Version::parse("2.14").unwrap(), &other)
        .unwrap();
    let flags: Vec<String> = w.arch.iter().map(Cc::sm).collect();
    let lower = report(
        &format!("2.14.1+{other}"),
        &cuda,
        &flags.join(" "),
        "3.12.1",
        &["cp312-cp312-manylinux_2_17_x86_64"],
    );
    let learned = learn(
        EMBEDDED,
        "e",
        &[input(lower, "a")],
        &LearnOptions::default(),
    )
    .unwrap();
    let after = Table::parse(&learned.text, "l").unwrap();
    assert_eq!(after.torch_row(&t.version).unwrap().glibc, t.glibc);
}

#[test]
fn reports_that_cannot_teach_are_refused_with_every_reason() {
    let codes_of = |r: Result<Learned, crate::core::diag::Failure>| {
        let f = r.unwrap_err();
        assert_eq!(f.exit_code, exit::FAILURE);
        f.diagnostics
            .iter()
            .map(|d| (d.code, d.message.clone()))
            .collect::<Vec<_>>()
    };
    let mut failing = input(real_2141(), "i");
    failing.passed = false;
    let e = codes_of(learn(EMBEDDED, "e", &[failing], &LearnOptions::default()));
    assert!(
        e[0].0 == codes::LEARN_INPUT_INVALID && e[0].1.contains("did not pass"),
        "{e:?}"
    );

    let mut bare = real_2141();
    for k in ["arch_list", "date", "torch_wheel_tags"] {
        bare.environment.remove(k);
    }
    let no_image = ReportInput {
        image: None,
        ..input(bare, "i")
    };
    let e = codes_of(learn(EMBEDDED, "e", &[no_image], &LearnOptions::default()));
    let all = format!("{e:?}");
    for what in [
        "when it ran",
        "which image",
        "architecture list",
        "from a wheel",
    ] {
        assert!(all.contains(what), "{what}: {all}");
    }

    let conda = report(
        "2.14.1",
        "13.0",
        REAL_2141_FLAGS,
        "3.13.1",
        &["cp313-cp313-linux_x86_64"],
    );
    assert!(format!("{:?}", codes_of(learn_one(conda))).contains("conda-forge or a source build"));
    let arm = report(
        "2.14.1",
        "13.0",
        REAL_2141_FLAGS,
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_aarch64"],
    );
    assert!(format!("{:?}", codes_of(learn_one(arm))).contains("aarch64"));
    let unknown = report(
        "2.14.1+cu118",
        "11.8",
        REAL_2141_FLAGS,
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_x86_64"],
    );
    assert!(format!("{:?}", codes_of(learn_one(unknown))).contains("no row for torch 2.14.1 cu118"));

    let a = report(
        "2.14.1+cu130",
        "13.0",
        REAL_2141_FLAGS,
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_x86_64"],
    );
    let b = report(
        "2.14.0+cu130",
        "13.0",
        &format!("{REAL_2141_FLAGS} compute_120"),
        "3.13.1",
        &["cp313-cp313-manylinux_2_28_x86_64"],
    );
    let e = codes_of(learn(
        EMBEDDED,
        "e",
        &[input(a, "a"), input(b, "b")],
        &LearnOptions::default(),
    ));
    assert!(e[0].1.contains("disagree about torch 2.14 cu130"), "{e:?}");
}

#[test]
fn the_command_line_supplies_date_and_image() {
    let mut r = real_2141();
    r.environment.remove("date");
    let opts = LearnOptions {
        date: Some("2026-11-02".into()),
        image: Some("local python".into()),
    };
    let i = ReportInput {
        image: None,
        ..input(r, "x")
    };
    let learned = learn(EMBEDDED, "e", &[i], &opts).unwrap();
    assert!(
        learned.text.contains("observed-2026-11-02-local-python = "),
        "sources cite the image and date"
    );
    let bad = LearnOptions {
        date: Some("tomorrow".into()),
        ..LearnOptions::default()
    };
    assert_eq!(
        learn(EMBEDDED, "e", &[input(real_2141(), "x")], &bad)
            .unwrap_err()
            .exit_code,
        exit::USAGE
    );
}

#[test]
fn report_files_are_smoke_reports_or_verdicts() {
    let raw = serde_json::to_string(&real_2141()).unwrap();
    let got = parse_reports(&raw, "r.json").unwrap();
    assert_eq!(
        (got.len(), got[0].passed, got[0].image.clone()),
        (1, true, None)
    );

    let verdict = json!({
        "verdict": "fail",
        "smoke": [
            {"image": "a:1", "passed": true, "exit_code": 0, "report": real_2141()},
            {"image": "b:1", "passed": false, "exit_code": 1, "report": real_2141()},
        ],
        "diagnostics": [],
    });
    let got = parse_reports(&verdict.to_string(), "v.json").unwrap();
    assert_eq!(
        got.iter()
            .map(|g| (g.image.clone().unwrap(), g.passed))
            .collect::<Vec<_>>(),
        vec![("a:1".into(), true), ("b:1".into(), false)]
    );
    assert_eq!(got[0].origin, "v.json (a:1)");

    let no_run = json!({"smoke": [{"image": "a:1", "passed": false, "error": []}]});
    for (text, why) in [
        (no_run.to_string(), "gave no report"),
        ("{".to_string(), "not JSON"),
        (
            "{\"verdict\": \"error\"}".to_string(),
            "neither a smoke report",
        ),
        ("{\"schema\": 1}".to_string(), "not a smoke report"),
    ] {
        let e = parse_reports(&text, "f.json").unwrap_err();
        assert_eq!(e.diagnostics[0].code, codes::LEARN_INPUT_INVALID);
        assert!(e.to_string().contains(why), "{e}");
    }
}
