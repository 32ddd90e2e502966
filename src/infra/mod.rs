//! Effects at the edge: files (bounded reads, atomic writes), child processes, host probes
//! (NVML, nvidia-smi, /proc), the Docker engine (and registries through it), registry
//! credentials and the smoke-verdict cache. Everything that
//! touches the world lives here, below the use cases in `app` and above nothing but `core`.

pub mod built_images;
pub mod conda_solve;
pub mod docker;
pub mod fs;
pub mod host;
pub mod journal;
pub mod network;
pub mod proc;
pub mod python;
pub mod registry_auth;
pub mod registry_http;
pub mod scratch;
pub mod signals;
pub mod uv_resolve;
pub mod verdict_cache;
