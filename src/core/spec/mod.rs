//! The spec: parsing (TOML, or YAML with the same keys, with file:line:column on errors) and
//! validation into domain types that cannot hold a newline or a shell metacharacter.
//! This module performs no I/O: callers pass the text and a display name.
//!
//! Here: the domain types, parsing (`parse`, `parse_raw`) and the codes. [`raw`] mirrors the
//! file; `validate` runs the checks, one module per concern: `pins` (versions), `sources`
//! (channels, source), `packages` (extra conda/pip pins), `target`, `image`, `run`, each
//! reporting into `context`, with `safety` holding the character rules they share and
//! `locator` placing diagnostics. The hint of an unpinned `python` or `pytorch` is proven by the
//! resolver, which `validate` hands the rest of the spec ([`Unpinned`]).

mod context;
mod image;
mod locator;
mod packages;
mod pins;
pub mod ranges;
pub mod raw;
mod run;
mod safety;
pub mod schema;
mod sources;
mod target;
mod validate;

pub use crate::core::rules::{is_safe_path, MAX_VALUE_LEN};
pub use locator::Locator;
pub use packages::{
    bare_reference, parse_conda_pkg, parse_pip_pkg, pin_reference_hint, split_marker,
    BareReference, PkgParse, PIN_REFERENCE_HINT, REFERENCE_UNPINNED,
};
pub use pins::{satisfies, Pin};
pub use ranges::{Asked, Choice, Req, Syntax};
pub use sources::pip_location_rule;
pub use validate::{selector_key, Draft, Unpinned};

use crate::core::diag::{Diagnostic, Location};
use crate::core::version::Version;
use raw::RawSpec;
use serde::Serialize;

/// The spec's diagnostic codes, declared in the one registry ([`crate::core::codes`]).
pub mod codes {
    pub use crate::core::codes::spec::*;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The `pytorch` conda channel with `pytorch-cuda` (or `cudatoolkit` before 1.13).
    PytorchChannel,
    /// conda-forge's `pytorch` with `cuda-version`.
    CondaForge,
    /// A `download.pytorch.org/whl/cuXYZ` wheel index.
    PytorchIndex,
    /// The plain PyPI wheel, with that release's default CUDA.
    Pypi,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::PytorchChannel => "pytorch-channel",
            Source::CondaForge => "conda-forge",
            Source::PytorchIndex => "pytorch-index",
            Source::Pypi => "pypi",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        Some(match s {
            "pytorch-channel" => Source::PytorchChannel,
            "conda-forge" => Source::CondaForge,
            "pytorch-index" => Source::PytorchIndex,
            "pypi" => Source::Pypi,
            _ => return None,
        })
    }

    /// Whether torch itself comes from conda (else from pip wheels).
    pub fn is_conda(self) -> bool {
        matches!(self, Source::PytorchChannel | Source::CondaForge)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub enum Platform {
    #[serde(rename = "linux-64")]
    Linux64,
    #[serde(rename = "linux-aarch64")]
    LinuxAarch64,
    #[serde(rename = "win-64")]
    Win64,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Linux64 => "linux-64",
            Platform::LinuxAarch64 => "linux-aarch64",
            Platform::Win64 => "win-64",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        Some(match s {
            "linux-64" => Platform::Linux64,
            "linux-aarch64" => Platform::LinuxAarch64,
            "win-64" => Platform::Win64,
            _ => return None,
        })
    }

    /// The CPU architecture of the platform's machines.
    pub fn machine(self) -> crate::core::compat::CpuArch {
        match self {
            Platform::LinuxAarch64 => crate::core::compat::CpuArch::Aarch64,
            Platform::Linux64 | Platform::Win64 => crate::core::compat::CpuArch::X86_64,
        }
    }

    pub fn os(self) -> crate::core::compat::Os {
        match self {
            Platform::Win64 => crate::core::compat::Os::Windows,
            _ => crate::core::compat::Os::Linux,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Runtime,
    Dev,
}

impl Variant {
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Runtime => "runtime",
            Variant::Dev => "dev",
        }
    }
}

/// The version of an extra package named without one (`einops`, `jupyterlab`): any version,
/// which the closure pins (a range like any other).
pub const ANY_VERSION: &str = "*";

