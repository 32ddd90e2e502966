//! The chooser on fleets (GPUs x driver) against the small fixture table
//! (tests/fixtures/compat-fixture.toml): which torch and CUDA it takes, by the one [`Rank`],
//! and that hints order their alternatives by the same rank.

use crate::core::compat::Table;
use crate::core::resolve::{locks, parse_spec, resolve};
use crate::core::spec::{Format, Spec};

const FIXTURE: &str = include_str!("../../../../tests/fixtures/compat-fixture.toml");

fn table() -> Table {
    Table::parse(FIXTURE, "fixture").unwrap_or_else(|f| panic!("{f}"))
}

/// The spec `body` for the target `[target] driver, gpus`, chosen and proven.
fn chosen(body: &str, driver: &str, gpus: &[&str]) -> Spec {
    let t = table();
    let gpus: Vec<String> = gpus.iter().map(|g| format!("\"{g}\"")).collect();
    let text = format!(
        "name = \"fleet\"\n{body}\n[target]\ndriver = \"{driver}\"\ngpus = [{}]\n",
        gpus.join(", ")
    );
    let s = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap_or_else(|e| panic!("{e}"));
    assert!(locks(&s, &t), "the chosen spec locks");
    s
}

/// The torch release and the CUDA toolkit (`major.minor`) the chosen spec locks to.
fn torch_cuda(s: &Spec) -> (String, String) {
    let lock = resolve(s, &table(), "0").lock.expect("a lock");
    let cuda = crate::core::version::Version::parse(&lock.cuda)
        .map(|v| v.major_minor())
        .unwrap_or_default();
    (s.pytorch.to_string(), cuda)
}

fn pair(torch: &str, cuda: &str) -> (String, String) {
    (torch.to_string(), cuda.to_string())
}

/// Any torch and any CUDA from the PyTorch index, Python 3.11.
const ANY_INDEX: &str =
    "python = \"3.11\"\npytorch = \"*\"\nsource = \"pytorch-index\"\ncuda = \"*\"";

#[test]
fn a100_on_driver_535_takes_the_newest_torch_the_driver_runs_natively() {
    // R535 runs CUDA <= 12.2 natively; 2.7.0's cu118 is the newest native build (2.14.1's
    // cu126 would need minor-version compatibility, which the rank puts after native).
    let s = chosen(ANY_INDEX, "535.104.05", &["A100"]);
    assert_eq!(torch_cuda(&s), pair("2.7.0", "11.8"));
    let why = &s.choices["pytorch"].reason;
    assert!(why.contains("natively"), "{why}");
}

#[test]
fn h100_on_driver_550_takes_the_newest_native_torch_then_its_newest_cuda() {
    // R550 runs up to 12.4 natively: 2.7.0 (cu118 only at or below 12.4) beats 2.6.0's cu124,
    // since the newest torch comes before the newest CUDA.
    let s = chosen(ANY_INDEX, "550.54.15", &["H100"]);
    assert_eq!(torch_cuda(&s), pair("2.7.0", "11.8"));
    // Held to 2.6, the newest CUDA for it wins.
    let body = ANY_INDEX.replace("pytorch = \"*\"", "pytorch = \"==2.6.*\"");
    let s = chosen(&body, "550.54.15", &["H100"]);
    assert_eq!(torch_cuda(&s), pair("2.6.0", "12.4"));
}

#[test]
fn a_mixed_fleet_takes_the_newest_build_every_gpu_runs() {
    // On R580, H100 alone takes 2.14.1's cu130; a V100 (sm_70) beside it rules cu130 out
    // (no sm_70 cubin), so the fleet gets 2.14.1's cu126.
    let s = chosen(ANY_INDEX, "580.95.05", &["H100"]);
    assert_eq!(torch_cuda(&s), pair("2.14.1", "13.0"));
    let s = chosen(ANY_INDEX, "580.95.05", &["V100", "H100"]);
    assert_eq!(torch_cuda(&s), pair("2.14.1", "12.6"));
}

#[test]
fn without_a_cuda_selector_pypi_gives_the_release_whose_build_the_driver_runs_natively() {
    // PyPI's CUDA is the release's: 2.14.1 and 2.11.0 (cu130) need R580; 2.8.0 (cu128) and
    // 2.7.0 (cu126) run on R550 only through minor-version compatibility; 2.6.0's cu124 runs
    // natively.
    let body = "python = \"3.11\"\npytorch = \">=2.1\"";
    let s = chosen(body, "550.54.15", &["A100"]);
    assert_eq!(s.source, crate::core::spec::Source::Pypi);
    assert_eq!(torch_cuda(&s), pair("2.6.0", "12.4"));
}

