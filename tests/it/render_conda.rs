//! `render` of a conda closure: the explicit file, environment.yml's exact pins, the pip part,
//! and the Dockerfile's throwaway install stage (no solve, the CA bundle, inputs that hold the
//! closure only). The lock is a fixture written by hand in the closure's shape (conda-forge
//! URLs and build strings; made-up hashes), since no conda channel is reachable here.

use crate::render::{check_dockerfile, parse_dockerfile, yaml, QUOTABLE, UNRENDERABLE};
use envbuild::core::lock::{ClosurePkg, Lock};
use envbuild::core::render::{render, RenderOptions, Rendered};
use std::path::PathBuf;

fn lock() -> Lock {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/conda-closure/envbuild.lock");
    let text = std::fs::read_to_string(path).expect("fixture");
    let lock = Lock::from_toml(&text).expect("the fixture is a valid lock");
    // The fixture is in the canonical form `envbuild lock` writes.
    assert_eq!(lock.to_toml().unwrap(), text, "fixture not canonical");
    lock
}

fn rendered(lock: &Lock) -> Rendered {
    render(lock, &RenderOptions::default()).unwrap_or_else(|f| panic!("{f}"))
}

fn conda(lock: &Lock) -> Vec<&ClosurePkg> {
    lock.closure.iter().filter(|p| p.kind == "conda").collect()
}

/// The install-layer inputs of a conda closure image.
const INSTALL_INPUTS: &[&str] = &[
    "conda-linux-64.txt",
    "requirements-extras.txt",
    "envbuild/conda-env.sh",
    "envbuild/ca-bundle.pem",
];

#[test]
fn snapshots_of_a_conda_closure() {
    let r = rendered(&lock());
    for path in [
        "conda-linux-64.txt",
        "environment.yml",
        "Dockerfile",
        "Dockerfile.buildkit",
        "requirements.txt",
        "pylock.toml",
        "envbuild/conda-env.sh",
        "envbuild/expect.json",
        ".dockerignore",
    ] {
        let text = r
            .text(path)
            .unwrap_or_else(|| panic!("{path} not rendered"));
        insta::assert_snapshot!(
            format!("conda-closure__{}", path.replace(['/', '.'], "_")),
            text
        );
    }
}

#[test]
fn the_explicit_file_lists_every_conda_package_once_with_its_md5() {
    let lock = lock();
    let r = rendered(&lock);
    let text = r.text("conda-linux-64.txt").expect("explicit file");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(lines[0], "@EXPLICIT");
    assert!(text.contains("\n# platform: linux-64\n"), "{text}");
    let body = &lines[1..];
    let pkgs = conda(&lock);
    assert_eq!(body.len(), pkgs.len(), "{text}");
    for p in &pkgs {
        let line = format!("{}#{}", p.url, p.md5.as_deref().expect("md5"));
        assert_eq!(body.iter().filter(|l| **l == line).count(), 1, "{line}");
    }
    // No pip entry, no blank or option in the list: every line is `URL#MD5` of a conda file.
    for l in body {
        let (url, md5) = l.split_once('#').expect("URL#MD5");
        assert!(
            url.starts_with("https://conda.anaconda.org/conda-forge/"),
            "{l}"
        );
        assert!(url.ends_with(".conda") || url.ends_with(".tar.bz2"), "{l}");
        assert!(
            md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit()),
            "{l}"
        );
    }
    // Link order: the conda-forge graph's roots first, the platform's packages (python among
    // them) before the noarch ones.
    let pos = |name: &str| {
        body.iter()
            .position(|l| l.contains(&format!("/{name}-")))
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!((pos("_libgcc_mutex"), pos("_openmp_mutex")), (0, 1));
    for noarch in ["pip", "jupyterlab", "python_abi", "cuda-version"] {
        assert!(pos("python") < pos(noarch), "{noarch}");
    }
    // An entry without an md5 carries its sha256 (conda >= 24.9, mamba >= 2.1, rattler).
    let mut no_md5 = lock.clone();
    let first = no_md5
        .closure
        .iter_mut()
        .find(|p| p.kind == "conda")
        .unwrap();
    first.md5 = None;
    let line = format!("{}#{}", first.url, first.sha256);
    let r = rendered(&no_md5);
    assert!(r.text("conda-linux-64.txt").unwrap().contains(&line));
}

