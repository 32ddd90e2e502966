//! Resolver rules, each tested against a small fixture table (tests/fixtures/compat-fixture.toml)
//! so that refreshing the real table's data never breaks a logic test.

use super::*;
use crate::core::compat::{Os, Table};
use crate::core::lock::DriverMode;
use crate::core::spec::{parse, Format};

const FIXTURE: &str = include_str!("../../../tests/fixtures/compat-fixture.toml");

fn table() -> Table {
    Table::parse(FIXTURE, "fixture").unwrap_or_else(|f| panic!("{f}"))
}

fn resolve_toml(text: &str) -> Resolution {
    let t = table();
    let spec = parse_spec(text, Format::Toml, "spec.toml", &t).unwrap_or_else(|d| panic!("{d:?}"));
    resolve(&spec, &t, "0")
}

fn spec(body: &str, target: &str) -> String {
    format!("name = \"t\"\n{body}\n[target]\n{target}\n")
}

fn codes(r: &Resolution) -> Vec<&'static str> {
    r.diagnostics.iter().map(|d| d.code).collect()
}

fn find<'a>(r: &'a Resolution, code: &str) -> &'a Diagnostic {
    r.diagnostics
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| panic!("no {code} in {:#?}", r.diagnostics))
}

const IDX: &str = "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"";

#[test]
fn native_driver_gives_a_clean_lock() {
    let r = resolve_toml(&spec(IDX, "driver = \"550.54.15\"\ngpus = [\"A100\"]"));
    assert!(r.diagnostics.is_empty(), "{:#?}", r.diagnostics);
    let lock = r.lock.unwrap();
    assert_eq!(lock.driver_mode, Some(DriverMode::Native));
    assert_eq!(lock.cuda, "12.4.1");
    assert_eq!(lock.cudnn.as_deref(), Some("9.1.0.70"));
    assert_eq!(lock.driver_min, "550.54.15");
    assert_eq!(lock.driver_min_compat.as_deref(), Some("525.60.13"));
    assert_eq!(lock.install.pip[0], "torch==2.5.1+cu124");
    assert_eq!(
        lock.index_url.as_deref(),
        Some("https://download.pytorch.org/whl/cu124")
    );
}

#[test]
fn driver_between_family_floor_and_toolkit_driver_is_minor_compat() {
    let r = resolve_toml(&spec(IDX, "driver = \"535.104.05\"\ngpus = [\"A100\"]"));
    assert_eq!(codes(&r), [codes::DRIVER_MINOR_COMPAT]);
    assert!(!r.has_errors());
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::MinorCompat));
}

#[test]
fn driver_below_the_family_floor_is_too_old_with_a_working_alternative() {
    let r = resolve_toml(&spec(IDX, "driver = \"470.82.01\"\ngpus = [\"A100\"]"));
    assert!(r.lock.is_none());
    let d = find(&r, codes::DRIVER_TOO_OLD);
    assert!(d.message.contains(">= 525.60.13"), "{}", d.message);
    // cu118 runs on R470 through 11.x minor-version compatibility.
    assert!(
        d.hint.as_deref().unwrap().contains("cuda = \"11.8\""),
        "{:?}",
        d.hint
    );
}

#[test]
fn cuda_10_has_no_minor_version_compatibility() {
    let body = "python = \"3.10\"\npytorch = \"1.12.1\"\ncuda = \"10.2\"";
    let r = resolve_toml(&spec(body, "driver = \"440.33\""));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let r = resolve_toml(&spec(body, "driver = \"418.87.01\""));
    let d = find(&r, codes::DRIVER_TOO_OLD);
    assert!(
        d.message.contains("no minor-version compatibility"),
        "{}",
        d.message
    );
}

#[test]
fn newer_drivers_run_older_families_natively() {
    let body = "python = \"3.10\"\npytorch = \"2.1.0\"\ncuda = \"11.8\"";
    let r = resolve_toml(&spec(body, "driver = \"580.95.05\"\ngpus = [\"A100\"]"));
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::Native));
}

#[test]
fn forward_compatibility_only_on_data_center_gpus() {
    let body = "python = \"3.11\"\npytorch = \"2.11.0\"\ncuda = \"13.0\"";
    let r = resolve_toml(&spec(
        body,
        "driver = \"550.54.15\"\ngpus = [\"H100\"]\nforward-compat = true",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    find(&r, codes::FORWARD_COMPAT);
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::ForwardCompat));
    let r = resolve_toml(&spec(
        body,
        "driver = \"550.54.15\"\ngpus = [\"RTX 4090\"]\nforward-compat = true",
    ));
    assert!(find(&r, codes::FORWARD_COMPAT_UNSUPPORTED)
        .message
        .contains("RTX 4090"));
    // Without opting in, the same data-center case is an error.
    let r = resolve_toml(&spec(body, "driver = \"550.54.15\"\ngpus = [\"H100\"]"));
    find(&r, codes::DRIVER_TOO_OLD);
}

