//! What an environment file's dependencies pin, as far as the spec cares: python, torch and
//! its CUDA selector, the companions, the extra packages and pip's locations, each with its
//! input line. Filled by the walk (`scan`, `conda`, `pip`), read when the spec is written
//! (`spec_text`). This module performs no I/O.

/// An extra package the spec keeps: its normalised name, the spec entry, its input line.
pub(super) struct Extra {
    pub(super) name: String,
    pub(super) entry: String,
    pub(super) line: Option<usize>,
}

/// A torch companion as the file pins it.
#[derive(Default)]
pub(super) struct Companion {
    pub(super) listed: bool,
    pub(super) pin: Option<(String, Option<usize>)>,
    /// A version range as written (`>=0.15`): the spec keeps it, the resolver chooses in it.
    pub(super) range: Option<(String, Option<usize>)>,
}

/// What the dependencies pin, as far as the spec cares.
#[derive(Default)]
pub(super) struct Found {
    /// Exact (`3.10`) or a requirement as written (`>=3.9`, `*` when the file names python bare).
    pub(super) python: Option<String>,
    pub(super) python_line: Option<usize>,
    /// conda's pytorch: exact, a requirement as written, or `*` when named bare.
    pub(super) pytorch: Option<(String, Option<usize>)>,
    /// The channel a `channel::pytorch` line names.
    pub(super) pytorch_channel: Option<String>,
    /// conda-forge's `pytorch-gpu` metapackage: its version, when pinned.
    pub(super) pytorch_gpu: Option<Option<String>>,
    pub(super) pytorch_channel_selector: Option<String>,
    /// `cpuonly`: the file asks for pytorch's CPU build.
    pub(super) cpuonly: Option<usize>,
    /// The CUDA a pytorch channel build string names (`py3.7_cuda9.0.176_cudnn7.1.2_2`).
    pub(super) build_cuda: Option<String>,
    pub(super) conda_cuda: Option<String>,
    /// The file names conda-forge's selector `cuda-version` itself (the spec keeps that key).
    pub(super) cuda_version_named: bool,
    pub(super) torch_pip: Option<(String, Option<usize>)>,
    pub(super) pip_variant: Option<String>,
    pub(super) torchvision: Companion,
    pub(super) torchaudio: Companion,
    pub(super) conda: Vec<Extra>,
    pub(super) pip: Vec<Extra>,
    /// pip's `--index-url`, `--extra-index-url` and `--find-links` locations other than
    /// PyTorch's, each with its input line.
    pub(super) index_url: Option<(String, Option<usize>)>,
    pub(super) extra_index_urls: Vec<(String, Option<usize>)>,
    pub(super) find_links: Vec<(String, Option<usize>)>,
}

impl Found {
    /// The companion `name` names, if it is one.
    pub(super) fn companion(&mut self, name: &str) -> Option<&mut Companion> {
        match name {
            "torchvision" => Some(&mut self.torchvision),
            "torchaudio" => Some(&mut self.torchaudio),
            _ => None,
        }
    }
}
