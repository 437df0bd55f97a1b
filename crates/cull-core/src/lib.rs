//! GPU frustum culling for wgpu: **vote → scan → compact**.
//!
//! Each instance of a batch votes visible or culled against a view frustum
//! (its bounding sphere against the frustum planes, conservatively: a sphere
//! that touches the frustum is kept), a prefix scan turns the votes into
//! output slots, and compaction writes the survivors densely and fills the
//! `instance_count` of indirect draw arguments. Nothing is read back to the
//! CPU in the frame path.
//!
//! ```no_run
//! use cull_core::prelude::*;
//! # fn main() -> Result<(), CullError> {
//! let gpu = GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty())?;
//! let culler = Culler::new(&gpu.device, &gpu.queue, &CullerDesc::default())?;
//! let input = CullInput::new(&gpu.device, culler.format(), 100_000)?;
//! let target = CullTarget::new(&gpu.device, &culler, 100_000)?;
//! let instances: Vec<Instance> = (0..100_000)
//!     .map(|i| Instance::from_position(glam::Vec3::new(i as f32, 0.0, -10.0)))
//!     .collect();
//! input.write_instances(&gpu.queue, 0, &instances)?;
//! let clip_from_world = glam::Mat4::perspective_infinite_reverse_rh(1.0, 16.0 / 9.0, 0.1);
//! let camera = Frustum::from_clip_from_world(clip_from_world, None)?;
//! let bounds = Sphere::new(glam::Vec3::ZERO, 0.5);
//! let request = CullRequest::new(&input, &target, std::slice::from_ref(&camera), bounds, 100_000);
//! let mut encoder = gpu.device.create_command_encoder(&Default::default());
//! culler.cull(&mut encoder, &gpu.queue, request)?;
//! // Then, in a render pass whose pipeline takes the survivors as
//! // per-instance vertices (`culler.format().vertex_layout(..)`) and an
//! // index buffer whose arguments `target.set_indexed_draw` set:
//! // target.bind_view_instances(&mut pass, 1, 0);
//! // target.draw_view_indexed(&mut pass, 0);
//! gpu.queue.submit([encoder.finish()]);
//! # Ok(()) }
//! ```
//!
//! # Scan variants and cargo features
//!
//! Every variant is a cargo feature, all enabled by default; a variant whose
//! feature is off is compiled out and [`Culler::new`] refuses it with
//! [`CullError::VariantNotCompiled`].
//!
//! | feature | [`ScanVariant`] | passes | needs |
//! |---|---|---|---|
//! | `hillis-steele` | [`ScanVariant::HillisSteele`] | vote, log2 N scan steps, compact | — |
//! | `block-atomic` | [`ScanVariant::BlockAtomic`] | one | — |
//! | `subgroup-ballot` | [`ScanVariant::SubgroupBallot`] | one | `Features::SUBGROUP` |
//! | `subgroup-shuffle` | [`ScanVariant::SubgroupShuffle`] | one | `Features::SUBGROUP` |
//! | `ordered` | [`ScanVariant::Ordered`] | one, order preserved | — (uses subgroups where present) |
//! | `ordered-two-pass` | [`ScanVariant::OrderedTwoPass`] | vote, gather; order preserved | — (uses subgroups where present) |
//!
//! [`CullerDesc::variant`] `None` (the default) picks the fastest compiled-in
//! variant the device runs ([`ScanVariant::best_available`]). Asking for a
//! subgroup variant on a device without subgroups falls back with a logged
//! warning, or fails with [`CullError::MissingFeature`] when
//! [`CullerDesc::allow_fallback`] is false. The subgroup variants are
//! correct for any subgroup size from 4 to 128. Only `HillisSteele`,
//! `Ordered` and `OrderedTwoPass` keep the survivors in their original order.
//!
//! # Instance formats
//!
//! [`InstanceFormat::Matrix`] (64 B), [`InstanceFormat::PosQuat`] (32 B) and
//! [`InstanceFormat::Packed16`] (16 B, smallest-three quaternion, unit scale).
//! Instances whose position, scale or rotation is NaN or infinite are culled.
//!
//! # Sizes
//!
//! Any count from 0 to the capacity; more than the capacity is
//! [`CullError::CountExceedsCapacity`]. Dispatches beyond the per-dimension
//! workgroup limit wrap into a second dimension, and a batch larger than
//! the largest storage binding is culled in chunks, its output bound as up to
//! [`MAX_OUTPUT_WINDOWS`] bindings.
//!
//! # Other cargo features
//!
//! | feature | default | what |
//! |---|---|---|
//! | `parallel` | on | the CPU reference ([`cpu`]) and random scenes (`scene`) run on all cores (rayon); off, on the calling thread |
//! | `blocking` | on | `GpuContext`, which opens an adapter and a device by blocking on wgpu's futures (pollster) |
//! | `bevy_reflect` | off | `bevy_reflect::Reflect` on `ScanVariant` and `InstanceFormat`, for the settings of a Bevy app (the Bevy plugin turns it on) |
//! | `scenes` | off | `scene`: random test scenes (cameras, instances, a small generator) for tests, benchmarks and examples |
//!
//! The GPU path uses neither `parallel` nor `blocking`: a renderer that only
//! culls turns both off (`default-features = false` and the variants it
//! wants), as the Bevy plugin does.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(
    feature = "hillis-steele",
    feature = "block-atomic",
    feature = "subgroup-ballot",
    feature = "subgroup-shuffle",
    feature = "ordered",
    feature = "ordered-two-pass"
)))]
compile_error!(
    "cull-core needs at least one scan-variant feature: hillis-steele, block-atomic, subgroup-ballot, \
     subgroup-shuffle, ordered or ordered-two-pass (all are on by default)"
);

