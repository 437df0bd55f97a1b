//! What a [`super::Culler`] is built from: the variant, format and output
//! kind to resolve, and the knobs that bound chunks and tiles.

use crate::outputs::OutputKind;
use crate::{InstanceFormat, ScanVariant};

/// Knobs that bound how a batch is split into chunks and tiles. `None`
/// takes the device's limit or the default. Smaller values exercise the
/// multi-binding, two-dimensional-dispatch and look-back paths at small
/// sizes (the tests do this); programs rarely need them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Largest storage binding, in bytes.
    pub max_binding_size: Option<u64>,
    /// Largest dispatch along one dimension, in workgroups.
    pub max_workgroups_per_dimension: Option<u32>,
    /// Threads per workgroup: a power of two from 32 to 256 (the default),
    /// and at least the subgroup size for the subgroup variants. A tile is
    /// four times as many instances.
    pub workgroup_size: Option<u32>,
    /// [`ScanVariant::Ordered`]: how many times a tile polls a predecessor
    /// that has published nothing before counting that tile's survivors
    /// itself (default 256; 0 always counts, which tests the fallback).
    pub lookback_spin_limit: Option<u32>,
    /// [`ScanVariant::Ordered`], for testing the fallback: tiles whose ID has
    /// any of these bits set publish nothing, so their successors must
    /// count their survivors themselves. 0 (the default) for real use.
    pub lookback_silent_tiles: u32,
    /// [`ScanVariant::Ordered`]: scan tiles in workgroup memory even where
    /// the device has subgroups (the form used without
    /// [`wgpu::Features::SUBGROUP`]), for tests and comparisons. Off by
    /// default: the subgroup form is faster.
    pub workgroup_scan: bool,
    /// [`ScanVariant::SubgroupBallot`] writing instance copies wider than
    /// 16 bytes ([`OutputKind::Instances`] of 32 B and 64 B instances): a
    /// subgroup writes each row in which at least half its lanes keep their
    /// instance together, every store covering consecutive 16-byte parts,
    /// instead of each lane storing its own instance in parts that leave
    /// every store half (32 B) or a quarter (64 B) of each sector. `None`
    /// (the default): on for 64 B instances, off for 32 B ones. On an H200
    /// it takes much of the time off fully visible batches and changes
    /// little at 5-50% visible for 64 B instances; for 32 B instances it
    /// costs a few percent at 5-50% visible, where its path is rarely taken
    /// (`docs/benchmarks.md#fully-visible-batches-rows-written-together`).
    /// Batches that are mostly visible (a shadow view that covers the whole
    /// scene) may turn it on for 32 B instances.
    pub row_writes: Option<bool>,
    /// Culls of plain views ([`KernelSpec::plain_views`](super::KernelSpec::plain_views): five planes and no
    /// size band, as Bevy's perspective cameras, spot lights, point-light
    /// faces and directional cascades have) take a kernel with the sixth
    /// plane and the band compiled out, where the general kernel branches
    /// on them per view for every instance. `None` (the default): on,
    /// except for [`ScanVariant::BlockAtomic`] kernels of two to four views
    /// (one scan batch), which measured slower in that form on an H100
    /// (`docs/benchmarks.md#several-views-in-one-pass`). `Some(true)` or
    /// `Some(false)`: always or never.
    pub plain_views: Option<bool>,
    /// [`ScanVariant::SubgroupBallot`] and [`ScanVariant::SubgroupShuffle`]
    /// writing indices ([`OutputKind::Indices`]): each lane stages the indices it keeps in
    /// workgroup memory, and the workgroup writes each view's survivors out
    /// in whole rows, two views at a time: the same slots, and on an NVIDIA
    /// H200 (centred meshes, plain views) a fifth less time for six to eight
    /// views of 32 B instances and 7-12% less for four levels of detail
    /// (`docs/benchmarks.md#several-views-in-one-pass`).
    /// `None` (the default): on. `Some(false)`: each lane stores its own
    /// survivors.
    pub staged_indices: Option<bool>,
}

/// Default threads per workgroup.
pub const DEFAULT_WORKGROUP_SIZE: u32 = 256;
/// Default polls of a silent predecessor before the ordered variant's fallback.
pub const DEFAULT_LOOKBACK_SPIN_LIMIT: u32 = 256;

/// How to build a [`Culler`](super::Culler).
#[derive(Clone, Debug)]
pub struct CullerDesc {
    /// The scan variant; `None` picks the best one the device runs.
    pub variant: Option<ScanVariant>,
    /// Replace an unavailable variant by the best available (logged) instead
    /// of failing.
    pub allow_fallback: bool,
    /// Layout of the instances.
    pub format: InstanceFormat,
    /// What the compaction writes.
    pub output: OutputKind,
    /// Record GPU timestamps per pass when the device has `TIMESTAMP_QUERY`.
    pub timestamps: bool,
    /// Most views of one target ([`crate::CullTarget::with_views`]) and so of one
    /// cull ([`super::CullRequest`]), from 1 (the default) to [`crate::MAX_VIEWS`].
    /// Each target's kernel is compiled for its own view count.
    pub max_views: u32,
    /// Chunk and tile sizes.
    pub tuning: Tuning,
}

impl Default for CullerDesc {
    fn default() -> Self {
        Self {
            variant: None,
            allow_fallback: true,
            format: InstanceFormat::default(),
            output: OutputKind::default(),
            timestamps: true,
            max_views: 1,
            tuning: Tuning::default(),
        }
    }
}