#[test]
fn environment_yml_pins_every_conda_build_and_the_pip_part_with_hashes() {
    let lock = lock();
    let r = rendered(&lock);
    let env = yaml(r.text("environment.yml").expect("environment.yml"));
    let deps = env["dependencies"].as_array().expect("dependencies");
    let specs: Vec<&str> = deps.iter().filter_map(|d| d.as_str()).collect();
    let pkgs = conda(&lock);
    assert_eq!(specs.len(), pkgs.len(), "{specs:?}");
    for p in &pkgs {
        let want = format!(
            "conda-forge::{}={}={}",
            p.name,
            p.version,
            p.build.as_deref().unwrap()
        );
        assert!(specs.contains(&want.as_str()), "{want} not in {specs:?}");
    }
    let pip: Vec<&str> = deps
        .iter()
        .find_map(|d| d.get("pip"))
        .and_then(|p| p.as_array())
        .expect("a pip section")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let einops = lock.closure.iter().find(|p| p.kind == "pip").unwrap();
    assert_eq!(
        pip,
        [
            "--index-url https://pypi.org/simple".to_string(),
            format!("einops==0.8.1 --hash=sha256:{}", einops.sha256)
        ]
    );
    // requirements.txt and pylock.toml carry the pip part only.
    let req = r.text("requirements.txt").unwrap();
    let reqs: Vec<&str> = req
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("--"))
        .collect();
    assert_eq!(
        reqs,
        [format!("einops==0.8.1 --hash=sha256:{}", einops.sha256)]
    );
    let pylock: toml::Table = r.text("pylock.toml").unwrap().parse().unwrap();
    let names: Vec<&str> = pylock["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["einops"]);
    // The expectations: pip entries as distributions, conda entries as records with builds.
    let expect: serde_json::Value =
        serde_json::from_str(r.text("envbuild/expect.json").unwrap()).unwrap();
    assert_eq!(expect["closure"], serde_json::json!({"einops": "0.8.1"}));
    assert_eq!(
        expect["conda_closure"]["numpy"],
        serde_json::json!({"version": "2.3.4", "build": "py312h33ff503_0"})
    );
    assert_eq!(
        expect["conda_closure"].as_object().unwrap().len(),
        pkgs.len()
    );
}