#[test]
fn a_hint_prefers_what_the_chooser_would_choose() {
    // 2.5.1 has no cu126: the hint and the choice for `cuda = "*"` name the same build, the
    // newest CUDA R535 runs natively (cu121), before the newer cu124 through minor-version
    // compatibility.
    let t = table();
    let target = "[target]\ndriver = \"535.104.05\"\ngpus = [\"A100\"]\n";
    let text =
        format!("name = \"t\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.6\"\n{target}");
    let s = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap();
    let r = resolve(&s, &t, "0");
    let d = r
        .diagnostics
        .iter()
        .find(|d| d.code == crate::core::resolve::codes::NO_SUCH_VARIANT)
        .unwrap_or_else(|| panic!("{:#?}", r.diagnostics));
    let hint = d.hint.as_deref().unwrap();
    assert!(hint.contains("cuda = \"12.1\""), "{hint}");
    let s = chosen(
        "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"*\"",
        "535.104.05",
        &["A100"],
    );
    assert_eq!(torch_cuda(&s), pair("2.5.1", "12.1"));
}

#[test]
fn cuda_version_is_conda_forges_selector_exact_or_a_range() {
    // Exact: the source is conda-forge, as with `cuda` and `channels = ["conda-forge"]`.
    let s = chosen(
        "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda-version = \"12.6\"",
        "560.35.05",
        &["A100"],
    );
    assert_eq!(s.source, crate::core::spec::Source::CondaForge);
    assert_eq!(s.channels, vec!["conda-forge".to_string()]);
    assert_eq!(torch_cuda(&s), pair("2.5.1", "12.6"));
    // The same spec written with `cuda` locks to the same bytes.
    let same = chosen(
        "python = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.6\"\nchannels = [\"conda-forge\"]",
        "560.35.05",
        &["A100"],
    );
    let t = table();
    assert_eq!(resolve(&s, &t, "0").lock, resolve(&same, &t, "0").lock);
    // A conda match-spec range, chosen and recorded under the key as written.
    let s = chosen(
        "python = \"3.11\"\npytorch = \"*\"\ncuda-version = \">=12\"",
        "580.95.05",
        &["H100"],
    );
    assert_eq!(torch_cuda(&s), pair("2.11.0", "13.0"));
    let c = &s.choices["cuda-version"];
    assert_eq!((c.asked.as_str(), c.chosen.as_str()), (">=12", "13.0"));
    assert!(
        c.reason.starts_with("cuda-version >=12 on conda-forge"),
        "{}",
        c.reason
    );
}

#[test]
fn cuda_version_beside_cuda_or_for_another_source_is_refused() {
    let t = table();
    for (body, says) in [
        (
            "cuda = \"12.6\"\ncuda-version = \"12.6\"",
            "`cuda` and `cuda-version` are the same key",
        ),
        (
            "source = \"pytorch-index\"\ncuda-version = \"12.6\"",
            "source `pytorch-index` takes `cuda`",
        ),
        (
            "source = \"pytorch-channel\"\ncuda-version = \"12.4\"",
            "takes `pytorch-cuda`",
        ),
    ] {
        let text = format!(
            "name = \"t\"\npython = \"3.11\"\npytorch = \"2.5.1\"\n{body}\n[target]\ndriver = \"560.35.05\"\n"
        );
        let e = parse_spec(&text, Format::Toml, "spec.toml", &t).unwrap_err();
        let d = e
            .diagnostics
            .iter()
            .find(|d| d.message.contains(says))
            .unwrap_or_else(|| panic!("{e}"));
        assert_eq!(d.code, crate::core::spec::codes::INVALID_SPEC);
        // Located at the key as written.
        let at = d.location.as_ref().map(|l| l.line);
        let line = text
            .lines()
            .position(|l| l.starts_with("cuda-version"))
            .map(|i| i + 1);
        assert_eq!(at, line, "{e}");
    }
}

/// The fixture table with torch 2.14's cu130 wheel (and, with `both`, its cu126 wheel too)
/// carrying no sm_90 cubin, only compute_86 PTX: an H100 runs it by PTX JIT.
fn ptx_only_table(both: bool) -> Table {
    let native = "arch = [\"7.5\", \"8.0\", \"8.6\", \"9.0\", \"10.0\", \"12.0\"]\nptx = [\"12.0\"]\nsource = \"fx\"\n\n[[wheel_aarch64]]";
    let jit = "arch = [\"7.5\", \"8.0\", \"8.6\", \"10.0\", \"12.0\"]\nptx = [\"8.6\"]\nsource = \"fx\"\n\n[[wheel_aarch64]]";
    assert!(FIXTURE.contains(native), "the fixture's last cu130 row");
    let mut text = FIXTURE.replace(native, jit);
    if both {
        let cu126 = "torch = \"2.14\"\nvariant = \"cu126\"\ncuda = \"12.6.3\"\ncudnn = \"9.10.2.21\"\narch = [\"6.0\", \"7.0\", \"7.5\", \"8.0\", \"8.6\", \"9.0\"]\nptx = []";
        assert!(text.contains(cu126), "the fixture's 2.14 cu126 row");
        text = text.replace(
            cu126,
            &cu126
                .replace(", \"9.0\"]", "]")
                .replace("ptx = []", "ptx = [\"8.6\"]"),
        );
    }
    Table::parse(&text, "fixture").unwrap_or_else(|f| panic!("{f}"))
}