// Layers, bottom up (each imports only those below it; docs/architecture.md
// has the map): error, sphere, cone, frustum, timing, readback, kernel
// (descriptors) and the stage registries formats, outputs, visibility;
// buffers; cells (the cell spheres and kept cells a cull by cells binds);
// passes; variants; shader (composition); occlusion (the pyramid and history
// the occlusion phases bind); culler. instance and variant are the
// public faces of formats and variants; cpu and scene are the CPU side.
//
// Every public type has one path: the crate root, except the three
// modules that are namespaces of their own: `cpu` (the CPU reference),
// `shader` (what a renderer that compiles the kernels itself needs) and,
// with the `scenes` feature, `scene` (random test scenes).
mod bind_cache;
mod buffers;
mod cells;
mod cone;
#[cfg(feature = "blocking")]
mod context;
pub mod cpu;
mod culler;
mod error;
mod formats;
mod frame;
mod frustum;
mod instance;
mod kernel;
mod list_stage;
mod occlusion;
mod outputs;
mod passes;
mod readback;
#[cfg(any(test, feature = "scenes"))]
#[cfg_attr(docsrs, doc(cfg(feature = "scenes")))]
pub mod scene;
mod selection;
pub mod shader;
mod shadow_reach;
mod sort;
mod sphere;
mod splat;
mod timing;
mod variant;
mod variants;
mod visibility;

pub use buffers::{CullInput, CullTarget, DRAW_ARGS_SIZE};
pub use cells::{
    CELL_BOUNDS_BYTES, CELL_TOLERANCE, CELLS_MIN_SKIPPED_BYTES, CellBounds, CellIndex, CellLayout, CellPick,
    LISTED_CELLS_MIN_SKIPPED_BYTES,
};
pub use cone::SpotCone;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub use context::{GpuContext, USEFUL_FEATURES};
pub use culler::{
    CullOutcome, CullRequest, Culler, CullerDesc, DEFAULT_LOOKBACK_SPIN_LIMIT, DEFAULT_WORKGROUP_SIZE,
    KernelSpec, OutputKind, Tuning,
};
pub use error::CullError;
pub use frame::LocalFrame;
pub use frustum::{Frustum, SIZE_BAND_TOLERANCE, SizeBand, SizeMetric, widen_plane};
pub use instance::{
    Instance, InstanceFormat, PACKED_ROTATION_ERROR_BOUND, PackedInstance, PosQuatInstance, pack_quat,
    unpack_quat,
};
pub use kernel::{INSTANCE_COUNT_OFFSET, MAX_OUTPUT_WINDOWS, MAX_VIEWS};
pub use occlusion::{
    CpuPyramid, DepthOrder, DepthPyramid, OCCLUSION_DEPTH_TOLERANCE, OCCLUSION_PIXEL_MARGIN, OcclusionCamera,
    OcclusionHistory, PYRAMID_SHADER, PyramidBuilder, pyramid_level_size, pyramid_levels,
};
pub use readback::{AsyncReadback, read_back};
pub use shadow_reach::ShadowReceivers;
pub use sort::{DepthSortDesc, DepthSortScratch, DepthSortView, DepthSorter, depth_sort_key};
pub use sphere::{PLANE_TOLERANCE, Sphere, SphereClass, WorldSphere, widen_radius};
pub use splat::{PixelSplatDesc, PixelSplatSource, PixelSplatTarget, PixelSplatView, PixelSplatter};
pub use timing::{CullTimings, PassKind};
pub use variant::ScanVariant;
pub use visibility::VisibilityTest;

/// The types most programs need.
pub mod prelude {
    #[cfg(feature = "blocking")]
    pub use crate::GpuContext;
    pub use crate::{
        CellBounds, CellIndex, CellLayout, CullError, CullInput, CullRequest, CullTarget, CullTimings,
        Culler, CullerDesc, Frustum, Instance, InstanceFormat, OutputKind, ScanVariant, Sphere,
    };
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