#[test]
fn cubins_serve_newer_minors_so_ada_runs_on_sm86() {
    let r = resolve_toml(&spec(
        IDX,
        "driver = \"550.54.15\"\ngpus = [\"RTX 4090\", \"sm_87\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let lock = r.lock.unwrap();
    assert_eq!(lock.gpus[0].runs_via, "sm_86");
    assert_eq!(lock.gpus[1].runs_via, "sm_86");
}

#[test]
fn hopper_cubins_do_not_serve_blackwell() {
    let text = spec(IDX, "driver = \"575.57.08\"\ngpus = [\"B200\"]");
    let r = resolve_toml(&text);
    let d = find(&r, codes::ARCH_NOT_IN_WHEEL);
    assert!(d.message.contains("B200 (sm_100)"), "{}", d.message);
    // The hint names a build that carries sm_100 and that this driver runs: conda-forge's 2.5.1
    // reaches sm_100 only through its compute_90 PTX, so a clean build of another release wins.
    let hint = d.hint.as_deref().unwrap();
    assert!(hint.contains("2.11.0") || hint.contains("2.7.0"), "{hint}");
    assert_hint_locks(&text, hint);
}

#[test]
fn ptx_runs_forward_only_and_warns() {
    let body = "python = \"3.11\"\npytorch = \"2.11.0\"\ncuda = \"13.0\"";
    // sm_121 has a same-major cubin (sm_120); a 13.0 device only the compute_120 PTX.
    let r = resolve_toml(&spec(
        body,
        "driver = \"580.95.05\"\ngpus = [\"12.1\", \"13.0\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert_eq!(codes(&r), [codes::PTX_JIT]);
    // An 11.0 device (Jetson Thor's) is older than the PTX and has no cubin in the x86_64
    // wheel (Thor itself is aarch64: its platform is inferred, see the fleet tests).
    let r = resolve_toml(&spec(body, "driver = \"580.95.05\"\ngpus = [\"11.0\"]"));
    find(&r, codes::ARCH_NOT_IN_WHEEL);
}

#[test]
fn ptx_jit_under_minor_version_compatibility_is_an_error() {
    let body = "python = \"3.11\"\npytorch = \"2.7.0\"\ncuda = \"12.8\"";
    let r = resolve_toml(&spec(body, "driver = \"560.35.05\"\ngpus = [\"13.0\"]"));
    let d = find(&r, codes::DRIVER_TOO_OLD);
    assert!(d.message.contains("PTX"), "{}", d.message);
}

#[test]
fn blackwell_needs_its_own_minimum_driver() {
    let body = "python = \"3.11\"\npytorch = \"2.7.0\"\ncuda = \"12.8\"";
    let r = resolve_toml(&spec(body, "driver = \"560.35.05\"\ngpus = [\"B200\"]"));
    assert!(find(&r, codes::DRIVER_TOO_OLD)
        .message
        .contains("B200 (sm_100) needs driver >= 570.133.20"));
}

#[test]
fn python_outside_the_release_range_is_refused_with_the_newest_release_for_it() {
    let body = "python = \"3.13\"\npytorch = \"2.1.0\"\ncuda = \"11.8\"";
    let text = spec(body, "driver = \"550.54.15\"");
    let r = resolve_toml(&text);
    let d = find(&r, codes::PYTHON_UNSUPPORTED);
    assert!(d.message.contains("3.8–3.11"), "{}", d.message);
    // 2.14.1 has Python 3.13 wheels but no cu118 build: the newest that fits the spec is 2.7.0.
    let hint = d.hint.as_deref().unwrap();
    assert!(
        hint.contains("python = \"3.11\"") && hint.contains("pytorch = \"2.7.0\""),
        "{hint}"
    );
    assert_hint_locks(&text, hint);
}

#[test]
fn experimental_and_end_of_life_pythons_warn() {
    let r = resolve_toml(&spec(
        "python = \"3.13\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"",
        "driver = \"550.54.15\"",
    ));
    find(&r, codes::PYTHON_EXPERIMENTAL);
    let r = resolve_toml(&spec(
        "python = \"3.9\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"",
        "driver = \"550.54.15\"",
    ));
    assert!(find(&r, codes::PYTHON_EOL).message.contains("2025-10-31"));
    assert!(r.lock.is_some());
}

#[test]
fn pypi_source_uses_the_release_default_cuda() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.5.1\"",
        "driver = \"550.54.15\"",
    ));
    let lock = r.lock.unwrap();
    assert_eq!(lock.cuda_variant.as_deref(), Some("cu124"));
    assert_eq!(lock.install.pip[0], "torch==2.5.1");
    assert!(lock.install.pip_extra_index_urls.is_empty());
    let r = resolve_toml(&spec(
        "python = \"3.10\"\npytorch = \"1.12.1\"",
        "driver = \"440.33\"",
    ));
    find(&r, codes::UNCONFIRMED_FACT);
}

#[test]
fn the_pytorch_channel_ended_after_2_5_1() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.6.0\"\npytorch-cuda = \"12.4\"",
        "driver = \"550.54.15\"",
    ));
    let d = find(&r, codes::CHANNEL_DISCONTINUED);
    assert!(d.message.contains("2.5.1"));
    assert!(
        d.hint.as_deref().unwrap().contains("pytorch-index"),
        "{:?}",
        d.hint
    );
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.1.0\"\npytorch-cuda = \"12.4\"",
        "driver = \"550.54.15\"",
    ));
    let d = find(&r, codes::NO_SUCH_VARIANT);
    assert!(d.message.contains("11.8, 12.1"), "{}", d.message);
}

#[test]
fn pytorch_channel_lock_pins_channel_packages_and_mkl() {
    let r = resolve_toml(&spec(
        "python = \"3.10\"\npytorch = \"2.5.1\"\npytorch-cuda = \"11.8\"",
        "driver = \"550.54.15\"",
    ));
    let lock = r.lock.unwrap();
    assert_eq!(lock.channels, ["pytorch", "nvidia"]);
    assert!(lock
        .install
        .conda
        .contains(&"pytorch::pytorch==2.5.1".to_string()));
    assert!(lock
        .install
        .conda
        .contains(&"pytorch::pytorch-cuda=11.8".to_string()));
    assert!(lock.install.conda.contains(&"mkl==2024.0.0".to_string()));
    assert_eq!(lock.auto_added, ["mkl"]);
    // Without `nvidia`, pytorch-cuda cannot be solved.
    let r = resolve_toml(&spec("python = \"3.10\"\npytorch = \"2.5.1\"\npytorch-cuda = \"11.8\"\nchannels = [\"pytorch\", \"defaults\"]", ""));
    assert!(find(&r, codes::CHANNEL_REQUIRED).message.contains("nvidia"));
}

