//! The scan variants: one module each, beside its WGSL entry module in
//! `shaders/cull/variants/`, each behind its cargo feature, and registered
//! in [`REGISTRY`], the one place that maps a [`ScanVariant`] to code.
//! The single-pass variants share their encoding ([`fused`]).

#[cfg(any(
    feature = "block-atomic",
    feature = "subgroup-ballot",
    feature = "subgroup-shuffle",
    feature = "ordered"
))]
mod fused;

#[cfg(feature = "block-atomic")]
mod block_atomic;
#[cfg(feature = "hillis-steele")]
mod hillis_steele;
#[cfg(feature = "ordered")]
mod ordered;
#[cfg(feature = "ordered-two-pass")]
mod ordered_two_pass;
#[cfg(feature = "subgroup-ballot")]
mod subgroup_ballot;
#[cfg(feature = "subgroup-shuffle")]
mod subgroup_shuffle;

use crate::kernel::{PassLayout, ScratchBuffer, ShaderDefValue, ShaderModule, shader_module};
use crate::passes::{CompiledPass, EncodeContext, SharedDispatch};
use crate::variant::ScanVariant;
use crate::{CullError, InstanceFormat};

impl ScanVariant {
    /// Every variant, compiled in or not, fastest first (the order
    /// [`Self::best_available`] prefers; see `docs/benchmarks.md`).
    pub const ALL: [ScanVariant; 6] = [
        Self::SubgroupBallot,
        Self::SubgroupShuffle,
        Self::BlockAtomic,
        Self::Ordered,
        Self::OrderedTwoPass,
        Self::HillisSteele,
    ];