/// The spec `body` for H100 on R580, parsed (and so chosen) against `t`.
fn on_h100(body: &str, t: &Table) -> Spec {
    let text =
        format!("name = \"fleet\"\n{body}\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H100\"]\n");
    parse_spec(&text, Format::Toml, "spec.toml", t).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_cubin_for_every_gpu_comes_before_ptx_jit_in_the_choice_and_in_explain() {
    // 2.14.1's cu130 serves H100 only by JIT-compiling PTX, its cu126 by a cubin: the choice
    // takes cu126 although cu130 is the newer CUDA (the same table's unmodified rows choose
    // cu130, `a_mixed_fleet_takes_the_newest_build_every_gpu_runs`).
    let t = ptx_only_table(false);
    let s = on_h100(ANY_INDEX, &t);
    let lock = resolve(&s, &t, "0").lock.expect("a lock");
    assert_eq!(
        (s.pytorch.to_string(), lock.cuda.as_str()),
        ("2.14.1".into(), "12.6.3")
    );
    assert!(
        lock.gpus.iter().all(|g| g.runs_via == "sm_90"),
        "{:?}",
        lock.gpus
    );
    // explain weighs in the same order: the cubin build first, the PTX one after it.
    let u = match crate::core::spec::parse_ranged(
        &format!(
            "name = \"fleet\"\n{ANY_INDEX}\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H100\"]\n"
        ),
        Format::Toml,
        "spec.toml",
        &t,
    ) {
        Ok(crate::core::spec::Parsed::Ranged(u)) => u,
        _ => panic!("a ranged spec"),
    };
    let w = crate::core::resolve::choose::weigh(&u, &t, &Default::default(), true);
    let at = |name: &str| {
        w.candidates
            .iter()
            .position(|c| c.pytorch.to_string() == "2.14.1" && c.build_name == name)
            .unwrap_or_else(|| panic!("2.14.1 {name} weighed"))
    };
    assert!(at("cu126") < at("cu130"));
    assert_eq!(w.chosen, Some(at("cu126")));
}

#[test]
fn an_older_torch_with_cubins_beats_a_newer_one_only_ptx_serves_and_the_reason_says_so() {
    // Every 2.14.1 build reaches H100 only by PTX: 2.11.0's cu130, with its sm_90 cubin, wins.
    let t = ptx_only_table(true);
    let s = on_h100(ANY_INDEX, &t);
    let lock = resolve(&s, &t, "0").lock.expect("a lock");
    assert_eq!(
        (s.pytorch.to_string(), lock.cuda.as_str()),
        ("2.11.0".into(), "13.0.2")
    );
    assert!(!s.choices["pytorch"].reason.contains("PTX"));
    // Held to 2.14, PTX JIT is all there is: chosen, and the reason names the GPU.
    let held = ANY_INDEX.replace("pytorch = \"*\"", "pytorch = \"==2.14.*\"");
    let s = on_h100(&held, &t);
    assert_eq!(s.pytorch.to_string(), "2.14.1");
    let why = &s.choices["pytorch"].reason;
    assert!(
        why.contains("no build there carries a cubin for every target GPU: H100 (sm_90) runs it through PTX JIT (compute_86)"),
        "{why}"
    );
}

#[test]
fn a_hint_prefers_a_cubin_build_as_the_chooser_does() {
    // torch 2.14.1 has no cu129: the hint names the build a range would choose, cu126 (a cubin
    // for H100), not the newer cu130 (PTX JIT only).
    let t = ptx_only_table(false);
    let text = "name = \"t\"\npython = \"3.11\"\npytorch = \"2.14.1\"\ncuda = \"12.9\"\n[target]\ndriver = \"580.95.05\"\ngpus = [\"H100\"]\n";
    let s = parse_spec(text, Format::Toml, "spec.toml", &t).unwrap();
    let r = resolve(&s, &t, "0");
    let d = r
        .diagnostics
        .iter()
        .find(|d| d.code == crate::core::resolve::codes::NO_SUCH_VARIANT)
        .unwrap_or_else(|| panic!("{:#?}", r.diagnostics));
    let hint = d.hint.as_deref().unwrap();
    assert!(hint.contains("cuda = \"12.6\""), "{hint}");
}
