//! The scan variants and how one is chosen. Each variant is a module of
//! the crate's `variants/`; this module is their public path.

pub use crate::variants::ScanVariant;
