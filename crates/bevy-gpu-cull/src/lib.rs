//! GPU frustum culling for Bevy 0.19: batches of instances of one mesh, culled
//! per camera on the GPU by [`cull_core`] and drawn with one indirect
//! instanced draw per batch and view.
//!
//! ```no_run
//! use bevy::prelude::*;
//! use bevy_gpu_cull::prelude::*;
//!
//! fn main() {
//!     App::new()
//!         .add_plugins((DefaultPlugins, GpuCullPlugin::default()))
//!         .add_systems(Startup, setup)
//!         .run();
//! }
//!
//! fn setup(mut commands: Commands, mut meshes: ResMut<Assets<Mesh>>) {
//!     let instances = (0..10_000)
//!         .map(|i| GpuCullInstance::new(Vec3::new((i % 100) as f32, 0.0, -((i / 100) as f32)), LinearRgba::WHITE))
//!         .collect();
//!     commands.spawn((Mesh3d(meshes.add(Sphere::new(0.4))), GpuCullInstances::new(instances)));
//!     commands.spawn((Camera3d::default(), Transform::from_xyz(50.0, 10.0, 20.0)));
//!     commands.spawn(DirectionalLight::default());
//! }
//! ```
//!
//! Each (camera, batch) is drawn in the camera's opaque pass (first, before
//! Bevy's meshes, or for a deferred camera as an item of Bevy's `Opaque3d`
//! phase) and depth-tested against Bevy's meshes, with the pipeline key (MSAA, HDR,
//! tonemapping) Bevy computes for the view; a batch with a blended
//! material goes into Bevy's `Transparent3d` phase instead, its survivors
//! sorted back to front on the GPU for each camera. Lists are edited through
//! [`GpuCullInstances`]'s methods, which record what changed so that only
//! that is uploaded; [`GpuCullStats`] reports visible counts and GPU times.
//! The draw shader's instance fetch is a shader library,
//! `bevy_gpu_cull::instance`, for custom draw shaders. A batch with
//! [`GpuCullComputeWrites`] is written by compute passes of yours, in
//! [`GpuCullSystems::WriteInstances`], through the shader library
//! `bevy_gpu_cull::gpu_writes` and [`GpuCullInstanceBuffers`]; the `boids`
//! and `grass` examples show how.
//!
//! # Cargo features
//!
//! One per scan variant of `cull-core`, all on by default and forwarded to it:
//! `hillis-steele`, `block-atomic`, `subgroup-ballot`, `subgroup-shuffle`,
//! `ordered`, `ordered-two-pass`. [`GpuCullSettings::variant`] `None` picks
//! the fastest one the adapter runs; changing the resource takes effect on
//! the next frame. For survivors drawn in their input order, the plugin
//! (which writes indices, and culls a light's views together) is best served
//! by `GpuCullScanVariant::OrderedTwoPass`.
//!
//! `picking` (on by default): [`GpuCullPickingPlugin`], a `bevy_picking`
//! backend for the instances of batches, and [`GpuCullRayCast`]; it turns
//! on Bevy's `bevy_picking` and `mesh_picking` features.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Bevy systems take many parameters of long types by nature.
#![allow(clippy::type_complexity, clippy::too_many_arguments)]

mod capture;
mod components;
mod gpu_instances;
mod lod;
#[cfg(feature = "picking")]
mod picking;
mod plugin;
mod render;
mod settings;
mod stats;

pub use capture::GpuCullCaptureScene;
pub use components::{
    GpuCullBounds, GpuCullCells, GpuCullFrustumOverride, GpuCullInstance, GpuCullInstances, GpuCullOcclusion,
};
/// The culling library the plugin runs on, for CPU references of what it
/// keeps (`cull_core::Frustum`, `cull_core::LocalFrame`, `cull_core::cpu`),
/// named through it so that nothing clashes with Bevy's own `Frustum`.
pub use cull_core;
pub use lod::{GpuCullLod, GpuCullLodLevel};
/// How instances are stored for culling ([`GpuCullSettings::format`]):
/// cull-core's `InstanceFormat`, under the plugin's prefix.
pub type GpuCullInstanceFormat = cull_core::InstanceFormat;
/// The scan that turns votes into output slots ([`GpuCullSettings::variant`]):
/// cull-core's `ScanVariant`, under the plugin's prefix.
pub type GpuCullScanVariant = cull_core::ScanVariant;
/// Which specialized kernel of a variant is ready ([`GpuCullStats::kernels`]):
/// cull-core's `KernelSpec`, under the plugin's prefix.
pub type GpuCullKernelSpec = cull_core::KernelSpec;
pub use gpu_instances::{GpuCullComputeWrites, GpuCullMotionVectors};
#[cfg(feature = "picking")]
pub use picking::{GpuCullHit, GpuCullPickingPlugin, GpuCullRayCast, GpuCullRayHit, GpuCullRayView};
pub use plugin::GpuCullPlugin;
pub use render::gpu_writes::{GpuCullInstanceBuffer, GpuCullInstanceBuffers};
pub use render::opaque_first::GpuCullOpaqueBatches;
pub use settings::{GpuCullSettings, GpuCullSystems};
pub use stats::{GpuCullCellStats, GpuCullShadowView, GpuCullStats};

/// The plugin, its settings and the batch component.
pub mod prelude {
    pub use crate::{
        GpuCullBounds, GpuCullCaptureScene, GpuCullCells, GpuCullComputeWrites, GpuCullFrustumOverride,
        GpuCullInstance, GpuCullInstanceBuffers, GpuCullInstanceFormat, GpuCullInstances, GpuCullLod,
        GpuCullLodLevel, GpuCullMotionVectors, GpuCullOcclusion, GpuCullPlugin, GpuCullScanVariant,
        GpuCullSettings, GpuCullShadowView, GpuCullStats, GpuCullSystems,
    };
}

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
