//! `render`: one lock in, every file a team needs out — environment.yml, requirements.txt, a
//! multi-stage Dockerfile (`runtime` and `dev` targets), .dockerignore, the smoke test with the
//! lock's expectations, and run snippets (docker run, compose, a Kubernetes pod).
//!
//! Rendering is pure: the same lock gives the same bytes on every run and machine (no clock, no
//! environment, only sorted maps). This module performs no I/O: a team's template overrides
//! (`--templates DIR`) are read by the caller (`infra::fs::read_template_dir`) and passed in as
//! text, and writing the result is the caller's job too.
//!
//! Templates get a dedicated `Ctx`, not the lock, so lock refactors cannot silently change
//! output. Every lock value is checked before it reaches a template ([`check_lock_values`]) and
//! is quoted by a filter in the template ([`filters`]).

mod conda;
pub mod filters;
pub mod layers;
mod templates;

pub use templates::{dump_templates, EMBEDDED, TEMPLATE_BUDGET};

use crate::core::diag::{Diagnostic, Failure};
use crate::core::lock::{BaseKind, DriverMode, Lock, LockedImage};
use crate::core::rules;
use serde::Serialize;
use std::collections::BTreeMap;

/// Diagnostic codes of this module, declared in the one registry ([`crate::core::codes`]);
/// `UNSAFE_VALUE` is the spec validator's: a lock edited by hand gets the same treatment as a
/// spec.
pub mod codes {
    pub use crate::core::codes::render::TEMPLATE_ERROR;
    pub use crate::core::codes::spec::UNSAFE_VALUE;
}

/// Image labels the Docker engine code reads back.
pub const LABEL_LOCK_SHA256: &str = "dev.envbuild.lock-sha256";
pub const LABEL_LOCK_SUMMARY: &str = "dev.envbuild.lock-summary";
pub const LABEL_VARIANT: &str = "dev.envbuild.variant";

/// The image's unprivileged user, its uid (above 10000 so it never collides with a user the base
/// image ships, such as Ubuntu's uid 1000) and the dev image's SSH port.
pub const IMAGE_USER: &str = "envbuild";
pub const IMAGE_UID: u32 = 10001;
pub const SSH_PORT: u16 = 2222;

/// The rendered script that makes the image's venv (wheel-based images).
pub const PYTHON_ENV_SCRIPT: &str = "envbuild/python-env.sh";
/// The rendered slot for the network's CA bundle: a comment until `envbuild image` puts the
/// host's bundle there. Only the Dockerfile's throwaway `install` stage copies it.
pub const CA_BUNDLE_FILE: &str = "envbuild/ca-bundle.pem";

/// The rendered script that makes a conda closure's environment (conda-based images).
pub const CONDA_ENV_SCRIPT: &str = "envbuild/conda-env.sh";

/// Where the conda environment lives in a conda-based image.
pub const CONDA_ENV_PREFIX: &str = "/opt/conda/envs/envbuild";

/// No lock value is anywhere near this; longer ones are refused rather than rendered.
pub const MAX_VALUE_LEN: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// `--templates DIR`, already read: files here override the embedded templates of the same
    /// name, and other names can be `{% include %}`d.
    pub overrides: Option<TemplateOverrides>,
    /// `--pip-mirror URL` (checked by `core::closure::pip_mirror`): pip's main index in the
    /// rendered requirements.txt and environment.yml instead of the lock's. The lock is unchanged
    /// and, with a closure, its hashes stay the identity of every file the mirror serves.
    pub pip_mirror: Option<String>,
    /// `--conda-mirror URL` (checked by `core::closure::conda_mirror`): where the explicit
    /// file's packages are fetched from (`URL/CHANNEL/SUBDIR/FILE`, each line keeping the
    /// lock's md5), or, without a closure, conda's `channel_alias` for the build's solve.
    pub conda_mirror: Option<String>,
}

/// A team's template files, by file name, and where they came from (for messages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateOverrides {
    pub origin: String,
    pub files: BTreeMap<String, String>,
}

/// The BuildKit form of the Dockerfile is the Dockerfile's name plus this suffix.
pub const BUILDKIT_SUFFIX: &str = ".buildkit";

/// The rendered files, by path relative to the output directory (`/` separators, sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Rendered {
    /// The files that belong in the Docker build context: everything except the run snippets.
    /// The lock's `[image] wheels` directory (beside the spec, see [`extra_context_dirs`]) must
    /// be added by the caller.
    pub fn context_files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files
            .iter()
            .filter(|(p, _)| !p.starts_with("run/"))
            .map(|(p, b)| (p.as_str(), b.as_slice()))
    }

    /// A file as text (every rendered file is UTF-8).
    pub fn text(&self, path: &str) -> Option<&str> {
        self.files
            .get(path)
            .and_then(|b| std::str::from_utf8(b).ok())
    }
}

