//! The scan variants, by name: the enum users choose from. Each variant's
//! code is a module of the crate's `variants/`, whose registry gives this
//! enum its methods (feature, device needs, resolution); this module is
//! the bottom layer the errors and descriptors can name it from.

/// How votes become output slots. Each variant is compiled in by the cargo
/// feature of the same name (kebab-case) and chosen at run time.
///
/// ```no_run
/// use cull_core::prelude::*;
/// # fn main() -> Result<(), CullError> {
/// let gpu = GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty())?;
/// // Survivors in their input order, every frame (a flag or a config names it).
/// let variant = ScanVariant::from_name("ordered").expect("a variant's name");
/// let desc = CullerDesc { variant: Some(variant), ..CullerDesc::default() };
/// let culler = Culler::new(&gpu.device, &gpu.queue, &desc)?;
/// assert_eq!(culler.variant(), ScanVariant::Ordered);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "bevy_reflect", derive(bevy_reflect::Reflect))]
#[cfg_attr(feature = "bevy_reflect", reflect(Debug, PartialEq, Hash, Clone))]
pub enum ScanVariant {
    /// Vote to a buffer, the naive multi-pass global scan (one dispatch per
    /// step, log2 N steps), then compact. Order preserved. The baseline.
    HillisSteele,
    /// One pass: workgroup scan in shared memory, one global `atomicAdd` per
    /// workgroup to reserve its output range, compaction in the same pass.
    /// Order not preserved.
    BlockAtomic,
    /// One pass like [`Self::BlockAtomic`], with votes as one bit each in a
    /// subgroup ballot. Needs [`wgpu::Features::SUBGROUP`]. Order not preserved.
    SubgroupBallot,
    /// One pass like [`Self::BlockAtomic`], with the scan done in registers by
    /// subgroup shuffles. Needs [`wgpu::Features::SUBGROUP`]. Order not preserved.
    SubgroupShuffle,
    /// One pass with **order preserved**: tiles take IDs from an atomic
    /// counter and chain their prefixes by decoupled look-back, a tile that
    /// waits too long on a predecessor counting that predecessor's survivors
    /// itself (decoupled fallback), so no forward progress between
    /// workgroups is assumed. Survivors come out in their original order,
    /// every frame. Needs no device feature: it scans its tiles with
    /// subgroup ballots where the device has [`wgpu::Features::SUBGROUP`],
    /// in workgroup memory elsewhere (see [`crate::Tuning::workgroup_scan`]).
    Ordered,
    /// **Order preserved** in two passes, with no workgroup waiting on
    /// another: a vote pass writes one bit per instance and view and each
    /// tile's count, a gather pass writes each tile's survivors after the
    /// earlier tiles' counts. Several views (and levels of detail) read the
    /// instances once, where [`Self::Ordered`] reads them once per view.
    /// An instance copy is read again by the gather; an index is not.
    /// Needs no device feature (subgroup ballots where present).
    OrderedTwoPass,
}
