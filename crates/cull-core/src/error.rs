//! The crate's error type.

use crate::{InstanceFormat, ScanVariant};

/// Everything that can go wrong when setting up or running a cull. New
/// kinds of error may be added in minor releases: match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CullError {
    /// More instances were asked for than a buffer holds.
    #[error("{count} instances exceed the capacity of {capacity}")]
    CountExceedsCapacity {
        /// Instances asked for.
        count: u64,
        /// Instances the buffer holds.
        capacity: u64,
    },
    /// A buffer or batch of capacity zero was requested.
    #[error("capacity must be at least one instance")]
    ZeroCapacity,
    /// A user-provided buffer's size does not fit the format.
    #[error("a buffer of {size} bytes is not a whole number of {stride}-byte elements")]
    BufferSize {
        /// The buffer's size.
        size: u64,
        /// The element size expected.
        stride: u64,
    },
    /// A user-provided buffer lacks a usage the culler needs.
    #[error("the buffer lacks the usages {0:?}")]
    BufferUsage(wgpu::BufferUsages),
    /// Instance data written with a length that is not whole instances, or past the end.
    #[error(
        "writing {len} bytes at instance {offset}: not whole {stride}-byte instances within capacity {capacity}"
    )]
    WriteOutOfRange {
        /// First instance written.
        offset: u64,
        /// Bytes written.
        len: u64,
        /// Bytes per instance.
        stride: u64,
        /// Instances the buffer holds.
        capacity: u64,
    },
    /// The input's format differs from the culler's.
    #[error("the input holds {input:?} instances but the culler was built for {culler:?}")]
    FormatMismatch {
        /// The input's format.
        input: InstanceFormat,
        /// The culler's format.
        culler: InstanceFormat,
    },
    /// A target made by another culler was passed.
    #[error("this target was created by a different culler")]
    ForeignTarget,
    /// The variant was compiled out.
    #[error("scan variant {variant:?} is not compiled in: enable the cargo feature `{feature}`")]
    VariantNotCompiled {
        /// The variant asked for.
        variant: ScanVariant,
        /// The cargo feature that compiles it in.
        feature: &'static str,
    },
    /// The device lacks a feature the variant needs, and fallback was not allowed.
    #[error("scan variant {variant:?} needs {missing:?}, which this device lacks")]
    MissingFeature {
        /// The variant asked for.
        variant: ScanVariant,
        /// The missing features.
        missing: wgpu::Features,
    },
    /// No compiled-in variant runs on this device.
    #[error("no compiled-in scan variant runs on this device")]
    NoVariantAvailable,
    /// The batch needs more output bindings than a shader stage can hold.
    #[error(
        "a batch of {capacity} instances needs {windows} output bindings of {window_len} elements; at most {max} are supported"
    )]
    BatchTooLarge {
        /// Instances asked for.
        capacity: u64,
        /// Bindings it would need.
        windows: u64,
        /// Elements per binding.
        window_len: u64,
        /// Bindings supported.
        max: u64,
    },
    /// The projection matrix gives no usable frustum.
    #[error("degenerate frustum: {0}")]
    DegenerateFrustum(&'static str),
    /// A `clip_from_world` matrix alone cannot tell its near plane from its
    /// far plane: an orthographic one (a mirrored view and a reverse-Z one
    /// look alike), or one whose `w` gradient does not line up with its depth
    /// planes (rounding noise, a strongly oblique near plane). So
    /// `max_distance` cannot be placed; `Frustum::from_view` can.
    #[error(
        "max_distance with this clip_from_world is ambiguous (orthographic: mirrored or reverse-Z?): use Frustum::from_view"
    )]
    AmbiguousDepth,
    /// The mesh's local bounding sphere cannot bound anything: its center is
    /// not finite, or its radius is negative or not finite.
    #[error(
        "invalid local bounds: center {center:?}, radius {radius} (need a finite center and a finite radius >= 0)"
    )]
    InvalidBounds {
        /// The center given.
        center: [f32; 3],
        /// The radius given.
        radius: f32,
    },
    /// The instance format carries no scale and an instance has a finite
    /// scale other than 1: culling it unscaled could lose it while visible.
    #[error(
        "instance {index} has scale {scale}, but {format:?} carries no scale: fold the scale into the bounds (Sphere::covering_scales) and write scale 1"
    )]
    ScaleNotCarried {
        /// The format.
        format: InstanceFormat,
        /// Index of the instance in the slice written.
        index: usize,
        /// Its scale.
        scale: f32,
    },
    /// A pass would bind more storage buffers than the device allows per
    /// shader stage (a batch past one binding adds output windows).
    #[error("pass {pass} needs {needed} storage buffers; the device binds at most {limit} per stage")]
    TooManyStorageBuffers {
        /// The pass.
        pass: String,
        /// Storage buffers it binds.
        needed: u32,
        /// `max_storage_buffers_per_shader_stage`.
        limit: u32,
    },
    /// A culler made with [`crate::Culler::deferred`] has not been given
    /// the pipelines for this many output windows yet
    /// ([`crate::Culler::provide_pipelines`]).
    #[error("the pipelines for {windows} output window(s) and {views} view(s) are not compiled yet")]
    PipelinesNotReady {
        /// Output windows of the target.
        windows: u32,
        /// Views of the target.
        views: u32,
    },
    /// Pipelines handed to [`crate::Culler::provide_pipelines`] do not match
    /// the recipe's passes.
    #[error("expected {expected} pipelines (one per pass of the recipe), got {got}")]
    PipelineCount {
        /// Passes of the recipe.
        expected: usize,
        /// Pipelines given.
        got: usize,
    },
    /// A cull named no view, or more views than the target (or its
    /// culler's `max_views`) holds; or a view past the target's was read.
    #[error("{views} views asked of a target or culler that holds 1 to {max}")]
    ViewCount {
        /// Views asked for (a view index read, plus one).
        views: usize,
        /// Views the target or culler holds.
        max: u32,
    },
    /// A parameter is out of its range.
    #[error("invalid parameter: {0}")]
    InvalidParameter(&'static str),
    /// No GPU adapter was found.
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// The device could not be created.
    #[error("could not create the device: {0}")]
    RequestDevice(#[from] wgpu::RequestDeviceError),
    /// Timings were asked of a target created without timestamp queries.
    #[error("this target records no timestamps (the device lacks TIMESTAMP_QUERY or timing was not enabled)")]
    TimingsUnavailable,
    /// Reading a buffer back failed.
    #[error("reading back from the GPU failed: {0}")]
    Readback(String),
    /// The device's backend cannot do this.
    #[error("not supported on the {backend} backend: {what}")]
    UnsupportedBackend {
        /// The device's backend.
        backend: wgpu::Backend,
        /// What it cannot do.
        what: &'static str,
    },
}
