//! The codes the use cases own, re-exported from the one registry of every diagnostic code
//! ([`crate::core::codes`], where they are declared). No I/O.

pub use crate::core::codes::app::*;