#[test]
fn conda_forge_builds_need_a_driver_reporting_their_cuda_major() {
    let body =
        "python = \"3.11\"\npytorch = \"2.11.0\"\ncuda = \"13.0\"\nchannels = [\"conda-forge\"]";
    let r = resolve_toml(&spec(body, "driver = \"550.54.15\""));
    let d = find(&r, codes::VIRTUAL_PACKAGE_UNSATISFIED);
    assert!(
        d.message.contains("__cuda >= 13") && d.message.contains("12.4"),
        "{}",
        d.message
    );
    assert!(d.hint.as_deref().unwrap().contains("12.9"), "{:?}", d.hint);
    // The 12.9 build installs on an R535 driver (12.2) and runs through minor-version compat.
    let body =
        "python = \"3.11\"\npytorch = \"2.11.0\"\ncuda = \"12.9\"\nchannels = [\"conda-forge\"]";
    let r = resolve_toml(&spec(body, "driver = \"535.104.05\""));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let lock = r.lock.unwrap();
    assert_eq!(lock.install.conda_override_cuda.as_deref(), Some("12.9"));
    assert!(lock
        .install
        .conda
        .contains(&"conda-forge::pytorch==2.11.0=cuda*".to_string()));
}

#[test]
fn glibc_floor_of_the_wheel_is_enforced() {
    let body = "python = \"3.11\"\npytorch = \"2.7.0\"\ncuda = \"12.6\"";
    let r = resolve_toml(&spec(body, "glibc = \"2.17\""));
    let d = find(&r, codes::GLIBC_TOO_OLD);
    assert!(d.message.contains("2.28"));
    // 2.6.0's 2.28 floor is unconfirmed: a warning, never a failure.
    let body = "python = \"3.11\"\npytorch = \"2.6.0\"\ncuda = \"12.6\"";
    let r = resolve_toml(&spec(body, "glibc = \"2.17\""));
    assert!(!r.has_errors());
    assert!(find(&r, codes::UNCONFIRMED_FACT).message.contains("glibc"));
}

#[test]
fn companions_follow_the_release_including_torchaudio_end() {
    let r = resolve_toml(&spec(IDX, ""));
    let lock = r.lock.unwrap();
    assert_eq!(lock.packages["torchvision"], "0.20.1");
    assert_eq!(lock.packages["torchaudio"], "2.5.1");
    let r = resolve_toml(&spec(
        "python = \"3.12\"\npytorch = \"2.14.1\"\ncuda = \"13.0\"",
        "",
    ));
    find(&r, codes::TORCHAUDIO_FROZEN);
    assert_eq!(r.lock.unwrap().packages["torchaudio"], "2.11.1");
    let r = resolve_toml(&spec("python = \"3.12\"\npytorch = \"2.14.1\"\ncuda = \"13.0\"\ntorchaudio = false\ntorchvision = false", ""));
    let lock = r.lock.unwrap();
    assert!(
        !lock.packages.contains_key("torchaudio") && !lock.packages.contains_key("torchvision")
    );
    assert_eq!(lock.install.pip, ["torch==2.14.1+cu130"]);
}

#[test]
fn numpy_1_is_pinned_for_torch_2_2_and_older() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.1.0\"\ncuda = \"12.1\"",
        "",
    ));
    let lock = r.lock.unwrap();
    assert_eq!(lock.packages["numpy"], "1.26.4");
    assert!(lock.install.pip.contains(&"numpy==1.26.4".to_string()));
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.1.0\"\ncuda = \"12.1\"\npip = [\"numpy==2.0.2\"]",
        "",
    ));
    assert!(find(&r, codes::CONFLICTING_PIN)
        .hint
        .as_deref()
        .unwrap()
        .contains("1.26.4"));
    // 2.5.1 works with NumPy 2: nothing is added.
    let r = resolve_toml(&spec(IDX, ""));
    assert!(!r.lock.unwrap().packages.contains_key("numpy"));
}

#[test]
fn windows_cuda_wheels_come_only_from_the_pytorch_index() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.5.1\"",
        "platform = \"win-64\"",
    ));
    let d = find(&r, codes::NO_SUCH_VARIANT);
    assert!(d.message.contains("CPU-only") && d.hint.as_deref().unwrap().contains("pytorch-index"));
    let r = resolve_toml(&spec(IDX, "platform = \"win-64\"\ndriver = \"551.78\""));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert_eq!(
        r.lock.unwrap().driver_min,
        "551.78",
        "Windows driver column"
    );
}

#[test]
fn aarch64_pypi_wheels_are_cpu_only_before_2_11() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.5.1\"",
        "platform = \"linux-aarch64\"",
    ));
    find(&r, codes::NO_SUCH_VARIANT);
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.11.0\"",
        "platform = \"linux-aarch64\"\ngpus = [\"Jetson Thor\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    find(&r, codes::UNCONFIRMED_FACT);
}