/// An extra conda package, pinned: `[channel::]name=version`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct CondaPkg {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channel: Option<String>,
    pub name: String,
    pub version: String,
    /// Written `name=X.Y` (one `=`, fewer than three version parts): conda reads it as any
    /// `X.Y.*`, and so does envbuild, instead of narrowing it to `X.Y` exactly.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub fuzzy: bool,
}

impl CondaPkg {
    /// A version range (`>=2,<3`; `*`: any version, the package named bare): the closure pins
    /// it.
    pub fn is_range(&self) -> bool {
        self.version == ANY_VERSION || self.version.starts_with(['<', '>', '=', '!'])
    }

    /// The match spec conda understands: `conda-forge::pandas==2.1.1`, or conda's own
    /// `numpy=1.22` (any 1.22.x) for a fuzzy pin, or a range as written (`pandas>=2,<3`), or
    /// the name alone for any version.
    pub fn match_spec(&self) -> String {
        if self.version == ANY_VERSION {
            return match &self.channel {
                Some(c) => format!("{c}::{}", self.name),
                None => self.name.clone(),
            };
        }
        let op = if self.is_range() {
            ""
        } else if self.fuzzy {
            "="
        } else {
            "=="
        };
        match &self.channel {
            Some(c) => format!("{c}::{}{op}{}", self.name, self.version),
            None => format!("{}{op}{}", self.name, self.version),
        }
    }
}

/// An extra pip package, pinned: `name[extras]==version`, or a direct reference pinned by
/// content (`name @ git+https://...@<40-hex commit>`, `name @ https://...#sha256=<64 hex>`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct PipPkg {
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub extras: Vec<String>,
    /// The commit or the sha256 for a direct reference.
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub url: Option<String>,
    /// A PEP 508 marker in its canonical text (`python_version > "3.8"`): the lock judges it
    /// for the chosen Python and each platform, and leaves the package out where it does not
    /// hold.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub marker: Option<String>,
}

impl PipPkg {
    /// A version range (`>=0.8`; `*`: any version, the package named bare): the closure pins
    /// it.
    pub fn is_range(&self) -> bool {
        self.url.is_none()
            && (self.version == ANY_VERSION || self.version.starts_with(['<', '>', '=', '!', '~']))
    }

    /// The pip requirement line, with the marker after `; ` when there is one.
    pub fn requirement(&self) -> String {
        match &self.marker {
            Some(m) => format!("{}; {m}", self.unmarked()),
            None => self.unmarked(),
        }
    }

    /// The requirement without its marker.
    fn unmarked(&self) -> String {
        let extras = if self.extras.is_empty() {
            String::new()
        } else {
            format!("[{}]", self.extras.join(","))
        };
        if let Some(url) = &self.url {
            return format!("{}{extras} @ {url}", self.name);
        }
        if self.version == ANY_VERSION {
            return format!("{}{extras}", self.name);
        }
        if self.is_range() {
            return format!("{}{extras}{}", self.name, self.version);
        }
        if self.extras.is_empty() {
            format!("{}=={}", self.name, self.version)
        } else {
            format!("{}[{}]=={}", self.name, self.extras.join(","), self.version)
        }
    }
}

/// pip's package locations other than PyPI and PyTorch's wheel index, as the spec's
/// `pip-index-url`, `pip-extra-index-urls` and `pip-find-links` give them (validated: http(s)
/// URLs without credentials; a find-links location may also be a directory inside the project).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PipSources {
    /// `--index-url`: replaces PyPI as pip's main index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// `--extra-index-url`, in the order written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_index_urls: Vec<String>,
    /// `--find-links`: an http(s) URL of a page of links, or a relative directory.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub find_links: Vec<String>,
}

impl PipSources {
    pub fn is_empty(&self) -> bool {
        self.index_url.is_none() && self.extra_index_urls.is_empty() && self.find_links.is_empty()
    }

    /// The find-links locations that are directories of the project (not URLs).
    pub fn local_dirs(&self) -> impl Iterator<Item = &str> {
        self.find_links
            .iter()
            .map(String::as_str)
            .filter(|l| !is_url(l))
    }