/// Directories the Dockerfile copies that are not in [`Rendered::files`]: the lock's
/// `[image] wheels` and local `--find-links` directories, relative to the spec's directory,
/// copied under the same relative path.
pub fn extra_context_dirs(lock: &Lock) -> Vec<String> {
    let mut dirs: Vec<String> = lock.image.wheels.iter().cloned().collect();
    for d in local_find_links(lock) {
        if !dirs.iter().any(|x| x == d) {
            dirs.push(d.to_string());
        }
    }
    dirs
}

/// The lock's `--find-links` directories (not URLs): the Dockerfile copies each beside the
/// requirements before installing, where pip and conda look for relative locations.
fn local_find_links(lock: &Lock) -> impl Iterator<Item = &str> {
    lock.install
        .pip_find_links
        .iter()
        .map(String::as_str)
        .filter(|l| !crate::core::spec::is_url(l))
}

/// The tag `render` writes into the run snippets: `envbuild/<name>:<variant>-<hash12>`.
pub fn image_tag(lock: &Lock, lock_hash: &str, variant: &str) -> String {
    format!(
        "envbuild/{}:{variant}-{}",
        dns_label(&lock.name),
        &lock_hash[..lock_hash.len().min(12)]
    )
}

/// Render every file of a lock, and those of each other platform of its fleet.
pub fn render(lock: &Lock, opts: &RenderOptions) -> Result<Rendered, Failure> {
    let mut out = render_one(lock, opts)?;
    // A fleet's other platforms: each its own complete set of files (its own build context),
    // under a folder named by the platform (`linux-aarch64/Dockerfile`).
    for entry in &lock.fleet {
        let theirs = render_one(entry, opts)?;
        for (path, bytes) in theirs.files {
            out.files
                .insert(format!("{}/{path}", entry.platform.as_str()), bytes);
        }
    }
    Ok(out)
}

/// The files of one platform's lock.
fn render_one(lock: &Lock, opts: &RenderOptions) -> Result<Rendered, Failure> {
    check_lock_values(lock)?;
    let mut ctx = Ctx::from_lock(lock)?;
    if let Some(mirror) = &opts.pip_mirror {
        // The one index line pip installs the lock's pip part from (extra indexes stay).
        if ctx.closure {
            ctx.closure_index_url = ctx.closure_index_url.take().map(|_| mirror.clone());
        } else {
            ctx.pip_main_index_url = Some(mirror.clone());
        }
    }
    if let Some(mirror) = &opts.conda_mirror {
        if ctx.conda_closure {
            ctx.explicit_lines = conda::link_order(lock)
                .into_iter()
                .map(|p| conda::mirrored_line(p, mirror))
                .collect();
        } else if ctx.is_conda {
            ctx.conda_channel_alias = Some(mirror.clone());
        }
    }
    let (is_conda, has_dev, ssh, has_closure) = (ctx.is_conda, ctx.has_dev, ctx.ssh, ctx.closure);
    let (conda_closure, has_pip, explicit_file) = (
        ctx.conda_closure,
        !ctx.pip.is_empty(),
        ctx.explicit_file.clone(),
    );
    let layers = ctx.layers.clone();
    let install_jupyter = has_dev && !ctx.jupyter_in_env;
    let env = templates::environment(opts.overrides.as_ref().map(|o| o.files.clone()))
        .map_err(|e| Failure::bug(format!("cannot set up the template engine: {e:#}")))?;
    let ctx = minijinja::Value::from(minijinja::value::Serde(&ctx));
    let mut files = BTreeMap::new();
    let render_with = |template: &str, ctx: &minijinja::Value| -> Result<String, Failure> {
        templates::render_capped(&env, template, ctx)
            .map_err(|e| template_failure(template, &e, opts))
    };
    // Two forms of one template: the plain Dockerfile every builder reads, and the BuildKit
    // form (cache and bind mounts) that `envbuild image` builds when the engine has BuildKit.
    // Rendering both keeps `docker build .` working with the classic builder, without a
    // `# syntax` line (which would make the engine pull a frontend image).
    let plain = minijinja::context! { buildkit => false, ..ctx.clone() };
    let dockerfile = render_with("Dockerfile.j2", &plain)?;
    let bk = render_with(
        "Dockerfile.j2",
        &minijinja::context! { buildkit => true, ..ctx.clone() },
    )?;
    // A template that does not use `buildkit` (an override) renders one form only.
    if bk != dockerfile {
        files.insert(format!("Dockerfile{BUILDKIT_SUFFIX}"), bk.into_bytes());
    }
    files.insert("Dockerfile".to_string(), dockerfile.into_bytes());
    let mut put = |template: &str, out: &str| -> Result<(), Failure> {
        let text = render_with(template, &ctx)?;
        files.insert(out.to_string(), text.into_bytes());
        Ok(())
    };
    put("environment.yml.j2", "environment.yml")?;
    if !is_conda {
        put("requirements.txt.j2", "requirements.txt")?;
        put("python-env.sh.j2", PYTHON_ENV_SCRIPT)?;
        put("ca-bundle.pem.j2", CA_BUNDLE_FILE)?;
    }
    if is_conda {
        // The install stage's script and CA slot, with or without a closure.
        put("conda-env.sh.j2", CONDA_ENV_SCRIPT)?;
        put("ca-bundle.pem.j2", CA_BUNDLE_FILE)?;
    }
    if conda_closure {
        // The explicit file is what the image installs (no solve); requirements.txt and
        // pylock.toml carry the pip part, and exist only when there is one.
        put("conda-explicit.txt.j2", &explicit_file)?;
        if has_pip {
            put("requirements.txt.j2", "requirements.txt")?;
        }
    }
    if has_closure && (!conda_closure || has_pip) {
        put("pylock.toml.j2", "pylock.toml")?;
    }
    put("dockerignore.j2", ".dockerignore")?;
    if has_dev {
        put("dev-entrypoint.sh.j2", "envbuild/dev-entrypoint.sh")?;
        if ssh {
            put("sshd_config.j2", "envbuild/sshd_config")?;
        }
        if install_jupyter {
            put("constraints.txt.j2", "envbuild/constraints.txt")?;
        }
    }
    put("docker-run.sh.j2", "run/docker-run.sh")?;
    put("compose.yaml.j2", "run/compose.yaml")?;
    put("pod.yaml.j2", "run/pod.yaml")?;
    // One requirements file per install layer: the Dockerfile installs these in order;
    // requirements.txt stays the whole set, for anyone installing outside an image.
    for l in &layers {
        let layer =
            minijinja::context! { layer_name => l.name, pip => l.pins.clone(), ..ctx.clone() };
        let text = render_with("requirements.txt.j2", &layer)?;
        files.insert(l.file.clone(), text.into_bytes());
    }

    // The smoke test is copied verbatim (not a template) so every path runs the same bytes.
    files.insert(
        "envbuild/envbuild_smoke.py".to_string(),
        crate::core::smoke::SCRIPT.as_bytes().to_vec(),
    );
    // expect.json is strict JSON read by the script (`deny_unknown_fields` on the Rust side), so
    // it carries no header; the image's labels carry the lock hash instead.
    let expect = crate::core::expectations::expectations_from_lock(lock);
    let mut json = serde_json::to_string_pretty(&expect)
        .map_err(|e| Failure::bug(format!("cannot serialise the expectations: {e}")))?;
    json.push('\n');
    files.insert("envbuild/expect.json".to_string(), json.into_bytes());
    Ok(Rendered { files })
}

