//! End-to-end tests against the real Docker engine on this machine: base images are made
//! locally (tests/docker/engine_support.rs), nothing is pulled. Outside CI they are reported as ignored, saying
//! why, when no engine answers; with CI=true they fail instead. Every test checks that no smoke
//! container (label `dev.envbuild.smoke=1`) is left behind.

use crate::engine_support::{self as support, Docker};
use assert_cmd::Command;
use envbuild::app::image::{ImageOptions, ImageRun, RenderedImage};
use envbuild::app::test::SmokeSettings;
use envbuild::core::render::{LABEL_LOCK_SHA256, LABEL_LOCK_SUMMARY, LABEL_VARIANT};
use envbuild::infra::docker::build::PullPolicy;
use envbuild::infra::docker::run::Interrupt;
use envbuild::infra::docker::{self, codes, images, Engine};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Every test in this file, for the harness (tests/docker/main.rs): a new Docker test is a plain
/// `fn` (no `#[test]`) plus its name here.
pub fn trials() -> Vec<libtest_mimic::Trial> {
    trials![
        image_installs_a_wheel_from_a_find_links_directory_of_the_project,
        unreachable_engine_is_a_clear_error,
        another_runs_smoke_container_is_not_counted,
        missing_image_is_named,
        canned_reports_drive_verdict_table_json_and_junit,
        an_images_own_entrypoint_does_not_hijack_the_smoke_run,
        test_without_a_lock_gives_the_shm_the_images_expectations_ask_for,
        image_without_python_reports_no_report,
        gpus_all_without_nvidia_runtime_is_no_gpu_runtime,
        hanging_smoke_test_times_out_and_is_removed,
        sigint_during_the_smoke_test_removes_the_container,
        sigterm_during_the_smoke_test_removes_the_container,
        sighup_during_the_smoke_test_removes_the_container,
        sigquit_during_the_smoke_test_removes_the_container,
        a_second_sigint_during_cleanup_ends_at_once_naming_the_container,
        failing_run_step_names_step_command_and_output,
        missing_base_image_is_named_with_a_hint,
        unchanged_lock_skips_the_build_and_late_changes_rebuild_only_late_layers,
        all_variants_get_their_own_tags,
        torch_missing_from_the_base_is_reported,
        cpu_only_torch_is_reported_by_image_and_by_test,
        build_context_is_deterministic_and_minimal,
        interrupted_build_stops_and_leaves_no_container,
        image_from_a_spec_whose_base_lacks_the_declared_torch_is_torch_missing,
        second_image_with_an_unchanged_lock_is_a_sub_second_no_op,
        doctor_proves_the_engine_cannot_give_a_gpu,
        doctor_probes_the_locks_own_image,
        local_wheels_send_only_the_projects_wheel_files_to_the_engine,
        #[ignore = "downloads ~3 GB of wheels from PyPI; run with `cargo test --test docker real_pypi -- --ignored`"]
        real_pypi_torch_2141_image_passes_the_cpu_smoke_test,
    ]
}

pub(crate) fn options(cache: &std::path::Path, gpus: bool) -> ImageOptions {
    ImageOptions {
        variants: vec!["runtime".into()],
        tags: vec![],
        rebuild: false,
        retest: false,
        smoke: SmokeSettings {
            gpus,
            timeout: Duration::from_secs(120),
            shm_bytes: 256 << 20,
            run_id: support::run_id(),
        },
        cache_dir: Some(cache.to_path_buf()),
        // Nothing here may come from a registry unless a test asks for it.
        pull: PullPolicy::Never,
        push: None,
        cache_from: Vec::new(),
        build_args: BTreeMap::new(),
    }
}

/// `app::image::build_and_test` with its progress ignored.
pub(crate) async fn build_and_test(
    engine: &Engine,
    rendered: &RenderedImage,
    opts: &ImageOptions,
    interrupt: Interrupt,
) -> Result<ImageRun, envbuild::core::diag::Failure> {
    envbuild::app::image::build_and_test(engine, rendered, opts, interrupt, &mut |_| {}).await
}

pub(crate) fn rendered(name: &str, lock_seed: &str, files: &[(&str, &str)]) -> RenderedImage {
    RenderedImage {
        files: files
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
        dockerfile: "Dockerfile".into(),
        image_name: name.into(),
        lock_hash: support::fake_lock_hash(lock_seed),
        content_sha256: None,
        lock_summary: r#"{"test":true}"#.into(),
        platform: None,
        tag_suffix: String::new(),
    }
}

fn codes_of(run: &ImageRun) -> Vec<String> {
    run.smokes
        .iter()
        .flat_map(|s| match &s.outcome {
            Ok(o) => o
                .report
                .checks
                .iter()
                .map(|c| c.code.clone())
                .collect::<Vec<_>>(),
            Err(f) => f.diagnostics.iter().map(|d| d.code.to_string()).collect(),
        })
        .collect()
}

pub(crate) fn envbuild() -> Command {
    let mut cmd = Command::cargo_bin("envbuild").expect("binary");
    // Its smoke containers count as this test process's (the leftover checks filter by it).
    cmd.env("ENVBUILD_RUN_ID", support::run_prefix());
    cmd
}

/// Run `cmd` (an `envbuild ... --json`) as a CI job does (`CI=true`, no job summary): its
/// output, its stderr and its `--json` document.
pub(crate) fn ci_json(cmd: &mut Command) -> (std::process::Output, String, serde_json::Value) {
    let out = cmd
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("CI", "true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}\n{err}"));
    (out, err, doc)
}

pub(crate) fn nonce() -> String {
    docker::new_run_id()
}