#[test]
fn an_entry_naming_two_gpus_is_unknown_with_one_gpu_per_entry_hinted() {
    let body = "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"";
    let r = resolve_toml(&spec(
        body,
        "driver = \"560.35.03\"\ngpus = [\"H100 P100\"]",
    ));
    let d = find(&r, codes::UNKNOWN_GPU);
    assert!(d.message.contains("more than one GPU"), "{}", d.message);
    assert_eq!(
        d.hint.as_deref(),
        Some("one GPU per entry: gpus = [\"H100\", \"P100\"]")
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let body = "python = \"3.13\"\npytorch = \"2.1.0\"\ncuda = \"12.1\"";
    let r = resolve_toml(&spec(
        body,
        "driver = \"470.82.01\"\ngpus = [\"H10\", \"B200\"]",
    ));
    let c = codes(&r);
    for want in [
        codes::UNKNOWN_GPU,
        codes::PYTHON_UNSUPPORTED,
        codes::DRIVER_TOO_OLD,
        codes::ARCH_NOT_IN_WHEEL,
    ] {
        assert!(c.contains(&want), "{want} missing from {c:?}");
    }
    assert!(find(&r, codes::UNKNOWN_GPU)
        .hint
        .as_deref()
        .unwrap()
        .contains("H100"));
}

#[test]
fn unconfirmed_facts_warn_but_never_fail() {
    // A K80 with 2.6 cu118: whether sm_37 is in the wheel is unconfirmed.
    let body = "python = \"3.11\"\npytorch = \"2.6.0\"\ncuda = \"11.8\"";
    let r = resolve_toml(&spec(body, "driver = \"470.82.01\"\ngpus = [\"K80\"]"));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert!(find(&r, codes::UNCONFIRMED_FACT).message.contains("sm_37"));
    // 13.0.3's own driver is borrowed from 13.0.2 and unconfirmed, but a driver that runs
    // 13.0.0 natively runs every 13.0 update natively: nothing rests on the doubtful row.
    let r = resolve_toml(&spec(
        "python = \"3.12\"\npytorch = \"2.14.1\"\ncuda = \"13.0\"",
        "driver = \"580.95.05\"",
    ));
    assert!(
        !codes(&r).contains(&codes::UNCONFIRMED_FACT),
        "{:#?}",
        r.diagnostics
    );
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::Native));
}

/// The lock records which of the build's facts rest on unconfirmed rows, so the smoke test can
/// warn instead of failing when an image differs from one of them.
#[test]
fn the_lock_names_the_build_facts_that_are_unconfirmed() {
    let lock = |t: &Table, body: &str, target: &str| {
        let spec = parse(&spec(body, target), Format::Toml, "s", t).unwrap();
        resolve(&spec, t, "0").lock.expect("a lock")
    };
    let t = table();
    assert!(lock(&t, IDX, "driver = \"550.54.15\"")
        .unconfirmed
        .is_empty());
    // One doubtful entry of the arch list, not the whole list.
    let cu118 = "python = \"3.11\"\npytorch = \"2.6.0\"\ncuda = \"11.8\"";
    let l = lock(&t, cu118, "driver = \"520.61.05\"");
    assert!(l.arch_list.contains(&"sm_37".to_string()));
    assert_eq!(l.unconfirmed, ["arch_list:sm_37"]);
    // Which variant PyPI's 1.12.1 is, is unconfirmed: every fact of the build rests on it.
    let pypi = lock(
        &t,
        "python = \"3.10\"\npytorch = \"1.12.1\"",
        "driver = \"440.33\"",
    );
    assert_eq!(pypi.unconfirmed, ["arch_list", "cuda", "cudnn", "ptx"]);
    // A row's own cuDNN and PTX confidences.
    let row = "torch = \"2.5\"\nvariant = \"cu124\"\ncuda = \"12.4.1\"\ncudnn = \"9.1.0.70\"\n";
    assert!(FIXTURE.contains(row));
    let doubtful = FIXTURE.replace(
        row,
        &format!("{row}cudnn_confidence = \"unconfirmed\"\nptx_confidence = \"unconfirmed\"\n"),
    );
    let t = Table::parse(&doubtful, "fixture").unwrap();
    assert_eq!(
        lock(&t, IDX, "driver = \"550.54.15\"").unconfirmed,
        ["cudnn", "ptx"]
    );
}

#[test]
fn old_drivers_that_dropped_or_kept_gpus() {
    // R595 no longer drives Pascal (last branch R580).
    let body = "python = \"3.12\"\npytorch = \"2.11.0\"\ncuda = \"12.6\"";
    let r = resolve_toml(&spec(body, "driver = \"595.45.04\"\ngpus = [\"P100\"]"));
    find(&r, codes::DRIVER_DROPS_GPU);
}

#[test]
fn unknown_torch_versions_name_the_releases_of_that_series() {
    let r = resolve_toml(&spec(
        "python = \"3.11\"\npytorch = \"2.5.7\"\ncuda = \"12.4\"",
        "",
    ));
    let d = find(&r, codes::NO_SUCH_PACKAGE_VERSION);
    assert!(d.hint.as_deref().unwrap().contains("2.5.1"));
}

#[test]
fn resolution_is_deterministic_and_format_independent() {
    let t = table();
    let toml_text = spec(IDX, "driver = \"535.104.05\"\ngpus = [\"A100\", \"8.9\"]");
    let yaml_text = "name: t\npython: 3.11\npytorch: 2.5.1\ncuda: 12.4\ntarget:\n  driver: 535.104.05\n  gpus: [A100, \"8.9\"]\n";
    let a = parse(&toml_text, Format::Toml, "a", &t).unwrap();
    let b = parse(yaml_text, Format::Yaml, "b", &t).unwrap();
    assert_eq!(a, b);
    assert_eq!(spec_hash(&a), spec_hash(&b));
    let la = resolve(&a, &t, &spec_hash(&a))
        .lock
        .unwrap()
        .to_toml()
        .unwrap();
    let lb = resolve(&b, &t, &spec_hash(&b))
        .lock
        .unwrap()
        .to_toml()
        .unwrap();
    assert_eq!(la, lb);
    assert_eq!(
        la,
        resolve(&a, &t, &spec_hash(&a))
            .lock
            .unwrap()
            .to_toml()
            .unwrap()
    );
}

#[test]
fn dev_jupyterlab_defaults_to_one_that_works_with_the_python() {
    let r = resolve_toml(&spec(IDX, ""));
    assert_eq!(r.lock.unwrap().image.jupyterlab, "4.4.10");
    let r = resolve_toml(&spec(
        "python = \"3.8\"\npytorch = \"2.1.0\"\ncuda = \"11.8\"",
        "",
    ));
    assert_eq!(r.lock.unwrap().image.jupyterlab, "3.6.8");
    let r = resolve_toml(&format!(
        "{}\n[image]\njupyterlab = \"4.3.0\"\n",
        spec(IDX, "")
    ));
    assert_eq!(r.lock.unwrap().image.jupyterlab, "4.3.0");
}