fn template_failure(template: &str, e: &minijinja::Error, opts: &RenderOptions) -> Failure {
    let origin = opts.overrides.as_ref().map(|o| o.origin.as_str());
    if let Some(f) = templates::budget_failure(template, e, origin) {
        return f;
    }
    let detail = format!("{e:#}");
    match &opts.overrides {
        // A user's template may be wrong on its own: that is their error to fix, so exit 1.
        Some(o) => Failure::one(
            Diagnostic::error(
                codes::TEMPLATE_ERROR,
                format!(
                    "template `{template}` (from `{}` or the embedded set) failed: {detail}",
                    o.origin
                ),
            )
            .with_hint(
                "compare your template with `envbuild templates dump DIR`; every variable is \
                 strict, so a misspelt name is an error",
            ),
        ),
        None => Failure::bug(format!("embedded template `{template}` failed: {detail}")),
    }
}

/// What the templates see. Every field is computed here, in Rust, so templates stay simple.
#[derive(Debug, Serialize)]
struct Ctx {
    /// The comment lines every rendered file starts with (`# ...`, no trailing newline).
    header: String,
    /// requirements.txt's header: without the lock's sha256, so that the heavy install layer's
    /// input changes only when what is installed does (a relabelled lock reinstalls nothing).
    requirements_header: String,
    /// The lock pins its whole closure: requirements carry hashes and install with `--no-deps
    /// --require-hashes`, from `closure_index_url`.
    closure: bool,
    closure_index_url: Option<String>,
    /// The closure's pip entries, for pylock.toml.
    closure_pkgs: Vec<crate::core::lock::ClosurePkg>,
    /// The closure's pip entries in install layers ([`layers`]), each its own requirements file;
    /// empty without a closure (requirements.txt is installed whole).
    layers: Vec<layers::Layer>,
    /// The layer a requirements file is rendered for (`None`: requirements.txt, the whole set).
    layer_name: Option<&'static str>,
    /// The closure has conda entries: the image installs the explicit file (no solve) in a
    /// throwaway `install` stage, then the pip entries with `--no-deps --require-hashes`.
    conda_closure: bool,
    /// `conda-linux-64.txt`: the explicit file for the lock's platform.
    explicit_file: String,
    /// Its `URL#MD5` lines, in link order.
    explicit_lines: Vec<String>,
    /// `--conda-mirror` on a lock without a closure: conda's `CONDA_CHANNEL_ALIAS` for the
    /// build's solve, so channel names resolve under the mirror.
    conda_channel_alias: Option<String>,
    platform: &'static str,
    /// The env scripts (`envbuild/conda-env.sh`, `envbuild/python-env.sh`) and the CA bundle's
    /// slot.
    conda_env_script: &'static str,
    python_env_script: &'static str,
    ca_bundle_file: &'static str,
    /// `3.13`: pylock.toml's `requires-python`.
    python_minor: String,
    lock_hash: String,
    name: String,
    /// `name` as a DNS label (Kubernetes and compose names, image tags).
    dns_name: String,
    source: &'static str,
    description: String,
    summary_json: String,
    env_metadata_line: String,
    channels: Vec<String>,
    /// environment.yml conda dependencies (python first), without the pip section.
    conda_deps: Vec<String>,
    /// pip requirements (environment.yml `pip:` section or requirements.txt).
    pip: Vec<String>,
    /// `--extra-index-url` values, already validated as URLs.
    pip_index_urls: Vec<String>,
    /// `--index-url`, already validated.
    pip_main_index_url: Option<String>,
    /// `--find-links` values, already validated (URLs, or directories copied beside the
    /// requirements).
    pip_find_links: Vec<String>,
    /// The find-links directories, for the Dockerfile's COPY lines.
    pip_find_links_dirs: Vec<String>,
    /// The same, as the install steps' (source, target) bind mounts (copies for the classic
    /// builder), beside the requirements where pip reads a relative location from.
    find_links_binds: Vec<(String, String)>,
    conda_override_cuda: Option<String>,
    base_image: String,
    base_digest: Option<String>,
    is_conda: bool,
    conda_env_prefix: &'static str,
    cuda_major_minor: String,
    /// `cuda>=X.Y` for NVIDIA_REQUIRE_CUDA; `None` under forward compatibility.
    require_cuda: Option<String>,
    /// The driver that `require_cuda` corresponds to.
    require_driver: String,
    has_dev: bool,
    jupyterlab: String,
    jupyter_in_env: bool,
    /// `name==version` of every locked package (python aside): pip constraints for installing
    /// dev tools, so JupyterLab's dependencies can never move a locked package.
    constraints: Vec<String>,
    ssh: bool,
    ssh_port: u16,
    port: u16,
    shm_size: String,
    shm_size_k8s: String,
    datasets: Option<String>,
    checkpoints: Option<String>,
    wheels: Option<String>,
    user: &'static str,
    uid: u32,
    smoke_script: &'static str,
    expect_file: &'static str,
    image_runtime: String,
    image_dev: String,
    label_lock_sha256: &'static str,
    label_lock_summary: &'static str,
    label_variant: &'static str,
}