#[test]
fn the_dockerfile_installs_the_explicit_file_then_the_pip_layers() {
    let lock = lock();
    let r = rendered(&lock);
    for name in ["Dockerfile", "Dockerfile.buildkit"] {
        let text = r.text(name).expect(name);
        let stages = check_dockerfile(text, &r, &lock);
        let classic = name == "Dockerfile";
        // The classic builder makes the environment in a throwaway `install` stage; BuildKit
        // makes it in `base` itself, its inputs bind-mounted.
        assert_eq!(
            stages[0].name,
            if classic { "install" } else { "base" },
            "{name}"
        );
        let install = &stages[0];
        let run: Vec<&str> = install
            .instrs
            .iter()
            .filter(|(i, _)| i == "RUN")
            .map(|(_, a)| a.as_str())
            .collect();
        // The explicit file first (pytorch and CUDA in it), then the pip part's layers: here
        // only `extras` (einops, the spec's own).
        assert_eq!(run.len(), 2, "{name}: {run:?}");
        assert!(
            run[0].contains("conda-env.sh create /tmp/envbuild/conda-linux-64.txt"),
            "{name}: {}",
            run[0]
        );
        assert!(
            run[1].contains("--no-deps --require-hashes -r /tmp/envbuild/requirements-extras.txt"),
            "{name}: {}",
            run[1]
        );
        assert!(r
            .text("requirements-extras.txt")
            .unwrap()
            .contains("einops==0.8.1"));
        // No solve anywhere: no environment file install, no virtual-package override.
        assert!(!text.contains("conda env create"), "{name}");
        assert!(!text.contains("CONDA_OVERRIDE_CUDA="), "{name}");
        // The CA bundle reaches the install steps and no target builds on a stage that holds
        // it: copied once into the classic builder's throwaway stage, bind-mounted (in no layer
        // at all) into each step with BuildKit.
        let ca = install
            .instrs
            .iter()
            .filter(|(i, a)| i == "COPY" && a.contains("ca-bundle.pem"))
            .count();
        let bind =
            "--mount=type=bind,source=envbuild/ca-bundle.pem,target=/tmp/envbuild/ca-bundle.pem";
        let binds = run.iter().filter(|r| r.contains(bind)).count();
        assert_eq!((ca, binds), if classic { (1, 0) } else { (0, 2) }, "{name}");
        let ca_lines = text.lines().filter(|l| l.contains("ca-bundle.pem")).count();
        assert_eq!(ca_lines, if classic { 1 } else { 2 }, "{name}");
        assert!(!text.contains("FROM install"), "{name}");
        assert_eq!(text.contains(" AS install"), classic, "{name}");
        let base = stages.iter().find(|s| s.name == "base").expect("base");
        let copies: Vec<&str> = base
            .instrs
            .iter()
            .filter(|(i, _)| i == "COPY")
            .map(|(_, a)| a.as_str())
            .collect();
        let copy_out = ["--from=install /opt/conda/envs/envbuild /opt/conda/envs/envbuild"];
        assert_eq!(copies, if classic { &copy_out[..] } else { &[] }, "{name}");
    }
    // .dockerignore lets every file the Dockerfile copies from the context in.
    let ignore = r.text(".dockerignore").unwrap();
    for (instr, args) in parse_dockerfile(r.text("Dockerfile").unwrap()) {
        if instr != "COPY" || args.starts_with("--from=") {
            continue;
        }
        let words: Vec<&str> = args.split_whitespace().collect();
        for src in &words[..words.len() - 1] {
            let allowed = ignore.lines().any(|l| {
                l.strip_prefix('!').is_some_and(|keep| {
                    *src == keep || (keep.ends_with('/') && src.starts_with(keep))
                })
            });
            assert!(allowed, "`{src}` is copied but .dockerignore leaves it out");
        }
    }
    let bk = r.text("Dockerfile.buildkit").unwrap();
    assert!(bk.contains("--mount=type=cache,target=/root/.cache/conda-pkgs"));
    let plain = r.text("Dockerfile").unwrap();
    assert!(plain.contains("pip install --no-cache-dir --no-deps --require-hashes"));
}

/// The instructions that make the environment (the `install` and `base` stages), header
/// comments aside.
fn install_stage(text: &str) -> Vec<(String, String)> {
    let all = parse_dockerfile(text);
    let end = all
        .iter()
        .position(|(i, a)| i == "FROM" && a.ends_with("AS runtime"))
        .expect("a runtime stage");
    all[..end].to_vec()
}

#[test]
fn the_install_inputs_hold_the_closure_only() {
    let lock = lock();
    let hash = lock.hash().unwrap();
    let a = rendered(&lock);
    for path in INSTALL_INPUTS {
        let text = a.text(path).unwrap_or_else(|| panic!("{path}"));
        assert!(
            text.starts_with("# Generated by envbuild")
                || text.starts_with("#!/bin/sh\n# Generated by envbuild"),
            "{path}"
        );
        assert!(
            !text.contains(&hash),
            "{path}: the lock hash reaches an install input"
        );
    }
    // Another name, port and target driver: a new lock hash, the same install inputs.
    let mut relabelled = lock.clone();
    relabelled.name = "another-name".into();
    relabelled.image.port = 9999;
    relabelled.driver_target = Some("570.86.15".into());
    assert_ne!(relabelled.hash().unwrap(), hash);
    let b = rendered(&relabelled);
    for path in INSTALL_INPUTS {
        assert_eq!(a.files[*path], b.files[*path], "{path}");
    }
    for name in ["Dockerfile", "Dockerfile.buildkit"] {
        assert_eq!(
            install_stage(a.text(name).unwrap()),
            install_stage(b.text(name).unwrap()),
            "{name}"
        );
    }
    // A closure change does change them.
    let mut moved = lock.clone();
    let numpy = moved
        .closure
        .iter_mut()
        .find(|p| p.name == "numpy")
        .unwrap();
    numpy.build = Some("py312h33ff503_1".into());
    numpy.url = numpy.url.replace("_0.conda", "_1.conda");
    let c = rendered(&moved);
    assert_ne!(a.files["conda-linux-64.txt"], c.files["conda-linux-64.txt"]);
}