/// Every alternative a hint names locks the spec without an error.
fn assert_hint_locks(text: &str, hint: &str) {
    let body = hint
        .strip_prefix("use ")
        .or_else(|| hint.strip_prefix("pin it: "))
        .unwrap_or_else(|| panic!("not a proposal: {hint}"));
    let body = body.split(": it satisfies").next().unwrap();
    for alternative in body.split(", or ") {
        let changed = Proposal::parse(alternative)
            .and_then(|p| p.apply(text))
            .unwrap_or_else(|| panic!("hint `{alternative}` is not a proposal for\n{text}"));
        let r = resolve_toml(&changed);
        assert!(
            r.lock.is_some() && !r.has_errors(),
            "hint `{alternative}` does not lock:\n{changed}\n{:#?}",
            r.diagnostics
        );
    }
}

const TORCH28: &str = "python = \"3.11\"\npytorch = \"2.8.0\"\ncuda = \"12.8\"";

#[test]
fn no_reading_of_an_unknown_ptx_serves_a_gpu_below_the_lowest_cubin() {
    // 2.8.0 cu128 starts at sm_70 and its PTX is unconfirmed: PTX only runs forward, so no
    // PTX of this build could reach a P100 (sm_60), whatever the PTX fact turns out to be.
    let text = spec(TORCH28, "driver = \"570.124.06\"\ngpus = [\"P100\"]");
    let r = resolve_toml(&text);
    assert!(r.lock.is_none());
    let d = find(&r, codes::ARCH_NOT_IN_WHEEL);
    assert!(d.is_error() && d.message.contains("P100 (sm_60)"), "{d:?}");
    assert!(
        !codes(&r).contains(&codes::UNCONFIRMED_FACT),
        "{:#?}",
        r.diagnostics
    );
    assert_hint_locks(&text, d.hint.as_deref().unwrap());
}

#[test]
fn an_unknown_ptx_that_could_serve_the_gpu_only_warns() {
    // A 11.0 device has no cubin of its major; PTX for an arch of the build would serve it.
    let r = resolve_toml(&spec(TORCH28, "driver = \"575.57.08\"\ngpus = [\"11.0\"]"));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let d = find(&r, codes::UNCONFIRMED_FACT);
    assert!(d.message.contains("sm_110"), "{}", d.message);
    assert!(r.lock.is_some());
}

#[test]
fn a_family_floor_rules_out_every_toolkit_of_the_family() {
    // PyPI's 2.14.1 is CUDA 13.0.3, whose native driver is unconfirmed; but no CUDA 13 toolkit
    // runs below the confirmed 13.x floor (580.65.06), so 550 is too old in every reading.
    let text = spec(
        "python = \"3.12\"\npytorch = \"2.14.1\"",
        "driver = \"550.54.15\"\ngpus = [\"A100\"]",
    );
    let r = resolve_toml(&text);
    assert!(r.lock.is_none());
    let d = find(&r, codes::DRIVER_TOO_OLD);
    assert!(d.is_error() && d.message.contains(">= 580.65.06"), "{d:?}");
    assert!(
        !codes(&r).contains(&codes::UNCONFIRMED_FACT),
        "{:#?}",
        r.diagnostics
    );
    assert_hint_locks(&text, d.hint.as_deref().unwrap());
}

#[test]
fn above_the_floor_an_unconfirmed_native_driver_decides_only_the_mode() {
    let body = "python = \"3.12\"\npytorch = \"2.14.1\"\ncuda = \"13.0\"";
    // Between the floor and the (unconfirmed) native driver: minor-version compatibility in
    // the stated reading, native at best; it runs either way.
    let r = resolve_toml(&spec(body, "driver = \"580.82.07\""));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    find(&r, codes::DRIVER_MINOR_COMPAT);
    assert!(!r
        .diagnostics
        .iter()
        .any(|d| d.code == codes::UNCONFIRMED_FACT && d.field.as_deref() == Some("target.driver")));
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::MinorCompat));
}

#[test]
fn an_unconfirmed_floor_is_bounded_by_the_first_branch_of_its_family() {
    // Windows' 13.x floor (580.88) is unconfirmed; a driver of a branch that reports only 12.x
    // runs no CUDA 13 build whatever the floor is.
    assert_eq!(
        table().first_driver_reporting(13).map(|v| v.to_string()),
        Some("580".into())
    );
    let body = "python = \"3.12\"\npytorch = \"2.11.0\"\ncuda = \"13.0\"";
    let on = |driver: &str| {
        resolve_toml(&spec(
            body,
            &format!("platform = \"win-64\"\ndriver = \"{driver}\""),
        ))
    };
    let r = on("576.57");
    assert!(find(&r, codes::DRIVER_TOO_OLD).is_error());
    assert!(r.lock.is_none());
    // R580 below the stated floor: the floor's readings disagree.
    let about_driver = |r: &Resolution| {
        r.diagnostics
            .iter()
            .filter(|d| d.code == codes::UNCONFIRMED_FACT)
            .any(|d| d.field.as_deref() == Some("target.driver") && d.message.contains("580.88"))
    };
    let r = on("580.70");
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert!(about_driver(&r), "{:#?}", r.diagnostics);
    assert_eq!(r.lock.unwrap().driver_mode, Some(DriverMode::TooOld));
    // Above the stated floor: minor-version compatibility, unless the floor does not hold.
    let r = on("581.15");
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    find(&r, codes::DRIVER_MINOR_COMPAT);
    assert!(about_driver(&r), "{:#?}", r.diagnostics);
    assert_eq!(
        table()
            .family_floor(13, Os::Windows)
            .unwrap()
            .version
            .to_string(),
        "580.88"
    );
}