impl Ctx {
    fn from_lock(lock: &Lock) -> Result<Ctx, Failure> {
        let lock_hash = lock
            .hash()
            .map_err(|e| Failure::bug(format!("cannot hash the lock: {e}")))?;
        let is_conda = lock.image.base_kind == BaseKind::Conda;
        let python = lock.packages.get("python").cloned().unwrap_or_default();

        let conda_closure = conda::conda_pkgs(lock).next().is_some();
        let conda_deps = environment_conda_deps(lock, &python);
        let cuda_major_minor = major_minor(&lock.cuda);
        // NVIDIA_REQUIRE_CUDA is compared with the CUDA version the host driver supports. A
        // native lock needs the driver of its own CUDA (driver_min, `cuda>=X.Y`); a lock whose
        // target runs it through minor-version compatibility needs only the major's first
        // driver (driver_min_compat, `cuda>=X.0`); forward compatibility gets no requirement.
        let (require_cuda, require_driver) = match lock.driver_mode {
            Some(DriverMode::ForwardCompat) => (None, String::new()),
            Some(DriverMode::MinorCompat) if lock.driver_min_compat.is_some() => {
                let major = cuda_major_minor.split('.').next().unwrap_or("0");
                (
                    Some(format!("cuda>={major}.0")),
                    lock.driver_min_compat.clone().unwrap_or_default(),
                )
            }
            _ => (
                Some(format!("cuda>={cuda_major_minor}")),
                lock.driver_min.clone(),
            ),
        };
        let base_image = match &lock.image.base_digest {
            Some(d) => format!("{}@{d}", lock.image.base),
            None => lock.image.base.clone(),
        };
        let torch = lock.packages.get("torch").map_or("?", String::as_str);
        let description = format!(
            "PyTorch {torch} with CUDA {} on Python {python} ({}), rendered by envbuild",
            lock.cuda,
            lock.source.as_str()
        );
        let has_dev = lock
            .image
            .variants
            .contains(&crate::core::spec::Variant::Dev);
        let closure = !lock.closure.is_empty();
        let (pip, constraints) = pip_and_constraints(lock);
        // The closure's main index (the one its non-extra packages came from).
        let closure_index_url = conda::pip_pkgs(lock)
            .map(|p| &p.index)
            .find(|i| !lock.install.pip_extra_index_urls.contains(i))
            .cloned();
        Ok(Ctx {
            requirements_header: "# Generated by envbuild. Do not edit: change the spec, then run `envbuild lock` and `envbuild render`.".to_string(),
            closure,
            closure_index_url,
            closure_pkgs: conda::pip_pkgs(lock).cloned().collect(),
            layers: layers::split(conda::pip_pkgs(lock), &layers::extras(lock)),
            layer_name: None,
            conda_closure,
            explicit_file: conda::explicit_file_name(lock),
            explicit_lines: conda::link_order(lock)
                .into_iter()
                .map(conda::explicit_line)
                .collect(),
            conda_channel_alias: None,
            platform: lock.platform.as_str(),
            conda_env_script: CONDA_ENV_SCRIPT,
            python_env_script: PYTHON_ENV_SCRIPT,
            ca_bundle_file: CA_BUNDLE_FILE,
            python_minor: python.split('.').take(2).collect::<Vec<_>>().join("."),
            header: format!(
                "# Generated by envbuild. Do not edit: change the spec, then run `envbuild lock` and `envbuild render`.\n\
                 # Lock sha256: {lock_hash}"
            ),
            image_runtime: image_tag(lock, &lock_hash, "runtime"),
            image_dev: image_tag(lock, &lock_hash, "dev"),
            lock_hash,
            name: lock.name.clone(),
            dns_name: dns_label(&lock.name),
            source: lock.source.as_str(),
            description,
            summary_json: lock.summary_json(),
            env_metadata_line: lock.env_metadata_line(),
            channels: lock.channels.clone(),
            conda_deps,
            pip,
            pip_index_urls: lock.install.pip_extra_index_urls.clone(),
            pip_main_index_url: lock.install.pip_index_url.clone(),
            pip_find_links: lock.install.pip_find_links.clone(),
            pip_find_links_dirs: local_find_links(lock).map(String::from).collect(),
            find_links_binds: find_links_binds(lock),
            conda_override_cuda: lock.install.conda_override_cuda.clone(),
            base_image,
            base_digest: lock.image.base_digest.clone(),
            is_conda,
            conda_env_prefix: CONDA_ENV_PREFIX,
            require_cuda,
            require_driver,
            cuda_major_minor,
            has_dev,
            jupyterlab: lock.image.jupyterlab.clone(),
            jupyter_in_env: lock.packages.contains_key("jupyterlab"),
            constraints,
            ssh: lock.image.ssh,
            ssh_port: SSH_PORT,
            port: lock.image.port,
            shm_size: lock.image.shm_size.clone(),
            shm_size_k8s: k8s_quantity(&lock.image.shm_size),
            datasets: lock.image.datasets.clone(),
            checkpoints: lock.image.checkpoints.clone(),
            wheels: lock
                .image
                .wheels
                .as_ref()
                .map(|w| w.trim_end_matches('/').to_string()),
            user: IMAGE_USER,
            uid: IMAGE_UID,
            smoke_script: crate::core::smoke::IMAGE_SCRIPT_PATH,
            expect_file: crate::core::smoke::IMAGE_EXPECT_PATH,
            label_lock_sha256: LABEL_LOCK_SHA256,
            label_lock_summary: LABEL_LOCK_SUMMARY,
            label_variant: LABEL_VARIANT,
        })
    }
}

