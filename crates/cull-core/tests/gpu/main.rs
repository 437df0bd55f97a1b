//! GPU tests: every compiled-in variant against the CPU reference on the
//! adapter wgpu finds (lavapipe on machines without a GPU).
//!
//! There is no silent skip: without an adapter every test fails and says
//! what to install.

mod bad_input;
mod cells;
mod cull_all;
mod deferred;
mod draw;
mod encode;
mod exact_sets;
mod fallback;
mod harness;
mod large;
mod lod;
mod multi_view;
mod occlusion;
#[cfg(feature = "ordered")]
mod ordered;
#[cfg(feature = "ordered-two-pass")]
mod ordered_two_pass;
mod properties;
mod readback;
mod shadow_reach;
mod sort;
mod splat;
mod spot_cone;
mod subgroups;
mod timing;
mod webgpu_limits;