#[test]
fn hints_never_name_a_build_that_fails_on_the_target() {
    // PyPI publishes one CUDA build per release: a hint may not propose "pypi" for another.
    let text = spec(
        "python = \"3.12\"\npytorch = \"2.14.1\"",
        "driver = \"535.104.05\"\ngpus = [\"H100\"]",
    );
    let r = resolve_toml(&text);
    let d = find(&r, codes::DRIVER_TOO_OLD);
    assert_hint_locks(&text, d.hint.as_deref().unwrap());
    // 2.14.1 has no cu128; its cu130 (13.0.3, native driver unconfirmed) is below the 13.x
    // floor on R535, so only cu126 fits.
    let text = spec(
        "python = \"3.12\"\npytorch = \"2.14.1\"\ncuda = \"12.8\"",
        "driver = \"535.104.05\"",
    );
    let r = resolve_toml(&text);
    let hint = find(&r, codes::NO_SUCH_VARIANT).hint.clone().unwrap();
    assert!(hint.contains("cuda = \"12.6\""), "{hint}");
    assert_hint_locks(&text, &hint);
}

#[test]
fn hints_that_move_to_another_source_say_every_key_that_changes() {
    let text = spec(
        "python = \"3.11\"\npytorch = \"2.6.0\"\npytorch-cuda = \"12.4\"",
        "driver = \"550.54.15\"\ngpus = [\"A100\"]",
    );
    let r = resolve_toml(&text);
    let hint = find(&r, codes::CHANNEL_DISCONTINUED).hint.clone().unwrap();
    assert!(hint.contains("without pytorch-cuda"), "{hint}");
    assert_hint_locks(&text, &hint);
    // A wheel spec moved to the channel gets the channel's keys.
    let text = spec(
        "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.6\"",
        "driver = \"550.54.15\"\ngpus = [\"A100\"]",
    );
    let hint = find(&resolve_toml(&text), codes::NO_SUCH_VARIANT)
        .hint
        .clone()
        .unwrap();
    assert_hint_locks(&text, &hint);
}

#[test]
fn hints_are_left_out_when_nothing_locks() {
    // The unknown GPU fails every alternative: no build is proposed.
    let r = resolve_toml(&spec(IDX, "driver = \"470.82.01\"\ngpus = [\"H10\"]"));
    let hint = find(&r, codes::DRIVER_TOO_OLD).hint.clone().unwrap();
    assert_eq!(hint, "upgrade the driver on the target machines");
}

fn chosen_torch(body: &str, target: &str) -> String {
    let t = table();
    let s = parse_spec(&spec(body, target), Format::Toml, "spec.toml", &t)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(locks(&s, &t), "the chosen spec locks");
    s.pytorch.to_string()
}

#[test]
fn a_pytorch_range_chooses_the_newest_release_the_spec_locks_with() {
    let drv = "driver = \"550.54.15\"";
    // The pytorch channel ended with 2.5.1.
    let body = "python = \"3.11\"\npytorch = \"latest\"\npytorch-cuda = \"12.4\"";
    assert_eq!(chosen_torch(body, drv), "2.5.1");
    // cu124 wheels stop at 2.6.
    let body = "python = \"3.11\"\npytorch = \"latest\"\ncuda = \"12.4\"";
    assert_eq!(chosen_torch(body, drv), "2.6.0");
    // The user's range, with a pre-release bound.
    let body = "python = \"3.10\"\npytorch = \">=2.1,<2.6a0\"\ncuda = \"12.1\"";
    assert_eq!(chosen_torch(body, drv), "2.5.1");
    // PyPI's 2.14.1 (CUDA 13) does not run on R550: 2.11.0's cu130 neither; 2.8.0's cu128 does
    // through minor-version compatibility.
    let body = "python = \"3.12\"\npytorch = \">=2.8\"";
    assert_eq!(chosen_torch(body, drv), "2.8.0");
    // Nothing in the range locks: NO_MATCHING_BUILD, with a widened range that is proven.
    let t = table();
    let text = spec(
        "python = \"3.12\"\npytorch = \">=2.11\"\ncuda = \"12.4\"",
        drv,
    );
    let e = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap_err();
    let d = &e.diagnostics[0];
    assert_eq!(d.code, choose::codes::NO_MATCHING_BUILD, "{e}");
    let hint = d.hint.clone().unwrap();
    assert!(hint.starts_with("use pytorch = "), "{hint}");
    assert_hint_locks(&text, &hint);
}

#[test]
fn a_gpu_minimum_the_table_doubts_is_still_bounded_by_its_architecture() {
    let body = "python = \"3.11\"\npytorch = \"2.7.0\"\ncuda = \"12.8\"";
    let with = |t: &Table, driver: &str| {
        let text = spec(body, &format!("driver = \"{driver}\"\ngpus = [\"B200\"]"));
        let s = parse(&text, Format::Toml, "spec.toml", t).unwrap();
        resolve(&s, t, "0")
    };
    let mut t = table();
    let b200 = t.gpu.iter_mut().find(|g| g.name == "B200").unwrap();
    b200.confidence = crate::core::compat::Confidence::Unconfirmed;
    // Above Blackwell's confirmed 570.26 but below the doubted B200 row (570.133.20): a warning.
    let r = with(&t, "570.124.06");
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert!(find(&r, codes::UNCONFIRMED_FACT)
        .message
        .contains("570.133.20"));
    // Below the architecture's own minimum: an error whatever the B200 row says.
    let r = with(&t, "560.35.05");
    assert!(find(&r, codes::DRIVER_TOO_OLD).is_error());
}