pub(crate) fn interrupt(d: &Docker) -> Interrupt {
    use futures_util::FutureExt;
    // Tests never interrupt through a signal here; a future that never resolves stands in.
    let _ = d;
    futures_util::future::pending::<()>().boxed().shared()
}

fn unreachable_engine_is_a_clear_error() {
    let out = envbuild()
        .args(["test", "anything:1", "--gpus", "none"])
        .env("DOCKER_HOST", "unix:///nonexistent/envbuild-test.sock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ENGINE_UNREACHABLE"), "{err}");
    assert!(err.contains("DOCKER_HOST"), "hint names DOCKER_HOST: {err}");
}

/// Another envbuild run on the same engine (or a crashed one) has smoke containers: this run's
/// leftover checks count only containers with its own run id.
fn another_runs_smoke_container_is_not_counted() {
    let Some(d) = support::engine("another_runs_smoke_container_is_not_counted") else {
        return;
    };
    let image = support::busybox_image(&d);
    let other = d.create_smoke_container(&image, &format!("other{}", nonce()));
    let ours = d.create_smoke_container(&image, &support::run_id());
    let counted = d.smoke_containers();
    d.remove_container(&other);
    d.remove_container(&ours);
    assert_eq!(
        counted,
        vec![ours],
        "another run's container {other} was counted"
    );
    d.assert_no_smoke_container("after removing both");
}

fn missing_image_is_named() {
    let Some(d) = support::engine("missing_image_is_named") else {
        return;
    };
    drop(d);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("j.xml");
    let out = envbuild()
        .args([
            "test",
            "envbuild-test/not-here:1",
            "--gpus",
            "none",
            "--json",
            "--junit",
        ])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // The reports are written for a run that never reached the smoke test, too.
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["verdict"], "fail");
    assert_eq!(doc["smoke"][0]["error"][0]["code"], "IMAGE_NOT_FOUND");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<error") && xml.contains("IMAGE_NOT_FOUND"),
        "{xml}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("IMAGE_NOT_FOUND") && err.contains("envbuild-test/not-here:1"),
        "{err}"
    );
}

