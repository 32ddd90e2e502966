//! The one registry of diagnostic codes: every code envbuild can emit is declared here once, by
//! the module that raises it (its area), with its kind and a line saying when it is raised.
//! This module performs no I/O.
//!
//! Adding a code is one line in [`registry!`]'s list below (then its row in
//! docs/diagnostics.md, which `tests/it/readme.rs` checks against [`ALL`]). The owning module's
//! old path keeps working: each area's `codes` module re-exports its area here
//! (`crate::core::resolve::codes::DRIVER_TOO_OLD` is `crate::core::codes::resolve::DRIVER_TOO_OLD`).
//! Core declares the infra and app codes too: a code is a name, not an effect, and one list
//! needs one place.
//!
//! The checks of `envbuild doctor` and of the smoke script are not diagnostics: they are check
//! outcomes (`core::doctor::Outcome`, the script's codes in docs/smoke.md).

/// A diagnostic code: a stable name (`DRIVER_TOO_OLD`) tools match on (also `core::diag::Code`).
pub type Code = &'static str;

/// Which severity a code is raised with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Always an error (exit 1; `USAGE` and `INTERNAL`: exit 2).
    Error,
    /// Always a warning (exit code unchanged).
    Warning,
    /// An error or a warning, by case (`BASE_DIGEST_UNAVAILABLE` is a warning unless the spec
    /// asks for the digest; a tampered lock that `lock` sets aside is a warning).
    Either,
}

/// One registered code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    pub code: Code,
    pub kind: Kind,
    /// The module that raises it (the area's name below).
    pub area: &'static str,
    /// When it is raised, one line.
    pub summary: &'static str,
}