    /// Every URL with its key, for checks such as `INSECURE_SOURCE`.
    pub fn urls(&self) -> Vec<(&'static str, &str)> {
        let mut v: Vec<(&'static str, &str)> = Vec::new();
        v.extend(self.index_url.iter().map(|u| ("pip-index-url", u.as_str())));
        v.extend(
            self.extra_index_urls
                .iter()
                .map(|u| ("pip-extra-index-urls", u.as_str())),
        );
        v.extend(
            self.find_links
                .iter()
                .filter(|l| is_url(l))
                .map(|u| ("pip-find-links", u.as_str())),
        );
        v
    }
}

/// Whether a package location is a URL (`scheme://...`) rather than a path.
pub fn is_url(s: &str) -> bool {
    s.contains("://")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    pub driver: Option<Version>,
    pub gpus: Vec<String>,
    /// The platform resolved for: as written, else `linux-64` until resolution infers it from
    /// the GPUs (see `platform_given`).
    pub platform: Platform,
    /// `[target] platforms`: a fleet of several platforms, in the fixed order of [`Platform`];
    /// left out of the canonical JSON when empty, so specs without it keep their hash.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<Platform>,
    /// Whether `platform` was written (else it is inferred from the GPUs). Not hashed: the
    /// inference is a function of the spec and the table, both in the lock.
    #[serde(skip)]
    pub platform_given: bool,
    pub glibc: Option<Version>,
    pub forward_compat: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Image {
    pub base: Option<String>,
    pub variants: Vec<Variant>,
    pub base_provides: Vec<String>,
    pub wheels: Option<String>,
    pub ssh: bool,
    pub jupyterlab: Option<String>,
    /// The network's CA bundle for the build (a file inside the project or an absolute path);
    /// left out of the canonical JSON when unset, so older locks keep their hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    pub shm_size: String,
    pub port: u16,
    pub datasets: Option<String>,
    pub checkpoints: Option<String>,
}

/// A validated spec. Its canonical JSON (field order as declared) is what the lock hashes, so a
/// TOML and a YAML file with the same keys give the same lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spec {
    pub name: String,
    pub python: Version,
    pub pytorch: Version,
    pub source: Source,
    pub pytorch_cuda: Option<Version>,
    pub cuda: Option<Version>,
    /// In priority order: as written, or the source's defaults (see [`default_channels`]), so
    /// that naming the defaults explicitly gives the same lock.
    pub channels: Vec<String>,
    pub torchvision: bool,
    pub torchaudio: bool,
    pub conda: Vec<CondaPkg>,
    pub pip: Vec<PipPkg>,
    /// Where pip looks besides PyPI; left out of the canonical JSON when empty, so specs
    /// without these keys keep their hash.
    #[serde(skip_serializing_if = "PipSources::is_empty")]
    pub pip_sources: PipSources,
    pub target: Target,
    pub image: Image,
    pub run: Run,
    /// `[lock]`: left out of the canonical JSON when default, so specs without it keep their hash.
    #[serde(skip_serializing_if = "LockOpts::is_default")]
    pub lock: LockOpts,
    /// The ranges the spec asked for where the versions above were chosen; left out of the
    /// canonical JSON when empty, so exact specs keep their hash.
    #[serde(skip_serializing_if = "Asked::is_empty")]
    pub asked: Asked,
    /// Each choice made for a range and why, for the lock's `[choices]`; not part of the
    /// canonical JSON (it follows from `asked`, the table and the lock kept).
    #[serde(skip)]
    pub choices: std::collections::BTreeMap<String, Choice>,
    /// Whether the spec wrote conda-forge's CUDA selector as `cuda-version` (the same key as
    /// `cuda`, so not part of the canonical JSON): messages and hints name it as written.
    #[serde(skip)]
    pub cuda_version_key: bool,
}

impl Spec {
    /// The key that selects this spec's CUDA, as the spec spells it.
    pub fn selector_key(&self) -> &'static str {
        spelled_selector_key(self.source, self.cuda_version_key)
    }
}

/// The key that selects CUDA for a source, as a spec spells it: `cuda-version` is conda-forge's
/// name for `cuda`.
pub fn spelled_selector_key(source: Source, cuda_version_key: bool) -> &'static str {
    match source {
        Source::CondaForge if cuda_version_key => "cuda-version",
        s => selector_key(s),
    }
}