#[test]
fn a_conda_closure_without_a_pip_part_installs_no_requirements() {
    let mut lock = lock();
    lock.closure.retain(|p| p.kind == "conda");
    lock.install.pip.clear();
    let r = rendered(&lock);
    assert!(!r.files.contains_key("requirements.txt"));
    assert!(!r.files.contains_key("pylock.toml"));
    for name in ["Dockerfile", "Dockerfile.buildkit"] {
        let text = r.text(name).unwrap();
        check_dockerfile(text, &r, &lock);
        assert!(!text.contains("requirements.txt"), "{name}");
        assert!(!text.contains("pip install"), "{name}");
    }
    let env = yaml(r.text("environment.yml").unwrap());
    assert!(env["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d.is_string()));
}

#[test]
fn the_conda_env_script_passes_sh_n_and_shellcheck_when_installed() {
    let r = rendered(&lock());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("conda-env.sh");
    std::fs::write(&f, r.text("envbuild/conda-env.sh").unwrap()).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-n")
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    match std::process::Command::new("shellcheck")
        .args(["-s", "sh"])
        .arg(&f)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(_) => eprintln!("shellcheck not installed: only `sh -n` ran"),
    }
    // Without conda on the PATH the script says so instead of failing obscurely: a PATH with
    // only the tools the script needs.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for tool in ["dirname", "grep"] {
        let which = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8(which.stdout).unwrap();
        std::os::unix::fs::symlink(path.trim(), bin.join(tool)).unwrap();
    }
    let out = std::process::Command::new("/bin/sh")
        .arg(&f)
        .args(["create", "x.txt"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no conda"));
}

#[test]
fn hostile_conda_values_are_refused() {
    let benign = lock();
    type Edit = fn(&mut ClosurePkg, String);
    let edits: &[(&str, Edit)] = &[
        ("closure.build", |p, v| p.build = Some(v)),
        ("closure.subdir", |p, v| p.subdir = Some(v)),
        ("closure.md5", |p, v| p.md5 = Some(v)),
        ("closure.url", |p, v| p.url = v),
        ("closure.kind", |p, v| p.kind = v),
        ("closure.name", |p, v| p.name = v),
        ("closure.version", |p, v| p.version = v),
        ("closure.index", |p, v| p.index = v),
    ];
    for (field, edit) in edits {
        let mut values: Vec<String> = UNRENDERABLE.iter().map(|s| s.to_string()).collect();
        values.extend(QUOTABLE.iter().map(|s| format!("1.0{s}")));
        values.push("-r /etc/passwd".into());
        values.push("https://conda.anaconda.org/conda-forge/linux-64/x-1-h_0.conda#00".into());
        for v in values {
            let mut lock = benign.clone();
            let p = lock.closure.iter_mut().find(|p| p.kind == "conda").unwrap();
            edit(p, v.clone());
            let err = render(&lock, &RenderOptions::default())
                .expect_err(&format!("{field} = {v:?} was rendered"));
            assert_eq!(err.diagnostics[0].code, "UNSAFE_VALUE", "{field}");
            assert!(err.diagnostics[0].message.contains(field), "{field}: {err}");
        }
    }
    // A conda entry must name a conda package file.
    let mut lock = benign.clone();
    let p = lock.closure.iter_mut().find(|p| p.kind == "conda").unwrap();
    p.url = "https://conda.anaconda.org/conda-forge/linux-64/numpy-2.3.4.whl".into();
    let err = render(&lock, &RenderOptions::default()).expect_err("a wheel as a conda file");
    assert!(err.to_string().contains("closure.url"), "{err}");
}

#[test]
fn rendering_a_conda_closure_is_deterministic() {
    let lock = lock();
    assert_eq!(rendered(&lock), rendered(&lock.clone()));
}
