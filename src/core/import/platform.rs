//! What an exported environment says about the machine it came from: the operating system
//! (from `prefix:` and packages that exist only there), and the packages that describe that
//! machine or come with torch, which the spec does not carry over.
//! This module performs no I/O.

/// The operating system an environment file was exported on, when it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Os {
    Windows,
    MacOs,
}

impl Os {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Os::Windows => "Windows",
            Os::MacOs => "macOS",
        }
    }
}

/// The OS a `prefix:` path belongs to: `C:\...` is Windows, `/Users/...` or Homebrew's
/// `/opt/homebrew` is macOS.
pub(super) fn prefix_os(prefix: &str) -> Option<Os> {
    let b = prefix.as_bytes();
    if b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/') {
        Some(Os::Windows)
    } else if prefix.starts_with("/Users/") || prefix.starts_with("/opt/homebrew") {
        Some(Os::MacOs)
    } else {
        None
    }
}

/// The OS a package exists only on (conda or pip name), if it is one of those.
pub(super) fn package_os(name: &str) -> Option<Os> {
    const WINDOWS: &[&str] = &[
        "pywin32",
        "pywin32-ctypes",
        "pywinpty",
        "winpty",
        "vc",
        "vc14_runtime",
        "vs2015_runtime",
        "ucrt",
        "win_inet_pton",
        "wincertstore",
        "libwinpthread",
        "pyreadline3",
    ];
    const MACOS: &[&str] = &["libcxx", "libcxxabi", "appnope", "tapi", "cctools", "ld64"];
    if WINDOWS.contains(&name) || name.starts_with("m2w64-") || name.starts_with("msys2-") {
        Some(Os::Windows)
    } else if MACOS.contains(&name)
        || name.starts_with("pyobjc-")
        || name.ends_with("_osx-64")
        || name.ends_with("_osx-arm64")
    {
        Some(Os::MacOs)
    } else {
        None
    }
}

/// Why a package from an export is not carried over, when it is one that only describes the
/// source machine's conda installation or is installed with torch for the locked CUDA.
pub(super) fn not_carried(name: &str) -> Option<&'static str> {
    const TOOLCHAIN: &[&str] = &[
        "libgcc",
        "libgcc-ng",
        "libstdcxx",
        "libstdcxx-ng",
        "libgomp",
        "libgfortran",
        "libgfortran-ng",
        "libgfortran5",
    ];
    const TORCH_STACK: &[&str] = &[
        "pytorch-mutex",
        "torchtriton",
        "triton",
        "cudnn",
        "nccl",
        "magma",
        "magma-cuda",
    ];
    if name.starts_with('_') {
        return Some("a conda mutex that records how the source environment was built");
    }
    if name.starts_with("ld_impl_")
        || name.starts_with("sysroot_")
        || name.starts_with("kernel-headers_")
        || TOOLCHAIN.contains(&name)
    {
        return Some(
            "the C runtime of the source machine's conda; the image's conda brings its own",
        );
    }
    // NVIDIA's CUDA libraries: conda's `cuda-*`/`libcu*` and pip's `nvidia-*-cu12` (but not
    // `cuda-python` or `nvidia-ml-py`, which users install for themselves).
    let cuda_lib =
        (name.starts_with("cuda-") && !name.starts_with("cuda-python") && name != "cuda-version")
            || ["libcu", "libnpp", "libnvjpeg", "libnvjitlink"]
                .iter()
                .any(|p| name.starts_with(p))
            || (name.starts_with("nvidia-")
                && ["-cu11", "-cu12", "-cu13"]
                    .iter()
                    .any(|s| name.ends_with(s)));
    if TORCH_STACK.contains(&name) || cuda_lib {
        return Some("installed with torch for the locked CUDA; pinning the source machine's copy could contradict it");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_machine_shows_in_prefix_and_packages() {
        assert_eq!(
            prefix_os(r"C:\Users\me\anaconda3\envs\x"),
            Some(Os::Windows)
        );
        assert_eq!(prefix_os("/Users/me/miniconda3/envs/x"), Some(Os::MacOs));
        assert_eq!(prefix_os("/home/me/miniconda3/envs/x"), None);
        assert_eq!(package_os("m2w64-gcc-libs"), Some(Os::Windows));
        assert_eq!(package_os("vc14_runtime"), Some(Os::Windows));
        assert_eq!(package_os("libcxx"), Some(Os::MacOs));
        assert_eq!(package_os("clang_osx-arm64"), Some(Os::MacOs));
        assert_eq!(package_os("numpy"), None);
    }

    #[test]
    fn machine_and_torch_stack_packages_are_not_carried() {
        for n in [
            "_libgcc_mutex",
            "_openmp_mutex",
            "ld_impl_linux-64",
            "libgcc-ng",
            "pytorch-mutex",
            "cuda-cudart",
            "libcublas",
            "nvidia-cudnn-cu12",
            "triton",
        ] {
            assert!(not_carried(n).is_some(), "{n}");
        }
        for n in [
            "numpy",
            "openssl",
            "cudf",
            "libpng",
            "cuda-python",
            "nvidia-ml-py",
        ] {
            assert!(not_carried(n).is_none(), "{n}");
        }
    }
}
