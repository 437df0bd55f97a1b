//! The [`Culler`]: the top layer. It resolves a variant, format and output
//! kind against the device, holds the compiled kernels (compiled here, or
//! handed in by a renderer that compiles them itself), makes targets, and
//! records a [`CullRequest`] into a command encoder.
//!
//! Modules by stage: `desc` (what a culler is built from), `setup`
//! (resolving it against the device), `spec` ([`KernelSpec`]: which kernel),
//! `kernels` (the kernel cache), `allocate` (targets and cell indices sized for it),
//! `request` (what one cull asks for, checked), `encode` (uniforms,
//! clears and dispatches), `shared` (what the culls of one `cull_all`
//! share: a pass and an upload).

mod allocate;
mod desc;
mod encode;
mod kernels;
mod request;
mod setup;
mod shared;
mod spec;

pub use crate::outputs::OutputKind;
pub use desc::{CullerDesc, DEFAULT_LOOKBACK_SPIN_LIMIT, DEFAULT_WORKGROUP_SIZE, Tuning};
pub use request::{CullOutcome, CullRequest};
pub use setup::Culler;
pub use spec::KernelSpec;