/// The `[lock]` section: whether the lock pins the whole closure, and from which index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockOpts {
    /// Resolve and record every package the environment will contain: on unless the spec says
    /// `closure = false`, or has what a closure cannot include (`closure_off` says what).
    pub closure: bool,
    /// The index the closure is resolved from (default PyPI's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
    /// Record the base image's digest and build `FROM name@digest`: default on with `closure`
    /// (a digest no registry gives is then a warning the lock records), off without;
    /// `base-digest = true` asks for it (and fails without it), with or without a closure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_digest: Option<bool>,
    /// Why the default closure is off for this spec (it follows from the spec's other keys, so
    /// it is not part of the canonical JSON).
    #[serde(skip)]
    pub closure_off: Option<String>,
}

impl Default for LockOpts {
    fn default() -> LockOpts {
        LockOpts {
            closure: true,
            index_url: None,
            base_digest: None,
            closure_off: None,
        }
    }
}

impl LockOpts {
    /// Whether the lock records the base image's digest: as the spec says, else only a closure
    /// lock does.
    pub fn wants_base_digest(&self) -> bool {
        self.base_digest.unwrap_or(self.closure)
    }

    /// Whether a base digest no registry gives fails the lock: only when the spec asks for it.
    pub fn requires_base_digest(&self) -> bool {
        self.base_digest == Some(true)
    }

    /// Whether the lock holds anything beyond the table's resolution (a closure, a base digest):
    /// parts that need the network once and are reused from the lock on disk after that.
    pub fn is_full(&self) -> bool {
        self.closure || self.wants_base_digest()
    }

    /// The table-level lock `--no-closure` asks for: no closure, and a base digest only where
    /// the spec asks for one.
    pub fn without_closure(&self) -> LockOpts {
        LockOpts {
            closure: false,
            closure_off: None,
            ..self.clone()
        }
    }

    /// Whether the section says nothing the defaults would not: left out of the canonical
    /// JSON, so a spec without `[lock]` hashes the same whether its closure is on or gives way.
    pub fn is_default(&self) -> bool {
        self.index_url.is_none()
            && self.base_digest.is_none()
            && (self.closure || self.closure_off.is_some())
    }
}

/// The channels a source uses when the spec names none: the pytorch channel needs `nvidia` for
/// `pytorch-cuda` (1.13+), and 1.12's `cudatoolkit=11.6` came from conda-forge; everything else
/// (conda-forge builds, and python/pip for wheel sources) comes from conda-forge.
pub fn default_channels(
    source: Source,
    pytorch: &Version,
    pytorch_cuda: Option<&Version>,
) -> Vec<String> {
    match source {
        Source::PytorchChannel => {
            let mut c = vec!["pytorch".to_string()];
            if pytorch.major_minor() == "1.12" {
                if pytorch_cuda.is_some_and(|v| v.major_minor() == "11.6") {
                    c.push("conda-forge".into());
                }
            } else {
                c.push("nvidia".into());
            }
            c
        }
        _ => vec!["conda-forge".to_string()],
    }
}

/// The file format of a spec, from its extension (TOML unless `.yml`/`.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Yaml,
}

impl Format {
    pub fn from_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yml") | Some("yaml") => Format::Yaml,
            _ => Format::Toml,
        }
    }
}

/// Why a spec did not validate: every problem found and, when the keys resolution needs were
/// valid, the spec with the bad parts left out, so that resolution problems can be reported in
/// the same run.
#[derive(Debug)]
pub struct SpecErrors {
    pub diagnostics: Vec<Diagnostic>,
    pub partial: Option<Box<Spec>>,
    /// When a core key is a range: what the resolver needs to choose its version (so the
    /// resolution problems of the rest are reported in the same run).
    pub unpinned: Option<Box<Unpinned>>,
}