/// Declares each area's codes (a module of constants named as their code) and [`ALL`].
macro_rules! registry {
    ($( $(#[$area_doc:meta])* mod $area:ident { $( $name:ident: $kind:ident, $summary:literal; )* } )*) => {
        $(
            $(#[$area_doc])*
            pub mod $area {
                use super::Code;
                $( #[doc = $summary] pub const $name: Code = stringify!($name); )*
            }
        )*
        /// Every code envbuild can emit, in the registry's order.
        pub const ALL: &[CodeInfo] = &[
            $( $( CodeInfo {
                code: $area::$name,
                kind: Kind::$kind,
                area: stringify!($area),
                summary: $summary,
            }, )* )*
        ];
    };
}

registry! {
    /// Shared by every command (`core::diag::codes`).
    mod diag {
        USAGE: Error, "A bad command line (exit 2).";
        INTERNAL: Error, "An envbuild bug (exit 2).";
        IO_ERROR: Error, "A file could not be read or written.";
    }
    /// The spec's parsing and validation (`core::spec::codes`).
    mod spec {
        INVALID_SPEC: Error, "A spec with a syntax or schema error, a missing key or a bad value.";
        UNPINNED_VERSION: Error, "A version that is not pinned (`latest`, `*`, a range, a branch).";
        UNSAFE_VALUE: Error, "A value that could escape a Dockerfile, YAML or shell line (a spec's or, at render, a lock's).";
        UNNAMED_REFERENCE: Error, "A pip line that installs from a URL without naming the package (`git+https://...`).";
        CLOSURE_UNSUPPORTED: Error, "`[lock] closure = true` on a spec whose closure envbuild cannot resolve.";
    }
    /// Resolution of the spec against the table and the target (`core::resolve::codes`).
    mod resolve {
        DRIVER_TOO_OLD: Error, "The target driver cannot run the build (or a GPU needs a newer driver).";
        ARCH_NOT_IN_WHEEL: Error, "A target GPU's architecture is not in the build.";
        PYTHON_UNSUPPORTED: Error, "No wheels of the release for that Python.";
        CHANNEL_DISCONTINUED: Error, "The release is not on the `pytorch` conda channel.";
        CHANNEL_REQUIRED: Error, "A channel the source needs is missing.";
        NO_SUCH_VARIANT: Error, "No build for that CUDA from that source.";
        NO_SUCH_PACKAGE_VERSION: Error, "A release the table does not know.";
        GLIBC_TOO_OLD: Error, "The target's glibc is below the wheel's floor.";
        VIRTUAL_PACKAGE_UNSATISFIED: Error, "conda-forge's `__cuda` constraint is not met by the driver.";
        UNKNOWN_GPU: Error, "An unknown GPU name, or one entry naming two GPUs.";
        CONFLICTING_PIN: Error, "An extra pin that breaks the build (NumPy 2 with torch <= 2.2).";
        MARKER_UNDECIDED: Error, "A pip extra's marker the chosen Python and platform leave open (a patch-level comparison on an `X.Y` Python).";
        FORWARD_COMPAT_UNSUPPORTED: Error, "Forward compatibility asked for on GPUs that do not support it.";
        BASE_HAS_NO_PYTHON: Error, "The base image has no Python to install into.";
        PLATFORM_CONFLICT: Error, "A target GPU comes in no machine of the spec's platform(s) (GH200 on linux-64).";
        JETPACK_ONLY: Error, "A target GPU runs only NVIDIA's JetPack builds of torch (Jetson Orin, Xavier).";
        DRIVER_MINOR_COMPAT: Warning, "The driver runs the build only through minor-version compatibility.";
        FORWARD_COMPAT: Warning, "The driver runs the build only through forward compatibility (cuda-compat).";
        PYTHON_EOL: Warning, "The Python is past end of life.";
        PYTHON_EXPERIMENTAL: Warning, "The release's support for that Python is experimental.";
        UNCONFIRMED_FACT: Warning, "The outcome depends on a fact the table marks unconfirmed.";
        PTX_JIT: Warning, "A GPU runs the build only by JIT-compiling PTX.";
        DRIVER_DROPS_GPU: Warning, "The driver branch no longer drives a target GPU family.";
        NO_TARGET_DRIVER: Warning, "The spec names no target driver: the driver checks did not run.";
        NO_TARGET_GPUS: Warning, "The spec names no target GPUs: the architecture checks did not run.";
        TORCHAUDIO_FROZEN: Warning, "torchaudio is no longer released per torch version.";
        EXPERIMENTAL_VARIANT: Warning, "The wheel variant is marked experimental.";
        CHANNEL_MIX: Warning, "conda-forge's pytorch mixed with `defaults`/`pytorch`.";
        INSECURE_SOURCE: Warning, "A channel, index or find-links location over plain `http://`.";
    }
    /// The lock file (`core::lock`) and its closure's own checks (`core::closure::verify::codes`).
    mod lock {
        INVALID_LOCK: Error, "A lock file that cannot be read, or of another format version.";
        LOCK_TAMPERED: Either, "A closure that does not match its `closure_sha256` (a warning where `lock` sets it aside).";
        CLOSURE_ENTRY_INVALID: Either, "A closure entry that fails its own checks (a warning where `lock` sets it aside).";
    }
    /// Resolving the closure (`core::closure::codes`).
    mod closure {
        CLOSURE_NEEDS_RESOLUTION: Error, "`--offline`/`--locked`/`render`: the lock has no closure resolved from this spec's inputs.";
        CLOSURE_RESOLVE_FAILED: Error, "The closure could not be resolved for the target (uv or the conda solver).";
        CLOSURE_NEEDS_WHEEL: Error, "A package of the closure has no wheel for the target.";
        RESOLVER_MISSING: Error, "The closure's pip part needs uv, and there is no usable uv.";
        YANKED_RELEASE: Either, "A pip release its index yanked (PEP 592): a warning where the spec pins it exactly, an error otherwise.";
        MIRROR_HASH_MISMATCH: Error, "`--pip-mirror` or `--conda-mirror`: the mirror served a file whose hash is not the lock's.";
    }
    /// The compatibility table and what real builds teach it (`core::compat`, `core::learn::codes`).
    mod table {
        TABLE_INVALID: Error, "A `--table` file that does not parse or breaks an invariant.";
        LEARN_INPUT_INVALID: Error, "`table learn`: a report it cannot learn from.";
        TABLE_MISMATCH: Warning, "The installed torch disagrees with the table row the lock came from.";
    }
    /// Rendering with templates (`core::render::codes`, `core::render::templates`).
    mod render {
        TEMPLATE_ERROR: Error, "A `--templates` file failed to render.";
        TEMPLATE_BUDGET: Error, "A template ran out of its instruction, nesting, output or value-size budget.";
    }
    /// `envbuild import` (`core::import::codes`).
    mod import {
        IMPORT_DROPPED: Warning, "An input line the spec does not carry over.";
        IMPORT_CHANGED: Warning, "An input line carried over with a change.";
    }
    /// The Rust side of the smoke test (`core::smoke::codes`).
    mod smoke {
        SMOKE_PYTHON_NOT_FOUND: Error, "The smoke test's Python interpreter could not be started.";
        SMOKE_TIMEOUT: Error, "The smoke test ran past its time limit and was killed.";
        SMOKE_BAD_OUTPUT: Error, "The smoke test's output is not a schema-1 report.";
        EMULATOR_CRASHED: Error, "The smoke test died inside the CPU emulator (qemu-user) that runs another platform's image.";
        INVALID_EXPECTATIONS: Error, "An `--expect-file` that is not a valid expectations document.";
        SMOKE_FAILED: Error, "The smoke test ran and a required check failed.";
        STEP_SUMMARY_UNWRITABLE: Warning, "`GITHUB_STEP_SUMMARY` names a file the verdicts table could not be appended to.";
        PLATFORM_MISMATCH: Error, "An image runs on another CPU architecture than its lock's platform (its smoke report says so).";
    }
    /// The Docker engine layer (`infra::docker::codes`).
    mod docker {
        ENGINE_UNREACHABLE: Error, "No Docker engine answers.";
        ENGINE_ERROR: Error, "The engine refused a request.";
        BASE_IMAGE_MISSING: Error, "The `FROM` image is not on the engine and was not pulled.";
        BUILD_STEP_FAILED: Error, "A build step failed.";
        BUILD_FAILED: Error, "The build failed otherwise.";
        CONTEXT_INVALID: Error, "A `COPY`/`ADD` source outside the context or not rendered, or a bad wheels folder.";
        IMAGE_NOT_FOUND: Error, "`envbuild test`: no such image on the engine.";
        NO_GPU_RUNTIME: Error, "The engine cannot give containers a GPU.";
        CUDA_DRIVER_TOO_OLD: Error, "The NVIDIA runtime refused the image: its `NVIDIA_REQUIRE_CUDA` needs a newer driver.";
        GPU_REQUIREMENT_UNMET: Error, "The NVIDIA runtime refused the image for another of its requirements (`arch`, `brand`).";
        INTERRUPTED: Error, "A signal stopped the run (its containers removed).";
        PULL_FAILED: Error, "A base image could not be pulled.";
        PUSH_FAILED: Error, "The tested image (or its verdict, or a fleet's image index) could not be pushed.";
        VERDICT_MISSING: Error, "`test --show-verdict`: the registry holds no verdict for the image, or one for another digest.";
        ENGINE_TIMEOUT: Error, "The engine answered the ping, then did not answer a call within its limit.";
        CA_BUNDLE_INVALID: Error, "The CA bundle named for the build is unusable.";
        BASE_DIGEST_UNAVAILABLE: Either, "The lock wants the base image's digest and no registry or engine has one (an error where the spec asks for it).";
    }
    /// Registry credentials (`infra::registry_auth::codes`).
    mod registry_auth {
        REGISTRY_AUTH: Error, "Registry credentials could not be read, or the registry refused them.";
    }
    /// The host's network settings (`infra::network::codes`).
    mod network {
        PROXY_INVALID: Error, "A proxy variable (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, lower case too) holds no usable proxy URL.";
    }
    /// Writing files (`infra::fs`).
    mod fs {
        OUTPUT_SYMLINK: Error, "An output (a folder, a file in it, the lock, `--junit`) is a symbolic link.";
    }
    /// Choosing versions for the spec's ranges (`core::resolve::choose::codes`).
    mod choose {
        NO_MATCHING_BUILD: Error, "No candidate of the table satisfies the spec's ranges and the target.";
        CHOSEN: Warning, "A note of `lock`: the version chosen for a range of the spec, and why.";
    }
    /// The use cases (`app::codes`).
    mod app {
        OUTPUT_EXISTS: Error, "An output file exists and `--force` was not given.";
        LOCK_STALE: Error, "`--locked`: the lock on disk differs from what the spec resolves to.";
        LOCK_MISSING: Error, "`--locked`: there is no lock on disk.";
        CANCELLED: Error, "`image SPEC... --fail-fast`: a spec not run (or stopped) because another one failed.";
        PLATFORM_NOT_IN_LOCK: Error, "`image --platform` names a platform the lock holds no resolution for.";
        RANGE_NOT_LOCKED: Warning, "A table-level lock (no closure) carries an extra package's range as written: nothing pins it.";
    }
}

/// The registered entry of `code`, if it is one.
pub fn info(code: &str) -> Option<&'static CodeInfo> {
    ALL.iter().find(|c| c.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_code_is_registered_once() {
        let mut seen = BTreeSet::new();
        for c in ALL {
            assert!(seen.insert(c.code), "{} is registered twice", c.code);
            assert!(
                c.code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{}: codes are SCREAMING_SNAKE_CASE",
                c.code
            );
            assert!(c.summary.ends_with('.'), "{}: summary", c.code);
        }
        assert_eq!(info("DRIVER_TOO_OLD").map(|c| c.area), Some("resolve"));
        assert_eq!(info("DRIVER_TOO_OLD").map(|c| c.kind), Some(Kind::Error));
        assert_eq!(info("NOPE"), None);
    }

    #[test]
    fn the_old_paths_name_the_registered_codes() {
        // Code written against a module's own `codes` keeps compiling and means the same code.
        assert_eq!(
            crate::core::resolve::codes::DRIVER_TOO_OLD,
            resolve::DRIVER_TOO_OLD
        );
        assert_eq!(crate::core::smoke::codes::TIMEOUT, "SMOKE_TIMEOUT");
        assert_eq!(crate::core::render::codes::UNSAFE_VALUE, spec::UNSAFE_VALUE);
        assert_eq!(crate::core::lock::INVALID_LOCK, lock::INVALID_LOCK);
    }
}
