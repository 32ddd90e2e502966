//! The pure core: spec, compatibility table, resolution, lock, expectations, rendering, import,
//! the smoke test's contract, doctor's judgement and the check report both share. Nothing here
//! touches a file, a process, the clock, tokio or bollard; callers pass text in and get values
//! out, so tests drive it with values.

pub mod built;
pub mod closure;
pub mod codes;
pub mod compat;
pub mod diag;
pub mod docker_config;
pub mod doctor;
pub mod expectations;
pub mod explain;
pub mod hash;
pub mod host;
pub mod image_index;
pub mod image_ref;
pub mod import;
pub mod learn;
pub mod lock;
pub mod marker;
pub mod matrix;
pub mod platform;
pub mod render;
pub mod report;
pub mod resolve;
pub mod rules;
pub mod smoke;
pub mod spec;
pub mod step_summary;
pub mod url;
pub mod verdict;
pub mod version;