    /// This variant's registration (`variants::REGISTRY`).
    pub(crate) const fn registration(self) -> &'static Registration {
        let mut i = 0;
        while i < REGISTRY.len() {
            if REGISTRY[i].variant as u8 == self as u8 {
                return &REGISTRY[i];
            }
            i += 1;
        }
        panic!("every variant is registered in variants::REGISTRY")
    }

    /// The kernel, when compiled in.
    pub(crate) fn kernel(self) -> Option<&'static dyn ScanKernel> {
        self.registration().kernel
    }

    /// The cargo feature that compiles this variant in.
    pub const fn feature(self) -> &'static str {
        self.registration().feature
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
        self.registration().kernel.is_some()
    }

    /// The variants compiled into this build, fastest first.
    pub fn compiled() -> impl Iterator<Item = ScanVariant> {
        Self::ALL.into_iter().filter(|v| v.is_compiled())
    }

    /// Device features this variant needs.
    pub const fn required_features(self) -> wgpu::Features {
        self.registration().required_features
    }

    /// Whether the variant is compiled in and runs with these device features.
    pub fn is_available(self, features: wgpu::Features) -> bool {
        self.is_compiled() && features.contains(self.required_features())
    }

    /// Whether survivors keep their original order.
    pub const fn preserves_order(self) -> bool {
        self.registration().preserves_order
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

/// One scan variant's kernel: its WGSL, its passes, what it needs per
/// target, and how it encodes a cull.
pub(crate) trait ScanKernel: Sync {
    /// The WGSL entry module, in its subgroup form when `subgroups`.
    fn entry(&self, subgroups: bool) -> ShaderModule;

    /// Library modules of its own (beyond the shared ones in
    /// [`crate::shader::library`]), in dependency order.
    fn library(&self) -> &'static [ShaderModule] {
        &[]
    }

    /// Whether it runs its subgroup form when the device has subgroups
    /// (`available`): the subgroup variants always need them.
    fn subgroup_form(&self, available: bool) -> bool;

    /// Whether its index output can be staged in workgroup memory and
    /// written by the workgroup in whole rows (`STAGED_INDICES`,
    /// [`crate::Tuning::staged_indices`]).
    fn stages_indices(&self) -> bool {
        false
    }

    /// Whether its cull by cells can take the kept cells as a list the CPU
    /// makes ([`crate::CellLayout`]) instead of the cell pass's: the
    /// unordered single-pass kernels, whose workgroups take the listed
    /// tiles in any order. One dispatch, over the listed tiles alone.
    fn takes_listed_cells(&self) -> bool {
        false
    }

    /// Groups of item rows per thread (`ROW_GROUPS`).
    fn row_groups(&self, _format: InstanceFormat, _subgroups: bool) -> u32 {
        1
    }

    /// Shader defs of its own (`#{NAME}` in its WGSL).
    fn shader_defs(&self, _tuning: &KernelTuning, _defs: &mut Vec<(&'static str, ShaderDefValue)>) {}

    /// Its passes, for a batch bound as `windows` output windows.
    fn passes(&self, windows: u32) -> Vec<PassLayout>;

    /// Instances one workgroup takes, given the single-pass tile length.
    fn per_workgroup(&self, _workgroup_size: u32, tile_len: u32) -> u32 {
        tile_len
    }

    /// Uniform entries per chunk of up to `window_len` instances (per view
    /// when [`Self::dispatches_per_view`]).
    fn params_per_chunk(&self, _window_len: u32) -> u32 {
        1
    }

    /// Whether it culls several views one after the other, with a uniform
    /// entry per view (`params.first_view`), rather than all of them in
    /// each dispatch (looping over `VIEWS` in the shader).
    fn dispatches_per_view(&self) -> bool {
        false
    }

    /// Scratch buffers per target: chunks of up to `chunk_len` instances in
    /// `workgroups` workgroups (both dimensions of the dispatch) of
    /// `per_workgroup` instances each, for the target's `views` views (its
    /// kernel's `VIEWS`).
    fn scratch(
        &self,
        _chunk_len: u32,
        _workgroups: u64,
        _per_workgroup: u32,
        _views: u32,
    ) -> Vec<ScratchBuffer> {
        Vec::new()
    }

    /// Records the cull of every chunk, with `passes` compiled from
    /// [`Self::passes`] in order.
    fn encode(&self, cx: EncodeContext, passes: &[CompiledPass]);

    /// The cull's dispatches, to be recorded into a compute pass shared
    /// with other targets' culls (after every one's clears), where it is a
    /// dispatch per chunk with nothing recorded between them: the
    /// unordered single-pass kernels' flat culls. `None` where it records
    /// passes of its own ([`Self::encode`]).
    fn shared_dispatches(
        &self,
        _cx: &EncodeContext,
        _passes: &[CompiledPass],
    ) -> Option<Vec<SharedDispatch>> {
        None
    }
}

/// Knobs some kernels turn into shader defs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelTuning {
    /// The ordered variant's polls before falling back.
    pub spin_limit: u32,
    /// Tiles that publish nothing (testing the fallback).
    pub silent_tiles: u32,
    /// SubgroupBallot writes dense rows of wide instance copies together
    /// ([`crate::Tuning::row_writes`], resolved for the format).
    pub row_writes: bool,
    /// Index output staged in workgroup memory where the kernel can
    /// ([`crate::Tuning::staged_indices`], resolved).
    pub staged_indices: bool,
}

/// A variant, registered: what is known of it whether or not it is
/// compiled in, and its kernel when it is.
pub(crate) struct Registration {
    pub variant: ScanVariant,
    /// The cargo feature that compiles it in (its name, too).
    pub feature: &'static str,
    /// Device features it needs.
    pub required_features: wgpu::Features,
    /// Whether survivors keep their input order.
    pub preserves_order: bool,
    /// `None` when its feature is off.
    pub kernel: Option<&'static dyn ScanKernel>,
}

/// `Some(kernel)` when `$feature` is on.
macro_rules! compiled {
    ($feature:literal, $kernel:path) => {{
        #[cfg(feature = $feature)]
        let kernel: Option<&'static dyn ScanKernel> = Some(&$kernel);
        #[cfg(not(feature = $feature))]
        let kernel: Option<&'static dyn ScanKernel> = None;
        kernel
    }};
}

/// Every variant, fastest first (the order `ScanVariant::best_available`
/// prefers; see `docs/benchmarks.md`). Adding a variant: its module pair
/// and cargo feature, a `ScanVariant` case, and a line here.
pub(crate) static REGISTRY: [Registration; 6] = [
    Registration {
        variant: ScanVariant::SubgroupBallot,
        feature: "subgroup-ballot",
        required_features: wgpu::Features::SUBGROUP,
        preserves_order: false,
        kernel: compiled!("subgroup-ballot", subgroup_ballot::KERNEL),
    },
    Registration {
        variant: ScanVariant::SubgroupShuffle,
        feature: "subgroup-shuffle",
        required_features: wgpu::Features::SUBGROUP,
        preserves_order: false,
        kernel: compiled!("subgroup-shuffle", subgroup_shuffle::KERNEL),
    },
    Registration {
        variant: ScanVariant::BlockAtomic,
        feature: "block-atomic",
        required_features: wgpu::Features::empty(),
        preserves_order: false,
        kernel: compiled!("block-atomic", block_atomic::KERNEL),
    },
    Registration {
        variant: ScanVariant::Ordered,
        feature: "ordered",
        required_features: wgpu::Features::empty(),
        preserves_order: true,
        kernel: compiled!("ordered", ordered::KERNEL),
    },
    Registration {
        variant: ScanVariant::OrderedTwoPass,
        feature: "ordered-two-pass",
        required_features: wgpu::Features::empty(),
        preserves_order: true,
        kernel: compiled!("ordered-two-pass", ordered_two_pass::KERNEL),
    },
    Registration {
        variant: ScanVariant::HillisSteele,
        feature: "hillis-steele",
        required_features: wgpu::Features::empty(),
        preserves_order: true,
        kernel: compiled!("hillis-steele", hillis_steele::KERNEL),
    },
];

/// The scan building blocks more than one variant imports, in dependency order.
pub(crate) const SCAN_LIBRARY: [ShaderModule; 5] = [
    shader_module!("scans/tile_scan.wgsl"),
    shader_module!("scans/ballot.wgsl"),
    shader_module!("scans/ballot_rows.wgsl"),
    shader_module!("scans/reserve.wgsl"),
    shader_module!("scans/staged.wgsl"),
];

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

    /// `ScanVariant::ALL` and the registry list the variants in the same
    /// order (fastest first), which `best_available` relies on.
    #[test]
    fn registry_order_is_all() {
        let registered: Vec<ScanVariant> = REGISTRY.iter().map(|r| r.variant).collect();
        assert_eq!(registered, ScanVariant::ALL);
    }

    #[test]
    fn names_round_trip() {
        for v in ScanVariant::ALL {
            assert_eq!(ScanVariant::from_name(v.name()), Some(v));
        }
    }
}