impl std::fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for d in &self.diagnostics {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

/// A validated spec: exact, or with ranges the resolver chooses within.
#[derive(Debug)]
pub enum Parsed {
    /// The spec, and its parts as the resolver weighs them (`envbuild explain`).
    Exact(Box<Spec>, Box<Unpinned>),
    Ranged(Box<Unpinned>),
}

/// Parse and validate a spec. `file` names it in locations. On failure, every problem found.
/// A spec with ranges on its core keys is `Ranged`: `crate::core::resolve::parse_spec` chooses
/// its versions.
pub fn parse_ranged(
    text: &str,
    format: Format,
    file: &str,
    table: &crate::core::compat::Table,
) -> Result<Parsed, SpecErrors> {
    let raw = parse_raw(text, format, file).map_err(|d| SpecErrors {
        diagnostics: vec![d],
        partial: None,
        unpinned: None,
    })?;
    validate::validate(raw, &Locator::new(text, file), table)
}

/// [`parse_ranged`] for an exact spec: ranges on core keys are `UNPINNED_VERSION` here (only
/// the resolver chooses them: use `crate::core::resolve::parse_spec`).
pub fn parse(
    text: &str,
    format: Format,
    file: &str,
    table: &crate::core::compat::Table,
) -> Result<Spec, SpecErrors> {
    match parse_ranged(text, format, file, table)? {
        Parsed::Exact(s, _) => Ok(*s),
        Parsed::Ranged(u) => Err(SpecErrors {
            diagnostics: vec![Diagnostic::error(
                codes::UNPINNED_VERSION,
                "the spec gives ranges: the resolver chooses their versions",
            )
            .with_hint("lock it with `envbuild lock`, which chooses and records each version")],
            partial: None,
            unpinned: Some(u),
        }),
    }
}

/// Deserialize into the as-written structs, mapping syntax/schema errors to `INVALID_SPEC`
/// with a location and, for a misspelt key, a "did you mean".
pub fn parse_raw(text: &str, format: Format, file: &str) -> Result<RawSpec, Diagnostic> {
    if text.trim().is_empty() {
        return Err(
            Diagnostic::error(codes::INVALID_SPEC, format!("{file} is empty")).with_hint(
                "a spec needs at least `name`, `python` and `pytorch`; see specs/ for examples",
            ),
        );
    }
    let (message, location) = match format {
        Format::Toml => match toml::from_str::<RawSpec>(text) {
            Ok(r) => return Ok(r),
            Err(e) => {
                let loc = e.span().map(|s| offset_location(text, file, s.start));
                (e.message().trim().to_string(), loc)
            }
        },
        Format::Yaml => {
            let options = serde_saphyr::options! { with_snippet: false };
            match serde_saphyr::from_str_with_options::<RawSpec>(text, options) {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let loc = e.location().map(|l| Location {
                        file: file.to_string(),
                        line: l.line() as usize,
                        column: l.column() as usize,
                    });
                    (yaml_message(&e.to_string()), loc)
                }
            }
        }
    };
    let mut d = Diagnostic::error(codes::INVALID_SPEC, message.clone()).with_location(location);
    d.hint = schema_hint(&message);
    Err(d)
}

/// saphyr appends "at line X column Y" to some messages; the location is reported separately.
fn yaml_message(s: &str) -> String {
    let first = s.lines().next().unwrap_or(s).trim();
    if first.starts_with("multiple YAML documents") {
        return "the file holds more than one YAML document".to_string();
    }
    match first.find(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

fn schema_hint(message: &str) -> Option<String> {
    if let Some(rest) = message.split("unknown field `").nth(1) {
        let field = rest.split('`').next().unwrap_or("");
        let all = raw::TOP_KEYS
            .iter()
            .chain(raw::TARGET_KEYS)
            .chain(raw::IMAGE_KEYS)
            .chain(raw::RUN_KEYS)
            .chain(raw::LOCK_KEYS);
        let normalized = field.replace('_', "-").to_ascii_lowercase();
        let best = all
            .map(|k| (strsim::jaro_winkler(&normalized, k), *k))
            .filter(|(s, _)| *s > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        return Some(match best {
            Some((_, k)) => format!("did you mean `{k}`?"),
            None => "remove it; docs/spec.md lists every spec key".to_string(),
        });
    }
    if message.contains("invalid type") && message.contains("expected a string") {
        return Some("quote the value: versions are strings, e.g. python = \"3.10\"".to_string());
    }
    if message.contains("multiple YAML documents") {
        return Some(
            "a spec is one YAML document: remove the `---` line and what follows".to_string(),
        );
    }
    if message.contains("missing field") {
        return Some("see docs/spec.md for the required keys".to_string());
    }
    None
}

fn offset_location(text: &str, file: &str, offset: usize) -> Location {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Location {
        file: file.to_string(),
        line,
        column,
    }
}