#[test]
fn plain_http_locations_warn_and_still_lock_with_the_spec_s_pip_locations() {
    let body = format!(
        "{IDX}\nchannels = [\"conda-forge\", \"http://mirror.example/extras\"]\n\
         conda = [\"http://mirror.example/tools::rich=13.7.1\"]\n\
         pip-index-url = \"http://pypi.mirror.example/simple\"\n\
         pip-extra-index-urls = [\"https://pypi.nvidia.com\"]\n\
         pip-find-links = [\"http://wheels.example/torch.html\", \"wheels/pyg\"]"
    );
    let r = resolve_toml(&spec(&body, "driver = \"550.54.15\"\ngpus = [\"A100\"]"));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let insecure: Vec<(&str, &str)> = r
        .diagnostics
        .iter()
        .filter(|d| d.code == codes::INSECURE_SOURCE)
        .map(|d| (d.field.as_deref().unwrap(), d.hint.as_deref().unwrap()))
        .collect();
    assert_eq!(
        insecure,
        [
            (
                "channels",
                "use https://mirror.example/extras if the server offers it"
            ),
            (
                "conda",
                "use https://mirror.example/tools if the server offers it"
            ),
            (
                "pip-index-url",
                "use https://pypi.mirror.example/simple if the server offers it"
            ),
            (
                "pip-find-links",
                "use https://wheels.example/torch.html if the server offers it"
            ),
        ]
    );
    // PyTorch's index first (torch must come from it), then the spec's own, in pip's order.
    let lock = r.lock.unwrap();
    assert_eq!(
        lock.install.pip_extra_index_urls,
        [
            "https://download.pytorch.org/whl/cu124",
            "https://pypi.nvidia.com"
        ]
    );
    assert_eq!(
        lock.install.pip_index_url.as_deref(),
        Some("http://pypi.mirror.example/simple")
    );
    assert_eq!(
        lock.install.pip_find_links,
        ["http://wheels.example/torch.html", "wheels/pyg"]
    );
}

#[test]
fn a_spec_without_pip_locations_keeps_its_hash() {
    // The canonical JSON leaves the empty locations out: locks made before the keys existed
    // stay current.
    let t = table();
    let s = parse(&spec(IDX, ""), Format::Toml, "spec.toml", &t).unwrap();
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("pip_sources"), "{json}");
    let with = parse(
        &spec(&format!("{IDX}\npip-find-links = [\"wheels\"]"), ""),
        Format::Toml,
        "spec.toml",
        &t,
    )
    .unwrap();
    assert_ne!(spec_hash(&s), spec_hash(&with));
}

/// A base known to ship no Python (CUDA bases, plain distributions) is refused at lock time,
/// saying what to do; an image built FROM one, under another name, is left to the build.
#[test]
fn a_base_known_to_have_no_python_is_refused_at_lock_time() {
    let target = "driver = \"550.54.15\"\ngpus = [\"A100\"]";
    for base in [
        "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
        "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "nvcr.io/nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "debian:12.8-slim",
        "docker.io/library/ubuntu:24.04",
        &format!("busybox@sha256:{}", "a".repeat(64)),
    ] {
        let r = resolve_toml(&spec(&format!("{IDX}\n[image]\nbase = \"{base}\""), target));
        let d = find(&r, codes::BASE_HAS_NO_PYTHON);
        assert!(d.message.contains(base), "{}", d.message);
        assert!(d.hint.as_deref().unwrap().contains("python3-venv"), "{d:?}");
        assert!(r.lock.is_none(), "{base}");
    }
    for base in [
        "python:3.11.9-slim-bookworm",
        "mycorp/cuda-python:12.4.1",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "registry.local:5000/ubuntu-python:24.04",
    ] {
        let r = resolve_toml(&spec(&format!("{IDX}\n[image]\nbase = \"{base}\""), target));
        assert!(!codes(&r).contains(&codes::BASE_HAS_NO_PYTHON), "{base}");
    }
}

/// `[image] ca-bundle` reaches the lock (the build reads it); a spec without it keeps its
/// lock hash (the key is left out of the canonical JSON when unset).
#[test]
fn ca_bundle_is_locked_only_when_set() {
    let target = "driver = \"550.54.15\"\ngpus = [\"A100\"]";
    let plain = resolve_toml(&spec(IDX, target)).lock.unwrap();
    assert_eq!(plain.image.ca_bundle, None);
    assert!(!plain.to_toml().unwrap().contains("ca_bundle"));
    let with = resolve_toml(&spec(
        &format!("{IDX}\n[image]\nca-bundle = \"certs/corp.pem\""),
        target,
    ))
    .lock
    .unwrap();
    assert_eq!(with.image.ca_bundle.as_deref(), Some("certs/corp.pem"));
    assert_ne!(plain.hash().unwrap(), with.hash().unwrap());
}

const PYPI214: &str = "python = \"3.12\"\npytorch = \"2.14.1\"\nsource = \"pypi\"";

#[test]
fn a_grace_gpu_locks_linux_aarch64_with_the_aarch64_wheel_s_facts() {
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\ngpus = [\"GH200\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    // The series' own aarch64 row is read off its wheel: nothing rests on an unconfirmed fact.
    assert!(
        !codes(&r).contains(&codes::UNCONFIRMED_FACT),
        "{:#?}",
        r.diagnostics
    );
    let lock = r.lock.unwrap();
    assert_eq!(lock.platform, crate::core::spec::Platform::LinuxAarch64);
    assert_eq!(
        lock.arch_list,
        ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    );
    assert!(lock.ptx.is_empty());
    assert_eq!(lock.glibc_min, "2.28");
    assert!(lock.fleet.is_empty());
}

#[test]
fn a_mixed_fleet_gives_one_resolution_per_platform_deterministically() {
    let text = spec(
        PYPI214,
        "driver = \"580.126.20\"\ngpus = [\"H100\", \"GH200\"]",
    );
    let r = resolve_toml(&text);
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    let lock = r.lock.unwrap();
    use crate::core::spec::Platform;
    assert_eq!(
        lock.platforms(),
        [Platform::Linux64, Platform::LinuxAarch64]
    );
    let gpus =
        |l: &crate::core::lock::Lock| l.gpus.iter().map(|g| g.input.clone()).collect::<Vec<_>>();
    assert_eq!(gpus(&lock), ["H100"]);
    assert_eq!(gpus(&lock.fleet[0]), ["GH200"]);
    assert_eq!(
        lock.arch_list[0], "sm_75",
        "the x86_64 wheel starts at sm_75"
    );
    assert_eq!(
        lock.fleet[0].arch_list[0], "sm_80",
        "the aarch64 wheel at sm_80"
    );
    let again = resolve_toml(&text).lock.unwrap();
    assert_eq!(lock.to_toml().unwrap(), again.to_toml().unwrap());
    // Naming the fleet gives the same resolutions (the spec's hash aside).
    let named = spec(
        PYPI214,
        "driver = \"580.126.20\"\ngpus = [\"H100\", \"GH200\"]\nplatforms = [\"linux-aarch64\", \"linux-64\"]",
    );
    let n = resolve_toml(&named);
    assert!(!n.has_errors(), "{:#?}", n.diagnostics);
    assert_eq!(n.lock.unwrap().platforms(), lock.platforms());
    // The lock reads back, fleet and all.
    let back = crate::core::lock::Lock::from_toml(&lock.to_toml().unwrap()).unwrap();
    assert_eq!(back, lock);
}

#[test]
fn a_t4_on_linux_aarch64_is_refused_the_aarch64_wheel_starts_at_sm_80() {
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\nplatform = \"linux-aarch64\"\ngpus = [\"T4\"]",
    ));
    assert!(r.lock.is_none());
    let d = find(&r, codes::ARCH_NOT_IN_WHEEL);
    assert!(d.message.contains("T4"), "{}", d.message);
}