/// `12.4.1` -> `12.4`.
fn major_minor(version: &str) -> String {
    let mut it = version.split('.');
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}"),
        _ => version.to_string(),
    }
}

/// The find-links directories as install-step (source, target) pairs: each beside the
/// requirements under /tmp/envbuild, where pip reads a relative location from.
fn find_links_binds(lock: &Lock) -> Vec<(String, String)> {
    local_find_links(lock)
        .map(|d| (d.to_string(), format!("/tmp/envbuild/{d}")))
        .collect()
}

/// environment.yml's conda dependencies: the lock's conda specs; wheel sources get python (and
/// pip) so that `conda env create` on a laptop builds the same environment as the image. A conda
/// closure lists every package at its exact build instead (python and pip among them).
fn environment_conda_deps(lock: &Lock, python: &str) -> Vec<String> {
    if conda::conda_pkgs(lock).next().is_some() {
        return conda::conda_pkgs(lock).map(conda::exact_spec).collect();
    }
    let mut deps = lock.install.conda.clone();
    let has = |deps: &[String], name: &str| deps.iter().any(|d| conda_name(d) == name);
    if !has(&deps, "python") && !python.is_empty() {
        deps.insert(0, format!("python={python}"));
    }
    if !lock.install.pip.is_empty() && !has(&deps, "pip") {
        deps.push("pip".to_string());
    }
    deps
}

