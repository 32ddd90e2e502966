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

/// The installer a dependency line is for: conda and pip name the same software differently
/// (`cuda-toolkit` is conda's full toolkit but pip's metapackage of torch's CUDA libraries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Installer {
    Conda,
    Pip,
}

/// The CUDA libraries torch's own wheels require, unsuffixed, as `cuda-toolkit`'s extras name
/// them (read off the METADATA of torch 2.14.1 and 2.15.0 and of cuda-toolkit 13.2.2 on PyPI:
/// `cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]`).
const TORCH_CUDA_PIP: &[&str] = &[
    "nvidia-cublas",
    "nvidia-cuda-cccl",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime",
    "nvidia-cufft",
    "nvidia-cufile",
    "nvidia-curand",
    "nvidia-cusolver",
    "nvidia-cusparse",
    "nvidia-nvjitlink",
    "nvidia-nvtx",
];

/// Whether a pip package is one torch's wheel requires for its CUDA (so the lock installs the
/// one for the locked torch): `cuda-toolkit` (any extras), `cuda-bindings`, `cuda-pathfinder`,
/// `triton`, `pytorch-triton`, every `nvidia-*-cu11/12/13` and the unsuffixed libraries above.
/// The compiler (`nvidia-cuda-nvcc*`) is the user's: torch does not require it.
pub(super) fn torch_cuda_pip(name: &str) -> bool {
    let name = name.split('[').next().unwrap_or(name);
    if name.starts_with("nvidia-cuda-nvcc") {
        return false;
    }
    [
        "cuda-toolkit",
        "cuda-bindings",
        "cuda-pathfinder",
        "triton",
        "pytorch-triton",
    ]
    .contains(&name)
        || TORCH_CUDA_PIP.contains(&name)
        || (name.starts_with("nvidia-")
            && ["-cu11", "-cu12", "-cu13"]
                .iter()
                .any(|s| name.ends_with(s)))
}

/// Whether a conda package is one of torch's CUDA stack in an export: conda's `cuda-*` and
/// `libcu*` libraries, but not the user's tools (`cuda-toolkit`, `cuda-nvcc*`, `cuda-python`)
/// nor `cuda-version`, the CUDA selector.
fn torch_cuda_conda(name: &str) -> bool {
    let users = name == "cuda-toolkit"
        || name == "cuda-version"
        || name.starts_with("cuda-nvcc")
        || name.starts_with("cuda-python");
    (name.starts_with("cuda-") && !users)
        || ["libcu", "libnpp", "libnvjpeg", "libnvjitlink"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// Why a package from an export is not carried over, when it is one that only describes the
/// source machine's conda installation or is installed with torch for the locked CUDA.
pub(super) fn not_carried(name: &str, installer: Installer) -> Option<&'static str> {
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
    let torch_cuda = match installer {
        Installer::Pip => torch_cuda_pip(name),
        Installer::Conda => {
            TORCH_STACK.contains(&name)
                || torch_cuda_conda(name)
                || (name.starts_with("nvidia-") && torch_cuda_pip(name))
        }
    };
    if torch_cuda {
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
            assert!(not_carried(n, Installer::Conda).is_some(), "{n}");
        }
        for n in [
            "numpy",
            "openssl",
            "cudf",
            "libpng",
            "cuda-python",
            "nvidia-ml-py",
            "cuda-toolkit",
            "cuda-nvcc",
        ] {
            assert!(not_carried(n, Installer::Conda).is_none(), "{n}");
        }
    }

    #[test]
    fn torch_s_own_cuda_wheels_are_recognised_whatever_their_spelling() {
        for n in [
            "cuda-toolkit",
            "cuda-toolkit[cublas,cudart]",
            "cuda-bindings",
            "cuda-pathfinder",
            "triton",
            "pytorch-triton",
            "nvidia-cudnn-cu13",
            "nvidia-nccl-cu11",
            "nvidia-cusparselt-cu12",
            "nvidia-cublas",
            "nvidia-cuda-cccl",
            "nvidia-cuda-cupti",
            "nvidia-cuda-nvrtc",
            "nvidia-cuda-runtime",
            "nvidia-cufft",
            "nvidia-cufile",
            "nvidia-curand",
            "nvidia-cusolver",
            "nvidia-cusparse",
            "nvidia-nvjitlink",
            "nvidia-nvtx",
        ] {
            assert!(not_carried(n, Installer::Pip).is_some(), "{n}");
        }
        // The user's own: the compiler, the Python bindings, NVML.
        for n in [
            "cuda-nvcc",
            "nvidia-cuda-nvcc",
            "nvidia-cuda-nvcc-cu12",
            "cuda-python",
            "nvidia-ml-py",
            "numpy",
        ] {
            assert!(not_carried(n, Installer::Pip).is_none(), "{n}");
        }
    }
}