fn canned_reports_drive_verdict_table_json_and_junit() {
    let Some(d) = support::engine("canned_reports_drive_verdict_table_json_and_junit") else {
        return;
    };
    let pass = support::reporting_image(
        &d,
        "pass",
        &support::canned_report("pass", &[("torch_import", "pass", "OK")]),
        0,
    );
    let fail = support::reporting_image(
        &d,
        "cpu-build",
        &support::canned_report(
            "fail",
            &[
                ("torch_import", "pass", "OK"),
                ("torch_cuda_build", "fail", "TORCH_CPU_BUILD"),
            ],
        ),
        1,
    );
    let out = envbuild()
        .args(["test", &pass, "--gpus", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("PASS: 1 passed"), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("smoke.xml");
    let out = envbuild()
        .args(["test", &fail, "--gpus", "none", "--json", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SMOKE_FAILED") && err.contains("TORCH_CPU_BUILD (torch_cuda_build)"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["verdict"], "fail");
    assert_eq!(
        doc["smoke"][0]["report"]["checks"][1]["code"],
        "TORCH_CPU_BUILD"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<failure") && xml.contains("TORCH_CPU_BUILD"),
        "{xml}"
    );
    d.assert_no_smoke_container("after canned reports");
}

/// An image's own ENTRYPOINT would run with the smoke command as its arguments; the smoke run
/// replaces it (`docker run --entrypoint`), so the script, not the entrypoint, answers.
fn an_images_own_entrypoint_does_not_hijack_the_smoke_run() {
    let Some(d) = support::engine("an_images_own_entrypoint_does_not_hijack_the_smoke_run") else {
        return;
    };
    let report = support::canned_report("pass", &[("torch_import", "pass", "OK")]);
    let script = format!("#!/bin/sh\ncat <<'EOF'\n{report}\nEOF\nexit 0\n");
    let image = support::busybox_stand_in_with(
        &d,
        "entrypoint",
        &script,
        &[],
        &[r#"ENTRYPOINT ["/bin/sh", "-c", "echo 'the image entrypoint ran' >&2; exit 3"]"#],
    );
    let out = envbuild()
        .args(["test", &image, "--gpus", "none"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("PASS: 1 passed"), "{stdout}");
    assert!(!stderr.contains("SMOKE_BAD_OUTPUT"), "{stderr}");
    d.assert_no_smoke_container("after an ENTRYPOINT image");
}

/// A stand-in `python3` that passes only when `/dev/shm` is at least 2 GiB and the expectations
/// it was given ask for 2 GiB and carry a time budget; its detail says what it saw.
const SHM_STAND_IN: &str = r#"#!/bin/sh
kb=$(/bin/busybox df -k /dev/shm | /bin/busybox awk 'NR==2 {print $2}')
e=/opt/envbuild/expect.json
if [ "$kb" -ge 2097152 ] && /bin/busybox grep -q '"budget_s"' $e \
   && /bin/busybox grep -q '"min_shm_bytes": 2147483648' $e; then
  st=pass; code=OK; rc=0
else
  st=fail; code=SHM_TOO_SMALL; rc=1
fi
seen=$(/bin/busybox tr -d '\n"' < $e)
cat <<EOF
{"schema": 1, "status": "$st", "mode": "cpu", "duration_s": 0.01, "environment": {},
 "checks": [{"name": "shm", "status": "$st", "code": "$code", "required": true,
             "detail": "/dev/shm is $kb KiB; expect.json: $seen"}]}
EOF
exit $rc
"#;

/// `envbuild test IMAGE` without `--lock` reads the image's own expectations first: its
/// `/dev/shm` is the size they ask for (2 GiB here, over the 1 GiB default), and the copy the
/// script reads carries a time budget. The stand-in `python3` fails unless both hold.
fn test_without_a_lock_gives_the_shm_the_images_expectations_ask_for() {
    let name = "test_without_a_lock_gives_the_shm_the_images_expectations_ask_for";
    let Some(d) = support::engine(name) else {
        return;
    };
    let image = support::busybox_stand_in_with(
        &d,
        "shm",
        SHM_STAND_IN,
        &[(
            "opt/envbuild/expect.json",
            r#"{"min_shm_bytes": 2147483648}"#,
        )],
        &[],
    );
    let out = envbuild()
        .args(["test", &image, "--gpus", "none", "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let check = &doc["smoke"][0]["report"]["checks"][0];
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert_eq!(check["code"], "OK", "{check}");
    // Given expectations of its own (here none), the image's file is not read: 1 GiB, a fail.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("expect.json");
    std::fs::write(&empty, "{}").unwrap();
    let out = envbuild()
        .args(["test", &image, "--gpus", "none", "--json", "--expect-file"])
        .arg(&empty)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    assert_eq!(
        doc["smoke"][0]["report"]["checks"][0]["code"],
        "SHM_TOO_SMALL"
    );
    d.assert_no_smoke_container("after the shm image");
}

fn image_without_python_reports_no_report() {
    let Some(d) = support::engine("image_without_python_reports_no_report") else {
        return;
    };
    let bb = support::busybox_image(&d);
    let out = envbuild()
        .args(["test", &bb, "--gpus", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("SMOKE_PYTHON_NOT_FOUND") && err.contains("python3"),
        "{err}"
    );
    d.assert_no_smoke_container("after a python-less image");
}

fn gpus_all_without_nvidia_runtime_is_no_gpu_runtime() {
    let Some(d) = support::engine("gpus_all_without_nvidia_runtime_is_no_gpu_runtime") else {
        return;
    };
    let runtimes = d.runtimes();
    if runtimes.iter().any(|r| r.contains("nvidia")) {
        // Not a missing engine: this engine may well give GPUs, so the premise does not hold.
        support::skip_because(
            "gpus_all_without_nvidia_runtime_is_no_gpu_runtime",
            &format!("the engine has an NVIDIA runtime ({runtimes:?}): NO_GPU_RUNTIME cannot be provoked"),
        );
        return;
    }
    let pass = support::reporting_image(
        &d,
        "pass",
        &support::canned_report("pass", &[("torch_import", "pass", "OK")]),
        0,
    );
    let out = envbuild()
        .args(["test", &pass, "--gpus", "all"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("NO_GPU_RUNTIME"), "{err}");
    assert!(
        err.contains("--gpus none"),
        "hint offers --gpus none: {err}"
    );
    d.assert_no_smoke_container("after NO_GPU_RUNTIME");
}

fn hanging_smoke_test_times_out_and_is_removed() {
    let Some(d) = support::engine("hanging_smoke_test_times_out_and_is_removed") else {
        return;
    };
    let hang = support::hanging_image(&d);
    let started = Instant::now();
    let out = envbuild()
        .args(["test", &hang, "--gpus", "none", "--timeout", "3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("SMOKE_TIMEOUT") && err.contains("3s"), "{err}");
    assert!(
        err.contains("started"),
        "the script's stderr is shown: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    d.assert_no_smoke_container("after a timeout");
}

/// `envbuild test` on the hanging image, returned once its smoke container runs.
fn smoke_test_running(d: &Docker) -> std::process::Child {
    let hang = support::hanging_image(d);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("envbuild"))
        .args(["test", &hang, "--gpus", "none", "--timeout", "120"])
        .env("ENVBUILD_RUN_ID", support::run_prefix())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the smoke container exists (and a little more so it runs).
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.smoke_containers().is_empty() {
        assert!(Instant::now() < deadline, "no smoke container appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    child
}

fn send(child: &std::process::Child, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal}");
}

/// The status of `child` once it exits, within 30 s.
fn exit_within_30s(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "envbuild did not exit after {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One signal during the smoke test: `INTERRUPTED`, exit 1, and the container is removed.
fn signal_during_the_smoke_test_removes_the_container(signal: &str) {
    let test = format!(
        "sig{}_during_the_smoke_test_removes_the_container",
        signal.to_lowercase()
    );
    let Some(d) = support::engine(&test) else {
        return;
    };
    let mut child = smoke_test_running(&d);
    send(&child, signal);
    let status = exit_within_30s(&mut child, &format!("SIG{signal}"));
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("INTERRUPTED"), "{err}");
    d.assert_no_smoke_container(&format!("after SIG{signal}"));
}

fn sigint_during_the_smoke_test_removes_the_container() {
    signal_during_the_smoke_test_removes_the_container("INT");
}

fn sigterm_during_the_smoke_test_removes_the_container() {
    signal_during_the_smoke_test_removes_the_container("TERM");
}

fn sighup_during_the_smoke_test_removes_the_container() {
    signal_during_the_smoke_test_removes_the_container("HUP");
}

fn sigquit_during_the_smoke_test_removes_the_container() {
    signal_during_the_smoke_test_removes_the_container("QUIT");
}

fn a_second_sigint_during_cleanup_ends_at_once_naming_the_container() {
    let Some(d) =
        support::engine("a_second_sigint_during_cleanup_ends_at_once_naming_the_container")
    else {
        return;
    };
    let mut child = smoke_test_running(&d);
    send(&child, "INT");
    // The cleanup takes at least 300 ms (it looks twice for a late create): signals sent every
    // 50 ms from now on reach it while it runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "envbuild did not exit after a second SIGINT"
        );
        send(&child, "INT");
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("SIGINT again")
            && err.contains(&format!("`envbuild-smoke-{}", support::run_prefix())),
        "the container that may remain is named: {err}"
    );
    // The interrupted cleanup may have left it, and a create already sent when envbuild ended
    // can still land on the engine a moment later: this test's own cleanup, until none comes.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        d.remove_smoke_containers();
        std::thread::sleep(Duration::from_secs(1));
        if d.smoke_containers().is_empty() || Instant::now() > until {
            break;
        }
    }
    d.assert_no_smoke_container("after the test's own cleanup");
}

fn failing_run_step_names_step_command_and_output() {
    let Some(d) = support::engine("failing_run_step_names_step_command_and_output") else {
        return;
    };
    let bb = support::busybox_image(&d);
    let n = nonce();
    let df = format!("FROM {bb} AS runtime\nRUN echo about-to-fail-{n} && exit 3\n");
    let r = rendered("envbuild-test/failing", &nonce(), &[("Dockerfile", &df)]);
    let cache = tempfile::tempdir().unwrap();
    let err = match d.block_on(build_and_test(
        &d.engine,
        &r,
        &options(cache.path(), false),
        interrupt(&d),
    )) {
        Ok(_) => panic!("a failing RUN step built"),
        Err(f) => f,
    };
    let diag = &err.diagnostics[0];
    assert_eq!(diag.code, codes::BUILD_STEP_FAILED, "{err}");
    // Classic: 2 steps then envbuild's LABEL step (2/3); BuildKit counts only steps that run
    // (2/2). Both name the failing step 2.
    assert!(diag.message.contains("step 2/"), "{err}");
    assert!(diag.message.contains("exit 3"), "{err}");
    assert!(
        diag.message.contains("| about-to-fail"),
        "output shown: {err}"
    );
    let left = d.containers_running(&format!("about-to-fail-{n}"));
    assert!(
        left.is_empty(),
        "the failed build left a container: {left:?}"
    );
    d.assert_no_smoke_container("after a failed build");
}

fn missing_base_image_is_named_with_a_hint() {
    let Some(d) = support::engine("missing_base_image_is_named_with_a_hint") else {
        return;
    };
    let r = rendered(
        "envbuild-test/nobase",
        "nobase",
        &[(
            "Dockerfile",
            "FROM envbuild-test/no-such-base:1 AS runtime\nRUN true\n",
        )],
    );
    let cache = tempfile::tempdir().unwrap();
    let err = match d.block_on(build_and_test(
        &d.engine,
        &r,
        &options(cache.path(), false),
        interrupt(&d),
    )) {
        Ok(_) => panic!("built without a base"),
        Err(f) => f,
    };
    let diag = &err.diagnostics[0];
    assert_eq!(diag.code, codes::BASE_IMAGE_MISSING, "{err}");
    assert!(
        diag.message.contains("`envbuild-test/no-such-base:1`"),
        "{err}"
    );
    assert!(
        diag.hint.as_deref().unwrap_or("").contains("[image] base"),
        "{err}"
    );
    d.assert_no_smoke_container("after a missing base");
}

fn unchanged_lock_skips_the_build_and_late_changes_rebuild_only_late_layers() {
    let Some(d) =
        support::engine("unchanged_lock_skips_the_build_and_late_changes_rebuild_only_late_layers")
    else {
        return;
    };
    let base = support::reporting_image(
        &d,
        "pass",
        &support::canned_report("pass", &[("torch_import", "pass", "OK")]),
        0,
    );
    let n = nonce();
    let df = format!(
        "FROM {base} AS runtime\nRUN echo one > /one\nRUN echo two > /two\n\
         COPY late.txt /late.txt\nRUN cat /late.txt\nFROM runtime AS dev\nRUN echo dev > /dev.txt\n"
    );
    let cache = tempfile::tempdir().unwrap();
    let opts = options(cache.path(), false);
    let name = "envbuild-test/layers";
    let v1 = rendered(
        name,
        &format!("v1-{n}"),
        &[("Dockerfile", &df), ("late.txt", &format!("v1 {n}"))],
    );

    let first = d
        .block_on(build_and_test(&d.engine, &v1, &opts, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    let b1 = &first.builds[0].1;
    assert!(!b1.skipped);
    // 5 steps of the runtime target, then (classic builder) the one LABEL step envbuild adds;
    // BuildKit runs no step for a LABEL.
    let buildkit = d
        .block_on(docker::build::builder::choose(&d.engine))
        .expect("the builder")
        == docker::build::builder::Builder::BuildKit;
    let label_steps = if buildkit { 0 } else { 1 };
    assert_eq!(b1.steps, 5 + label_steps);
    assert!(passed_all(&first));
    let tag = b1.tags[0].clone();
    assert_eq!(tag, format!("{name}:runtime-{}", &v1.lock_hash[..12]));
    let info = d
        .block_on(images::inspect(&d.engine, &tag))
        .unwrap()
        .unwrap();
    assert_eq!(info.labels[LABEL_LOCK_SHA256], v1.lock_hash);
    assert_eq!(info.labels[LABEL_VARIANT], "runtime");
    assert_eq!(info.labels[LABEL_LOCK_SUMMARY], r#"{"test":true}"#);

    // Same lock again: no build, the passing verdict is reused, well under a second.
    let started = Instant::now();
    let again = d.block_on(async {
        let engine = docker::connect().await.unwrap();
        build_and_test(&engine, &v1, &opts, interrupt(&d)).await
    });
    let took = started.elapsed();
    let again = again.unwrap_or_else(|f| panic!("{f}"));
    assert!(again.builds[0].1.skipped);
    assert!(again.smokes[0].reused);
    assert_eq!(again.builds[0].1.image_id, b1.image_id);
    assert!(took < Duration::from_millis(1000), "no-op took {took:?}");

    // A change confined to a late layer: the two early RUN steps come from the cache.
    let v2 = rendered(
        name,
        &format!("v2-{n}"),
        &[("Dockerfile", &df), ("late.txt", &format!("v2 {n}"))],
    );
    let second = d
        .block_on(build_and_test(&d.engine, &v2, &opts, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    let b2 = &second.builds[0].1;
    assert!(!b2.skipped);
    assert_eq!(
        (b2.steps, b2.cached_steps),
        (5 + label_steps, 2),
        "only the late layers rebuild"
    );
    assert_ne!(b2.image_id, b1.image_id);

    // --rebuild builds although the image exists (all from cache now).
    let mut forced = opts.clone();
    forced.rebuild = true;
    let third = d
        .block_on(build_and_test(&d.engine, &v2, &forced, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    assert!(!third.builds[0].1.skipped);
    assert_eq!(third.builds[0].1.cached_steps, 4 + label_steps);
    assert!(!third.smokes[0].reused, "a rebuilt image is tested again");

    for t in [&tag, &b2.tags[0]] {
        d.remove_image(t);
    }
    d.assert_no_smoke_container("after the layer tests");
}

fn passed_all(run: &ImageRun) -> bool {
    run.smokes.iter().all(|s| s.passed())
}

fn all_variants_get_their_own_tags() {
    let Some(d) = support::engine("all_variants_get_their_own_tags") else {
        return;
    };
    let base = support::reporting_image(
        &d,
        "pass",
        &support::canned_report("pass", &[("torch_import", "pass", "OK")]),
        0,
    );
    let n = nonce();
    let df = format!(
        "FROM {base} AS runtime\nRUN echo {n} > /n\nFROM runtime AS dev\nRUN echo dev > /d\n"
    );
    let r = rendered("envbuild-test/variants", &n, &[("Dockerfile", &df)]);
    let cache = tempfile::tempdir().unwrap();
    let mut opts = options(cache.path(), false);
    opts.variants = vec!["runtime".into(), "dev".into()];
    opts.tags = vec![format!("envbuild-test/variants:extra-{n}")];
    let run = d
        .block_on(build_and_test(&d.engine, &r, &opts, interrupt(&d)))
        .unwrap_or_else(|f| panic!("{f}"));
    let short = &r.lock_hash[..12];
    assert_eq!(
        run.builds[0].1.tags,
        vec![
            format!("envbuild-test/variants:runtime-{short}"),
            format!("envbuild-test/variants:extra-{n}")
        ]
    );
    assert_eq!(
        run.builds[1].1.tags,
        vec![
            format!("envbuild-test/variants:dev-{short}"),
            format!("envbuild-test/variants:extra-{n}-dev")
        ]
    );
    assert_eq!(run.smokes.len(), 2);
    for (_, b) in &run.builds {
        for t in &b.tags {
            d.remove_image(t);
        }
    }
    d.assert_no_smoke_container("after variants");
}

// ---- With the real smoke script (templates/smoke/envbuild_smoke.py) and a real Python ----

const EXPECT_CUDA: &str = r#"{"torch": "2.5.1", "cuda": "12.4"}"#;

fn torch_missing_from_the_base_is_reported() {
    let Some(d) = support::engine("torch_missing_from_the_base_is_reported") else {
        return;
    };
    if !support::real_smoke_script("torch_missing_from_the_base_is_reported") {
        return;
    }
    let base = support::debian_python_image(&d);
    let df = format!("FROM {base} AS runtime\nCOPY envbuild/ /opt/envbuild/\n");
    let r = rendered(
        "envbuild-test/no-torch",
        "no-torch",
        &[
            ("Dockerfile", &df),
            ("envbuild/envbuild_smoke.py", envbuild::core::smoke::SCRIPT),
            ("envbuild/expect.json", EXPECT_CUDA),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let run = d
        .block_on(build_and_test(
            &d.engine,
            &r,
            &options(cache.path(), false),
            interrupt(&d),
        ))
        .unwrap_or_else(|f| panic!("{f}"));
    assert!(!passed_all(&run));
    let codes = codes_of(&run);
    assert!(codes.iter().any(|c| c == "TORCH_MISSING"), "{codes:?}");
    d.assert_no_smoke_container("after TORCH_MISSING");
}

fn cpu_only_torch_is_reported_by_image_and_by_test() {
    let Some(d) = support::engine("cpu_only_torch_is_reported_by_image_and_by_test") else {
        return;
    };
    if !support::real_smoke_script("cpu_only_torch_is_reported_by_image_and_by_test") {
        return;
    }
    let base = support::debian_python_image(&d);
    let df = format!(
        "FROM {base} AS runtime\n# TEST FIXTURE: a stand-in CPU-only torch\n\
         COPY torch/ /usr/lib/python3/dist-packages/torch/\nCOPY envbuild/ /opt/envbuild/\n"
    );
    let mut r = rendered(
        "envbuild-test/cpu-torch",
        "cpu-torch-v1",
        &[
            ("Dockerfile", &df),
            ("envbuild/envbuild_smoke.py", envbuild::core::smoke::SCRIPT),
            ("envbuild/expect.json", EXPECT_CUDA),
        ],
    );
    r.files.extend(support::cpu_torch_files());
    let cache = tempfile::tempdir().unwrap();
    let run = d
        .block_on(build_and_test(
            &d.engine,
            &r,
            &options(cache.path(), false),
            interrupt(&d),
        ))
        .unwrap_or_else(|f| panic!("{f}"));
    assert!(!passed_all(&run));
    let codes = codes_of(&run);
    assert!(codes.iter().any(|c| c == "TORCH_CPU_BUILD"), "{codes:?}");

    // The same image through `envbuild test IMAGE`, with the expectations given.
    let dir = tempfile::tempdir().unwrap();
    let expect = dir.path().join("expect.json");
    std::fs::write(&expect, EXPECT_CUDA).unwrap();
    let tag = run.builds[0].1.tags[0].clone();
    let out = envbuild()
        .args(["test", &tag, "--gpus", "none", "--expect"])
        .arg(&expect)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("TORCH_CPU_BUILD"), "{stdout}");
    d.assert_no_smoke_container("after TORCH_CPU_BUILD");
}

fn build_context_is_deterministic_and_minimal() {
    // Pure: no engine needed. The same rendered files give the same bytes.
    let files: BTreeMap<String, Vec<u8>> = [
        (
            "Dockerfile",
            "FROM x AS runtime\nCOPY environment.yml /e.yml\n",
        ),
        ("environment.yml", "name: a\n"),
        ("run/docker-run.sh", "#!/bin/sh\n"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect();
    let a = docker::context::build_context(&files, "Dockerfile").unwrap();
    let b = docker::context::build_context(&files.clone(), "Dockerfile").unwrap();
    assert_eq!(a.sha256, b.sha256);
    assert_eq!(a.files, vec!["Dockerfile", "environment.yml"]);
}

fn interrupted_build_stops_and_leaves_no_container() {
    let Some(d) = support::engine("interrupted_build_stops_and_leaves_no_container") else {
        return;
    };
    let bb = support::busybox_image(&d);
    let n = nonce();
    let df = format!("FROM {bb} AS runtime\nRUN echo {n} && sleep 60\n");
    let r = rendered(
        "envbuild-test/interrupted",
        &nonce(),
        &[("Dockerfile", &df)],
    );
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let result = d.block_on(async {
        use futures_util::FutureExt;
        // Stands in for Ctrl-C two seconds into the `RUN sleep 60` step.
        let ctrl_c = tokio::time::sleep(Duration::from_secs(2)).boxed().shared();
        build_and_test(&d.engine, &r, &options(cache.path(), false), ctrl_c).await
    });
    let err = match result {
        Ok(_) => panic!("the build was not interrupted"),
        Err(f) => f,
    };
    assert_eq!(err.diagnostics[0].code, codes::INTERRUPTED, "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The engine stops a build whose client went away and removes its container (forcerm);
    // it does so asynchronously, so give it a moment.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = d.containers_running(&n);
        if now.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the interrupted build left containers: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    d.assert_no_smoke_container("after an interrupted build");
}

fn image_from_a_spec_whose_base_lacks_the_declared_torch_is_torch_missing() {
    let test = "image_from_a_spec_whose_base_lacks_the_declared_torch_is_torch_missing";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::debian_python_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    // The base is declared to provide torch; it does not (it only has Python and pip).
    std::fs::write(
        &spec,
        format!(
            "name = \"declared-torch-{n}\"\npython = \"3.11\"\npytorch = \"2.5.1\"\ncuda = \"12.4\"\n\
             torchvision = false\ntorchaudio = false\n\n[target]\ndriver = \"550.54.15\"\n\
             gpus = [\"A100\"]\n\n[image]\nbase = \"{base}\"\nbase-provides = [\"torch\"]\n\
             variants = [\"runtime\"]\n",
            n = nonce()
        ),
    )
    .unwrap();
    // A stale lock is refused before anything is built.
    let out = envbuild()
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("LOCK_MISSING"), "{err}");

    let cache = tempfile::tempdir().unwrap();
    let image = |extra: &[&str]| {
        envbuild()
            .arg("image")
            .arg(&spec)
            .args(["--gpus", "none"])
            .args(extra)
            .env("ENVBUILD_CACHE_DIR", cache.path())
            .env("CI", "true")
            .output()
            .unwrap()
    };
    let out = image(&["--update-lock"]);
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{err}");
    assert!(stdout.contains("TORCH_MISSING"), "{stdout}\n{err}");
    assert!(
        err.contains("SMOKE_FAILED") && err.contains("TORCH_MISSING"),
        "{err}"
    );
    assert!(
        err.contains("[runtime] step 1/"),
        "plain step lines in CI: {err}"
    );

    // Unchanged lock: no build (the smoke test runs again: only passing verdicts are kept).
    let out = image(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("build skipped"), "{err}");
    assert!(!err.contains("step 1/"), "{err}");

    let tag = err
        .split_whitespace()
        .find(|w| w.starts_with("envbuild/declared-torch-"))
        .expect("the image tag is named")
        .to_string();
    d.remove_image(&tag);
    d.assert_no_smoke_container("after envbuild image SPEC");
}

fn second_image_with_an_unchanged_lock_is_a_sub_second_no_op() {
    let test = "second_image_with_an_unchanged_lock_is_a_sub_second_no_op";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::fake_cuda_torch_image(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    std::fs::write(
        &spec,
        support::spec_on_base(&format!("noop-{}", nonce()), &base),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let image = |extra: &[&str]| {
        let started = Instant::now();
        let out = envbuild()
            .arg("image")
            .arg(&spec)
            .args(["--gpus", "none"])
            .args(extra)
            .env("ENVBUILD_CACHE_DIR", cache.path())
            .env("CI", "true")
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (out, _) = image(&["--update-lock"]);
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    assert!(stdout.contains("PASS"), "{stdout}");

    let (out, took) = image(&["--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("build skipped") && err.contains("verdict reused"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
    assert_eq!(doc["verdict"], "pass");
    assert_eq!(doc["builds"][0]["skipped"], true);
    assert_eq!(doc["smoke"][0]["reused"], true);
    assert!(
        took < Duration::from_millis(1000),
        "the no-op took {took:?}"
    );

    let tag = doc["builds"][0]["tags"][0].as_str().unwrap().to_string();
    d.remove_image(&tag);
    d.assert_no_smoke_container("after the no-op");
}

/// `envbuild doctor` asks the engine too: a container started with a GPU request from a local
/// image is the definitive answer, and the probe container is removed.
fn doctor_proves_the_engine_cannot_give_a_gpu() {
    let Some(d) = support::engine("doctor_proves_the_engine_cannot_give_a_gpu") else {
        return;
    };
    let runtimes = d.runtimes();
    if runtimes.iter().any(|r| r.contains("nvidia")) {
        support::skip_because(
            "doctor_proves_the_engine_cannot_give_a_gpu",
            &format!(
                "the engine has an NVIDIA runtime ({runtimes:?}): a refusal cannot be provoked"
            ),
        );
        return;
    }
    let image = support::busybox_image(&d);
    let out = envbuild()
        .args(["doctor", "--json", "--image", &image])
        .env("ENVBUILD_DRIVER_VERSION", "550.54.15")
        .env("ENVBUILD_GPUS", "H100")
        .env("ENVBUILD_NO_NVML", "1")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "container_gpu")
        .unwrap()
        .clone();
    assert_eq!(check["code"], "CONTAINER_GPU_UNAVAILABLE", "{report:#}");
    assert_eq!(check["status"], "fail", "{report:#}");
    assert!(
        check["detail"].as_str().unwrap().contains("runc"),
        "{check}"
    );
    assert_eq!(report["container_gpu"]["verified"], false);
    assert_eq!(out.status.code(), Some(1));
    d.assert_no_smoke_container("after doctor's GPU probe");
}

/// With `--lock`, doctor's GPU probe starts the image that lock renders to when the engine has
/// it (here a busybox image given that tag), not merely the newest envbuild image.
fn doctor_probes_the_locks_own_image() {
    let Some(d) = support::engine("doctor_probes_the_locks_own_image") else {
        return;
    };
    let runtimes = d.runtimes();
    if runtimes.iter().any(|r| r.contains("nvidia")) {
        support::skip_because(
            "doctor_probes_the_locks_own_image",
            &format!(
                "the engine has an NVIDIA runtime ({runtimes:?}): a refusal cannot be provoked"
            ),
        );
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("specs/torch29-cu128/envbuild.lock")).unwrap();
    let mut lock = envbuild::core::lock::Lock::from_toml(&text).unwrap();
    // A name of this run's own, so the tag cannot be another test's or a real image's.
    lock.name = format!("doctor-probe-{}", nonce());
    let hash = lock.hash().unwrap();
    let tag = envbuild::core::render::image_tag(&lock, &hash, "runtime");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("envbuild.lock");
    std::fs::write(&path, lock.to_toml().unwrap()).unwrap();
    let (repo, t) = tag.split_once(':').unwrap();
    d.tag_image(&support::busybox_image(&d), repo, t);
    let out = envbuild()
        .args(["doctor", "--json", "--lock"])
        .arg(&path)
        .env("ENVBUILD_DRIVER_VERSION", "570.133.20")
        .env("ENVBUILD_GPUS", "H100")
        .env("ENVBUILD_NO_NVML", "1")
        .output()
        .unwrap();
    d.remove_image(&tag);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let detail = report["container_gpu"]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains(&format!("the lock's image `{tag}`")),
        "{detail}"
    );
    assert_eq!(report["container_gpu"]["verified"], false, "{detail}");
    d.assert_no_smoke_container("after doctor's probe of the lock's image");
}

/// issue 9's real-wheel check: PyPI's own `torch==2.14.1` (CUDA 13.0) installed from PyPI during
/// the build, on Python 3.11, passes the smoke test in CPU mode with the default table: the
/// lock's CUDA, cuDNN, NCCL, arch list (and no PTX) are what the real wheel carries.
fn real_pypi_torch_2141_image_passes_the_cpu_smoke_test() {
    let test = "real_pypi_torch_2141_image_passes_the_cpu_smoke_test";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::debian_python_image_with_host_ca(&d);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("envbuild.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"real-pypi-2141\"\npython = \"3.11\"\npytorch = \"2.14.1\"\n\
             torchvision = false\ntorchaudio = false\n\n[target]\ndriver = \"580.95.05\"\n\
             gpus = [\"H100\", \"L4\"]\n\n[image]\nbase = \"{base}\"\nvariants = [\"runtime\"]\n"
        ),
    )
    .unwrap();
    let out = envbuild()
        .arg("image")
        .arg(&spec)
        .args([
            "--gpus",
            "none",
            "--json",
            "--timeout",
            "600",
            "--update-lock",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    let text = doc.to_string();
    assert!(text.contains("2.14.1"), "{text}");
    assert!(!text.contains("ARCH_MISSING\""), "{text}");
    d.assert_no_smoke_container("after the real PyPI image");
}

/// `[image] wheels` sends the engine the project's `*.whl` files and nothing else: not `.env`
/// beside them, not a symlinked wheel from outside the project; a folder that leads out of the
/// project, or the project itself, is refused before anything is built.
fn local_wheels_send_only_the_projects_wheel_files_to_the_engine() {
    use std::os::unix::fs::symlink;
    let test = "local_wheels_send_only_the_projects_wheel_files_to_the_engine";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::busybox_image(&d);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret-1.0-py3-none-any.whl"), "secret").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path();
    std::fs::create_dir_all(project.join("wheels")).unwrap();
    std::fs::write(project.join("wheels/a-1.0-py3-none-any.whl"), "a").unwrap();
    std::fs::write(project.join("wheels/.env"), "TOKEN=hunter2").unwrap();
    std::fs::write(project.join(".env"), "TOKEN=hunter2").unwrap();
    symlink(
        outside.path().join("secret-1.0-py3-none-any.whl"),
        project.join("wheels/secret-1.0-py3-none-any.whl"),
    )
    .unwrap();
    symlink(outside.path(), project.join("elsewhere")).unwrap();
    // A Dockerfile that lists what the engine received, then fails (so no smoke test runs).
    let templates = project.join("templates");
    std::fs::create_dir(&templates).unwrap();
    std::fs::write(
        templates.join("Dockerfile.j2"),
        "FROM {{ base_image }} AS runtime\nCOPY {{ wheels }}/ /w/\nRUN find /w -print && false\n",
    )
    .unwrap();
    let spec = project.join("envbuild.toml");
    let cache = tempfile::tempdir().unwrap();
    let image = |wheels: &str| {
        let text = support::spec_on_base(&format!("wheels-{}", nonce()), &base);
        std::fs::write(&spec, format!("{text}wheels = \"{wheels}\"\n")).unwrap();
        let out = envbuild()
            .arg("image")
            .arg(&spec)
            .args(["--gpus", "none", "--update-lock", "--templates"])
            .arg(&templates)
            .env("ENVBUILD_CACHE_DIR", cache.path())
            .env("CI", "true")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    let err = image("wheels");
    assert!(err.contains("BUILD_STEP_FAILED"), "{err}");
    assert!(err.contains("/w/a-1.0-py3-none-any.whl"), "{err}");
    assert!(!err.contains(".env") && !err.contains("secret"), "{err}");

    let err = image("elsewhere");
    assert!(
        err.contains("CONTEXT_INVALID") && err.contains("leads out of the project"),
        "{err}"
    );
    assert!(!err.contains("step 1/"), "nothing is built: {err}");
    let err = image(".");
    assert!(
        err.contains("INVALID_SPEC") && err.contains("wheels"),
        "{err}"
    );
    d.assert_no_smoke_container("after envbuild image with local wheels");
}

/// A find-links directory of the project reaches the build: the context carries it, the
/// Dockerfile copies it beside requirements.txt, and pip finds the wheel there through the
/// relative location (its index, a closed port, has nothing).
fn image_installs_a_wheel_from_a_find_links_directory_of_the_project() {
    let test = "image_installs_a_wheel_from_a_find_links_directory_of_the_project";
    let Some(d) = support::engine(test) else {
        return;
    };
    let base = support::debian_python_image(&d);
    let dir = tempfile::tempdir().unwrap();
    // A wheel made here: a package pip can only find in the directory.
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("envbuild_probe")).unwrap();
    std::fs::create_dir_all(src.join("envbuild_probe-1.0.dist-info")).unwrap();
    std::fs::write(src.join("envbuild_probe/__init__.py"), "PROBE = 1\n").unwrap();
    let info = src.join("envbuild_probe-1.0.dist-info");
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: envbuild-probe\nVersion: 1.0\n",
    )
    .unwrap();
    std::fs::write(
        info.join("WHEEL"),
        "Wheel-Version: 1.0\nGenerator: envbuild-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    )
    .unwrap();
    std::fs::write(info.join("RECORD"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("wheels/probe")).unwrap();
    let zipped = std::process::Command::new("python3")
        .current_dir(&src)
        .args(["-m", "zipfile", "-c"])
        .arg(
            dir.path()
                .join("wheels/probe/envbuild_probe-1.0-py3-none-any.whl"),
        )
        .args(["envbuild_probe", "envbuild_probe-1.0.dist-info"])
        .status()
        .expect("python3 makes the test wheel");
    assert!(zipped.success());
    let spec = dir.path().join("envbuild.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"find-links-{n}\"\npython = \"3.11\"\npytorch = \"2.5.1\"\n\
             torchvision = false\ntorchaudio = false\npip = [\"envbuild-probe==1.0\"]\n\
             pip-index-url = \"http://127.0.0.1:9/simple\"\npip-find-links = [\"wheels/probe\"]\n\n\
             [target]\ndriver = \"550.54.15\"\n\n[image]\nbase = \"{base}\"\n\
             base-provides = [\"torch\"]\nvariants = [\"runtime\"]\n",
            n = nonce()
        ),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = envbuild()
        .arg("image")
        .arg(&spec)
        .args(["--gpus", "none", "--update-lock", "-v"])
        .env("ENVBUILD_CACHE_DIR", cache.path())
        .env("CI", "true")
        .output()
        .unwrap();
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The plain-http index is said; the build passes (pip found the wheel) and the smoke test
    // then finds no torch, which this base does not have.
    assert!(err.contains("INSECURE_SOURCE"), "{err}");
    assert!(
        err.contains("Successfully installed envbuild-probe-1.0"),
        "{stdout}\n{err}"
    );
    assert!(stdout.contains("TORCH_MISSING"), "{stdout}\n{err}");
    if let Some(tag) = err
        .split_whitespace()
        .find(|w| w.starts_with("envbuild/find-links-"))
    {
        // The progress line lists the content tag, then the lock's: `TAG, TAG`.
        d.remove_image(tag.trim_end_matches(','));
    }
    d.assert_no_smoke_container("after envbuild image SPEC");
}