/// The pip requirements (requirements.txt, environment.yml's `pip:`) and the dev image's pip
/// constraints. With a closure: its pip part, hashed (beside a conda closure, what conda does
/// not provide), and conda entries that pip can read pin JupyterLab's install too.
fn pip_and_constraints(lock: &Lock) -> (Vec<String>, Vec<String>) {
    if lock.closure.is_empty() {
        return (
            lock.install.pip.clone(),
            lock.packages
                .iter()
                .filter(|(name, version)| *name != "python" && pep440_like(version))
                .map(|(name, version)| format!("{name}=={version}"))
                .collect(),
        );
    }
    let mut constraints: Vec<String> = conda::pip_pkgs(lock)
        .map(|p| format!("{}=={}", p.name, p.version))
        .collect();
    constraints.extend(conda::conda_pkgs(lock).filter_map(conda::pip_constraint));
    let pip = conda::pip_pkgs(lock)
        .map(|p| format!("{}=={} --hash=sha256:{}", p.name, p.version, p.sha256))
        .collect();
    (pip, constraints)
}

/// Versions pip can read as `==` pins (conda build-style strings such as `1.0_1` are left out).
fn pep440_like(v: &str) -> bool {
    v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+!".contains(c))
}

/// The package name of a conda match spec: `conda-forge::pytorch==2.1=cuda*` -> `pytorch`.
fn conda_name(spec: &str) -> &str {
    let s = spec.rsplit_once("::").map_or(spec, |(_, s)| s);
    s.split(['=', '<', '>', '!', '~', ' ']).next().unwrap_or(s)
}

/// A lowercase RFC 1123 label (Kubernetes names, compose services, image repositories).
pub fn dns_label(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_matches('-').chars().take(50).collect();
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "envbuild".to_string()
    } else {
        out
    }
}

/// Docker's `16g` as a Kubernetes quantity (`16Gi`); validated beforehand.
fn k8s_quantity(docker: &str) -> String {
    let (num, unit) = docker.split_at(
        docker.len()
            - docker
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len(),
    );
    match unit.to_ascii_lowercase().as_str() {
        "k" => format!("{num}Ki"),
        "m" => format!("{num}Mi"),
        "g" => format!("{num}Gi"),
        _ => num.to_string(),
    }
}

/// Refuse any lock value that no template could carry safely. The spec validator already refuses
/// these, but a lock can be edited by hand, so the renderer checks again instead of relying on it.
/// Fields that go into a position that cannot be quoted (a `FROM` image, a `COPY` source, a
/// requirement line, a mount) must match a strict grammar; free text (the name) only has to be
/// free of control characters, and is quoted wherever it appears.
pub fn check_lock_values(lock: &Lock) -> Result<(), Failure> {
    let mut c = ValueCheck::default();
    // Every string anywhere in the lock (GPU names and the target driver reach the metadata
    // comment of environment.yml, for instance) is checked for line breaks and length first.
    match serde_json::to_value(lock) {
        Ok(v) => walk_strings("", &v, &mut |path, s| c.check(path, s, true, "")),
        Err(e) => return Err(Failure::bug(format!("cannot inspect the lock: {e}"))),
    }
    c.check(
        "name",
        &lock.name,
        !lock.name.is_empty(),
        "a non-empty name",
    );
    check_install_values(&mut c, lock);
    check_version_values(&mut c, lock);
    check_image_values(&mut c, &lock.image);
    c.finish()
}

/// The problems [`check_lock_values`] found so far.
#[derive(Default)]
struct ValueCheck {
    bad: Vec<Diagnostic>,
}

impl ValueCheck {
    /// Refuse `value` of `field` when it is too long, has a control character or line break,
    /// or is not `ok` (then it is not `rule`).
    fn check(&mut self, field: &str, value: &str, ok: bool, rule: &str) {
        let why = if value.len() > MAX_VALUE_LEN {
            Some(format!(
                "is {} characters long (at most {MAX_VALUE_LEN})",
                value.len()
            ))
        } else if value
            .chars()
            .any(|c| c.is_control() || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}'))
        {
            Some("contains a control character or line break".to_string())
        } else if !ok {
            Some(format!("is not {rule}"))
        } else {
            None
        };
        if let Some(why) = why {
            let shown: String = value
                .chars()
                .take(60)
                .collect::<String>()
                .escape_debug()
                .to_string();
            self.bad.push(
                Diagnostic::error(
                    codes::UNSAFE_VALUE,
                    format!("lock value `{field}` (`{shown}`) {why}; envbuild will not render it"),
                )
                .with_hint("was the lock edited by hand? re-create it with `envbuild lock SPEC`"),
            );
        }
    }

    fn finish(mut self) -> Result<(), Failure> {
        // The generic walk and a field's own check may both report one value: keep the first.
        let mut seen = std::collections::BTreeSet::new();
        self.bad.retain(|d| seen.insert(d.message.clone()));
        if self.bad.is_empty() {
            Ok(())
        } else {
            Err(Failure::new(self.bad))
        }
    }
}

