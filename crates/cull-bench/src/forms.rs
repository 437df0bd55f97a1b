//! The cullers a run measures, shared by the bench and `cull-registers`.

use cull_core::{Culler, ScanVariant, Tuning};

/// Each of `variants` with `tuning`, and the ordered variant also in its
/// workgroup-memory form where the device has subgroups (it would otherwise
/// use its subgroup form): the form devices without subgroups get.
pub fn forms(
    variants: &[ScanVariant],
    features: wgpu::Features,
    tuning: Tuning,
) -> Vec<(ScanVariant, Tuning)> {
    variants
        .iter()
        .flat_map(|&variant| {
            let both = variant == ScanVariant::Ordered
                && features.contains(wgpu::Features::SUBGROUP)
                && !tuning.workgroup_scan;
            [(variant, tuning)].into_iter().chain(both.then_some((
                variant,
                Tuning {
                    workgroup_scan: true,
                    ..tuning
                },
            )))
        })
        .collect()
}

/// A culler's name in the tables: its variant's, with `-workgroup` for the
/// ordered variant's workgroup-memory form.
pub fn label(culler: &Culler) -> String {
    let variant = culler.variant();
    if variant == ScanVariant::Ordered && !culler.uses_subgroups() {
        format!("{}-workgroup", variant.name())
    } else {
        variant.name().into()
    }
}
