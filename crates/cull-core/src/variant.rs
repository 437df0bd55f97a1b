//! The scan variants and how one is chosen.

use crate::CullError;

/// How votes become output slots. Each variant is compiled in by the cargo
/// feature of the same name (kebab-case) and chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
}

impl ScanVariant {
    /// Every variant, compiled in or not, fastest first (the order
    /// [`Self::best_available`] prefers; see `docs/benchmarks.md`).
    pub const ALL: [ScanVariant; 5] = [
        Self::SubgroupBallot,
        Self::SubgroupShuffle,
        Self::BlockAtomic,
        Self::Ordered,
        Self::HillisSteele,
    ];

    /// The cargo feature that compiles this variant in.
    pub const fn feature(self) -> &'static str {
        match self {
            Self::HillisSteele => "hillis-steele",
            Self::BlockAtomic => "block-atomic",
            Self::SubgroupBallot => "subgroup-ballot",
            Self::SubgroupShuffle => "subgroup-shuffle",
            Self::Ordered => "ordered",
        }
    }

    /// A short name, the same as [`Self::feature`].
    pub const fn name(self) -> &'static str {
        self.feature()
    }

    /// Parses [`Self::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Whether this variant's cargo feature is enabled.
    pub const fn is_compiled(self) -> bool {
        match self {
            Self::HillisSteele => cfg!(feature = "hillis-steele"),
            Self::BlockAtomic => cfg!(feature = "block-atomic"),
            Self::SubgroupBallot => cfg!(feature = "subgroup-ballot"),
            Self::SubgroupShuffle => cfg!(feature = "subgroup-shuffle"),
            Self::Ordered => cfg!(feature = "ordered"),
        }
    }

    /// The variants compiled into this build, fastest first.
    pub fn compiled() -> impl Iterator<Item = ScanVariant> {
        Self::ALL.into_iter().filter(|v| v.is_compiled())
    }

    /// Device features this variant needs.
    pub const fn required_features(self) -> wgpu::Features {
        match self {
            Self::SubgroupBallot | Self::SubgroupShuffle => wgpu::Features::SUBGROUP,
            Self::HillisSteele | Self::BlockAtomic | Self::Ordered => wgpu::Features::empty(),
        }
    }

    /// Whether the variant is compiled in and runs with these device features.
    pub fn is_available(self, features: wgpu::Features) -> bool {
        self.is_compiled() && features.contains(self.required_features())
    }

    /// Whether survivors keep their original order.
    pub const fn preserves_order(self) -> bool {
        matches!(self, Self::HillisSteele | Self::Ordered)
    }

    /// The fastest compiled-in variant that runs with these device features.
    pub fn best_available(features: wgpu::Features) -> Option<ScanVariant> {
        Self::compiled().find(|v| v.is_available(features))
    }

    /// Resolves a requested variant against the device: `None` picks the best
    /// available; an unavailable one is an error, or, with `allow_fallback`,
    /// replaced by the best available with a logged warning.
    pub fn resolve(
        requested: Option<ScanVariant>,
        features: wgpu::Features,
        allow_fallback: bool,
    ) -> Result<ScanVariant, CullError> {
        let Some(variant) = requested else {
            return Self::best_available(features).ok_or(CullError::NoVariantAvailable);
        };
        let error = if !variant.is_compiled() {
            CullError::VariantNotCompiled {
                variant,
                feature: variant.feature(),
            }
        } else if !features.contains(variant.required_features()) {
            CullError::MissingFeature {
                variant,
                missing: variant.required_features() - features,
            }
        } else {
            return Ok(variant);
        };
        if !allow_fallback {
            return Err(error);
        }
        let fallback = Self::best_available(features).ok_or(CullError::NoVariantAvailable)?;
        log::warn!("{error}; falling back to {fallback:?}");
        Ok(fallback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // Needs both subgroup variants, and one that runs without subgroups to fall back to.
    #[cfg(all(
        feature = "subgroup-ballot",
        feature = "subgroup-shuffle",
        any(feature = "block-atomic", feature = "ordered", feature = "hillis-steele")
    ))]
    fn subgroup_variants_need_subgroups() {
        let none = wgpu::Features::empty();
        assert!(!ScanVariant::SubgroupBallot.is_available(none));
        let err = ScanVariant::resolve(Some(ScanVariant::SubgroupBallot), none, false).unwrap_err();
        assert!(matches!(err, CullError::MissingFeature { .. }), "{err}");
        let fell_back = ScanVariant::resolve(Some(ScanVariant::SubgroupShuffle), none, true).unwrap();
        assert!(fell_back.required_features().is_empty());
        assert_eq!(
            ScanVariant::resolve(None, wgpu::Features::SUBGROUP, false).unwrap(),
            ScanVariant::best_available(wgpu::Features::SUBGROUP).unwrap()
        );
    }

    #[test]
    fn names_round_trip() {
        for v in ScanVariant::ALL {
            assert_eq!(ScanVariant::from_name(v.name()), Some(v));
        }
    }
}