/// A non-empty word of ASCII letters, digits and `extra`, not starting with `-` (so it cannot
/// be read as an option).
fn word(s: &str, extra: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// Channels and install lines: they reach environment.yml, requirements.txt and `RUN` lines.
fn check_install_values(c: &mut ValueCheck, lock: &Lock) {
    for ch in &lock.channels {
        c.check("channels", ch, word(ch, "._-:/"), "a channel name or URL");
    }
    for s in &lock.install.conda {
        c.check(
            "install.conda",
            s,
            word(s, "._-:/=*+!<>,~"),
            "a conda match spec",
        );
    }
    for s in &lock.install.pip {
        // A pinned direct reference (`name @ git+https://...@<commit>`) and a marker
        // (`; python_version > "3.8"`, in its canonical text) pass the spec's own rules: one
        // rule where the value enters and here, so a lock that locks also renders.
        let (req, marker_ok) = match crate::core::spec::split_marker(s) {
            Ok((req, Some(m))) => (req, s.split_once(';').is_some_and(|(_, w)| w.trim() == m)),
            Ok((req, None)) => (req, true),
            Err(_) => (s.as_str(), false),
        };
        let parsed = crate::core::spec::parse_pip_pkg(req);
        // The spec's parser holds the name to the one PEP 508 rule, a range's too.
        let named = !matches!(parsed, crate::core::spec::PkgParse::Invalid(_));
        let direct = matches!(parsed, crate::core::spec::PkgParse::Ok(p) if p.url.is_some());
        c.check(
            "install.pip",
            s,
            marker_ok && named && (direct || word(req, "._-=[],!<>~+*")),
            "a pinned pip requirement",
        );
    }
    // The spec's rule for pip locations; PyTorch's wheel index is the source's own.
    let pip_location =
        |u: &str, dirs: bool| crate::core::spec::pip_location_rule(u, dirs).is_ok_and(|n| n == u);
    for u in &lock.install.pip_extra_index_urls {
        let pytorch = u
            .strip_prefix(crate::core::resolve::INDEX_BASE)
            .and_then(|v| v.strip_prefix('/'))
            .is_some_and(|v| word(v, "._-"));
        c.check(
            "install.pip_extra_index_urls",
            u,
            pytorch || pip_location(u, false),
            "an http(s) URL",
        );
    }
    if let Some(u) = &lock.install.pip_index_url {
        c.check(
            "install.pip_index_url",
            u,
            pip_location(u, false),
            "an http(s) URL",
        );
    }
    for u in &lock.install.pip_find_links {
        c.check(
            "install.pip_find_links",
            u,
            pip_location(u, true),
            "an http(s) URL or a relative directory",
        );
    }
    for p in &lock.closure {
        c.check(
            "closure.name",
            &p.name,
            word(&p.name, "._-"),
            "a package name",
        );
        c.check(
            "closure.version",
            &p.version,
            word(&p.version, "._-+!"),
            "a version",
        );
        c.check(
            "closure.url",
            &p.url,
            ["https://", "http://", "file:///"]
                .iter()
                .any(|s| p.url.starts_with(s))
                && word(&p.url, "._-:/~%+=@"),
            "a file URL",
        );
        c.check(
            "closure.sha256",
            &p.sha256,
            p.sha256.len() == 64 && p.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
            "a sha256",
        );
        check_conda_values(c, p);
        c.check(
            "closure.index",
            &p.index,
            ["https://", "http://", "file:///"]
                .iter()
                .any(|s| p.index.starts_with(s))
                && word(&p.index, "._-:/~%+"),
            "an index URL",
        );
    }
    if let Some(v) = &lock.install.conda_override_cuda {
        c.check(
            "install.conda_override_cuda",
            v,
            word(v, "."),
            "a CUDA version",
        );
    }
}

/// A closure entry's kind, and a conda entry's build, subdir, md5 and file: they reach the
/// explicit file (`URL#MD5`, where a `#` or a blank would cut the line) and environment.yml.
fn check_conda_values(c: &mut ValueCheck, p: &crate::core::lock::ClosurePkg) {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    c.check(
        "closure.kind",
        &p.kind,
        p.kind == conda::CONDA || p.kind == conda::PIP,
        "`pip` or `conda`",
    );
    if let Some(b) = &p.build {
        c.check("closure.build", b, word(b, "._+"), "a conda build string");
    }
    if let Some(s) = &p.subdir {
        c.check("closure.subdir", s, word(s, "-"), "a conda subdir");
    }
    if let Some(m) = &p.md5 {
        c.check("closure.md5", m, hex(m, 32), "an md5");
    }
    if p.kind == conda::CONDA {
        c.check(
            "closure.url",
            &p.url,
            p.url.ends_with(".conda") || p.url.ends_with(".tar.bz2"),
            "a conda package file URL (`.conda` or `.tar.bz2`)",
        );
    }
}

/// Package names and versions, CUDA and driver versions.
fn check_version_values(c: &mut ValueCheck, lock: &Lock) {
    for (k, v) in &lock.packages {
        c.check("packages", k, rules::package_name(k), "a package name");
        c.check("packages", v, rules::version(v), "an exact version");
    }
    c.check("cuda", &lock.cuda, word(&lock.cuda, "."), "a CUDA version");
    c.check(
        "driver_min",
        &lock.driver_min,
        word(&lock.driver_min, "."),
        "a driver version",
    );
    if let Some(d) = &lock.driver_min_compat {
        c.check("driver_min_compat", d, word(d, "."), "a driver version");
    }
}

/// The image settings: the `FROM` reference, versions, sizes and paths.
fn check_image_values(c: &mut ValueCheck, img: &LockedImage) {
    c.check(
        "image.base",
        &img.base,
        rules::image_ref(&img.base).is_ok(),
        "a pinned image reference",
    );
    if let Some(d) = &img.base_digest {
        c.check(
            "image.base_digest",
            d,
            d.starts_with("sha256:") && word(d, ":"),
            "a sha256 digest",
        );
    }
    c.check(
        "image.jupyterlab",
        &img.jupyterlab,
        rules::version(&img.jupyterlab),
        "a version",
    );
    c.check(
        "image.shm_size",
        &img.shm_size,
        rules::shm_size(&img.shm_size).is_ok(),
        "a size such as `16g`",
    );
    for (field, p) in [
        ("image.datasets", &img.datasets),
        ("image.checkpoints", &img.checkpoints),
    ] {
        if let Some(p) = p {
            c.check(
                field,
                p,
                rules::is_safe_path(p, true),
                "an absolute path of letters, digits and . _ - /",
            );
        }
    }
    if let Some(p) = &img.ca_bundle {
        c.check(
            "image.ca_bundle",
            p,
            rules::project_subdir(p) || rules::is_safe_path(p, true),
            "a file inside the project or an absolute path",
        );
    }
    if let Some(w) = &img.wheels {
        c.check(
            "image.wheels",
            w,
            rules::project_subdir(w),
            "a folder inside the project, named relative to it",
        );
    }
}

/// Call `f(dotted.path, string)` for every string in a JSON value, keys included.
fn walk_strings(path: &str, v: &serde_json::Value, f: &mut dyn FnMut(&str, &str)) {
    match v {
        serde_json::Value::String(s) => f(path, s),
        serde_json::Value::Array(items) => {
            for item in items {
                walk_strings(path, item, f);
            }
        }
        serde_json::Value::Object(map) => {
            for (k, item) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                f(&p, k);
                walk_strings(&p, item, f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_quantities() {
        assert_eq!(dns_label("Torch_GPU env!"), "torch-gpu-env");
        assert_eq!(dns_label("$(reboot)"), "reboot");
        assert_eq!(dns_label("!!!"), "envbuild");
        assert_eq!(k8s_quantity("16g"), "16Gi");
        assert_eq!(k8s_quantity("512m"), "512Mi");
        assert_eq!(k8s_quantity("4096"), "4096");
        assert_eq!(conda_name("conda-forge::pytorch==2.10.0=cuda*"), "pytorch");
        assert_eq!(conda_name("python=3.12"), "python");
        assert_eq!(conda_name("pip"), "pip");
    }

    #[test]
    fn an_embedded_template_error_is_a_bug_a_user_one_is_not() {
        let e = minijinja::Error::new(minijinja::ErrorKind::UndefinedError, "x is undefined");
        let bug = template_failure("Dockerfile.j2", &e, &RenderOptions::default());
        assert_eq!(bug.exit_code, crate::core::diag::exit::USAGE);
        assert_eq!(bug.diagnostics[0].code, crate::core::diag::codes::INTERNAL);
        assert!(bug.to_string().contains("envbuild bug"), "{bug}");
        let user = template_failure(
            "Dockerfile.j2",
            &e,
            &RenderOptions {
                overrides: Some(TemplateOverrides {
                    origin: "tpl".into(),
                    files: BTreeMap::new(),
                }),
                pip_mirror: None,
                conda_mirror: None,
            },
        );
        assert_eq!(user.exit_code, crate::core::diag::exit::FAILURE);
        assert_eq!(user.diagnostics[0].code, codes::TEMPLATE_ERROR);
    }

    /// Every embedded template renders with the context of a real lock (strict undefined).
    #[test]
    fn embedded_templates_render_every_branch() {
        let text = include_str!("../../../specs/torch29-cu128/envbuild.lock");
        let mut lock = Lock::from_toml(text).expect("lock");
        for (ssh, wheels, mode) in [
            (true, None, None),
            (
                false,
                Some("wheels".to_string()),
                Some(DriverMode::ForwardCompat),
            ),
        ] {
            lock.image.ssh = ssh;
            lock.image.wheels = wheels;
            lock.driver_mode = mode;
            let r = render(&lock, &RenderOptions::default()).expect("render");
            assert_eq!(r.files.contains_key("envbuild/sshd_config"), ssh);
        }
    }
}
