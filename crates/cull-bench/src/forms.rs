//! The cullers a run measures, shared by the bench and `cull-registers`.

use cull_core::{Culler, ScanVariant, Tuning};

/// Each of `variants` with `tuning`, and the ordered variants also in their
/// workgroup-memory forms where the device has subgroups (they would
/// otherwise use their subgroup forms): the forms devices without subgroups
/// get.
pub fn forms(
    variants: &[ScanVariant],
    features: wgpu::Features,
    tuning: Tuning,
) -> Vec<(ScanVariant, Tuning)> {
    variants
        .iter()
        .flat_map(|&variant| {
            let both = has_two_forms(variant)
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

/// Whether the variant has a subgroup form and a workgroup-memory form.
fn has_two_forms(variant: ScanVariant) -> bool {
    matches!(variant, ScanVariant::Ordered | ScanVariant::OrderedTwoPass)
}

/// A culler's name in the tables: its variant's, with `-workgroup` for the
/// ordered variants' workgroup-memory forms.
pub fn label(culler: &Culler) -> String {
    let variant = culler.variant();
    if has_two_forms(variant) && !culler.uses_subgroups() {
        format!("{}-workgroup", variant.name())
    } else {
        variant.name().into()
    }
}