#[test]
fn a_gpu_outside_the_platform_s_machines_is_a_conflict_naming_both() {
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\nplatform = \"linux-64\"\ngpus = [\"GH200\"]",
    ));
    assert!(r.lock.is_none());
    let d = find(&r, codes::PLATFORM_CONFLICT);
    assert!(
        d.message.contains("GH200")
            && d.message.contains("linux-64")
            && d.message.contains("aarch64"),
        "{}",
        d.message
    );
    assert!(
        d.hint.as_deref().unwrap().contains("linux-aarch64"),
        "{:?}",
        d.hint
    );
    // A consumer card on linux-aarch64 conflicts too.
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\nplatform = \"linux-aarch64\"\ngpus = [\"RTX 5090\"]",
    ));
    find(&r, codes::PLATFORM_CONFLICT);
}

#[test]
fn jetson_orin_is_refused_it_runs_jetpack_builds() {
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\ngpus = [\"Jetson Orin\"]",
    ));
    assert!(r.lock.is_none());
    let d = find(&r, codes::JETPACK_ONLY);
    assert!(d.message.contains("JetPack"), "{}", d.message);
    assert!(d.hint.is_some());
}

#[test]
fn platform_and_platforms_together_are_a_spec_error() {
    let t = table();
    let text = spec(
        PYPI214,
        "platform = \"linux-64\"\nplatforms = [\"linux-64\", \"linux-aarch64\"]",
    );
    let e = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap_err();
    assert!(
        e.diagnostics
            .iter()
            .any(|d| d.message.contains("`platform` and `platforms`")),
        "{:#?}",
        e.diagnostics
    );
}

#[test]
fn an_aarch64_wheel_s_own_python_list_is_enforced() {
    // The fixture's 2.14 aarch64 row lists 3.11 to 3.13; the release itself has 3.10 too.
    let r = resolve_toml(&spec(
        "python = \"3.10\"\npytorch = \"2.14.1\"\nsource = \"pypi\"",
        "driver = \"580.126.20\"\ngpus = [\"GH200\"]",
    ));
    let d = find(&r, codes::PYTHON_UNSUPPORTED);
    assert!(
        d.message.contains("aarch64") && d.message.contains("3.11"),
        "{}",
        d.message
    );
    let r = resolve_toml(&spec(
        "python = \"3.10\"\npytorch = \"2.14.1\"\nsource = \"pypi\"",
        "driver = \"580.126.20\"\ngpus = [\"H100\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
}

#[test]
fn gpus_of_no_common_machine_conflict_without_a_hint_that_cannot_lock() {
    // GH200 (aarch64 only) and an RTX 5090 (x86_64 only) on one platform: no platform holds
    // both, so the hint names no platform (and proving one never loops).
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\nplatform = \"linux-64\"\ngpus = [\"GH200\", \"RTX 5090\"]",
    ));
    let d = find(&r, codes::PLATFORM_CONFLICT);
    assert!(
        !d.hint
            .as_deref()
            .unwrap()
            .contains("make [target] platform"),
        "{:?}",
        d.hint
    );
    // Without a platform the two give a fleet of both.
    let r = resolve_toml(&spec(
        PYPI214,
        "driver = \"580.126.20\"\ngpus = [\"GH200\", \"RTX 5090\"]",
    ));
    assert!(!r.has_errors(), "{:#?}", r.diagnostics);
    assert_eq!(r.lock.unwrap().fleet.len(), 1);
}

#[test]
fn a_range_nothing_locks_carries_the_closest_candidates_own_reason_and_proven_hint() {
    // The pytorch channel never built for Linux aarch64: every version in the range passes
    // the table's columns and fails the lock itself. The refusal says why, and its hint (the
    // closest candidate's, proven) locks the range too.
    let t = table();
    let text = spec(
        "python = \"3.11\"\npytorch = \"*\"\npytorch-cuda = \"12.4\"",
        "driver = \"580.95.05\"\ngpus = [\"GH200\"]",
    );
    let e = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap_err();
    let d = &e.diagnostics[0];
    assert_eq!(d.code, choose::codes::NO_MATCHING_BUILD, "{e}");
    assert!(d.message.contains("NO_SUCH_VARIANT: "), "{}", d.message);
    assert!(d.message.contains("aarch64"), "{}", d.message);
    let hint = d.hint.clone().unwrap();
    assert!(hint.starts_with("use "), "{hint}");
    assert_hint_locks(&text, &hint);
}
