//! The ordered variant: exactly the stable compaction, also with many tiny
//! tiles and with the look-back's fallback forced.

use crate::harness::*;
use cull_core::{InstanceFormat, OutputKind, ScanVariant, Tuning};

/// Workgroups of 32 threads make tiles of 128 instances: 100,003 instances
/// are 782 tiles racing through the look-back, with spin limits from
/// "never wait" to the default, and with every other tile (or three in
/// four) publishing nothing, so their successors must count them. In each
/// of the variant's forms, and for 16-byte instances, whose subgroup form
/// takes two row groups per thread (tiles of 256).
#[test]
fn ordered_stress_tiny_tiles_and_forced_fallback() {
    let ctx = gpu();
    let forms = ordered_forms(ctx);
    assert_eq!(forms.len(), 2, "lavapipe has subgroups: both forms run");
    let configs = [(0, 0), (0, 1), (0, 3), (4, 1), (256, 0), (256, 0b101)];
    let cases = forms
        .iter()
        .flat_map(|f| configs.map(|c| (f, InstanceFormat::PosQuat, c)))
        .chain(configs.map(|c| (&forms[0], InstanceFormat::Packed16, c)));
    let scenes = |format| -> Vec<_> {
        [1_000usize, 100_003]
            .into_iter()
            .enumerate()
            .map(|(s, n)| edge_scene(40 + s as u64, n, Camera::InfiniteReverseZ, format))
            .collect()
    };
    let scenes = [scenes(InstanceFormat::PosQuat), scenes(InstanceFormat::Packed16)];
    for (form, format, (spin, silent)) in cases {
        let scenes = &scenes[usize::from(format == InstanceFormat::Packed16)];
        let tuning = Tuning {
            workgroup_size: Some(32),
            lookback_spin_limit: Some(spin),
            lookback_silent_tiles: silent,
            ..*form
        };
        for output in [OutputKind::Indices, OutputKind::Instances] {
            let culler = culler(ctx, ScanVariant::Ordered, format, output, tuning);
            let form = form_name(&culler);
            for scene in scenes {
                let n = scene.instances.len();
                for repeat in 0..3 {
                    let survivors = run(ctx, &culler, scene, n as u32);
                    assert_ordered(
                        &format!(
                            "{form} {format:?}: spin {spin} silent {silent:#b} {output:?} n={n} #{repeat}"
                        ),
                        scene,
                        format,
                        &survivors,
                    );
                }
            }
        }
    }
}

/// Several views, one chain each: tiny tiles with the fallback forced
/// (every other tile silent, and no waiting), in both forms, each view
/// exact and in order.
#[test]
fn ordered_views_with_forced_fallback() {
    let ctx = gpu();
    for form in ordered_forms(ctx) {
        for tuning in forced_fallback_tunings(form) {
            let format = InstanceFormat::PosQuat;
            let culler = views_culler(ctx, ScanVariant::Ordered, format, OutputKind::Indices, tuning, 6);
            let scene = edge_scene(77, 50_001, Camera::InfiniteReverseZ, format);
            let frusta = view_frusta(&scene, 5, 6);
            let survivors = run_views(ctx, &culler, &scene, &frusta, 50_001, 6);
            let what = format!(
                "{} spin {:?} silent {:#b}",
                form_name(&culler),
                tuning.lookback_spin_limit,
                tuning.lookback_silent_tiles
            );
            assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
        }
    }
}

/// Chunks (small bindings) and a two-dimensional dispatch with surplus
/// workgroups, which take tile IDs too and must not disturb the chain.
#[test]
fn ordered_across_chunks_and_surplus_workgroups() {
    let ctx = gpu();
    for (form, format) in ordered_forms(ctx)
        .into_iter()
        .flat_map(|f| InstanceFormat::ALL.map(|format| (f, format)))
    {
        let tuning = Tuning {
            max_binding_size: Some(64 << 10),
            max_workgroups_per_dimension: Some(5),
            workgroup_size: Some(32),
            ..form
        };
        let culler = culler(ctx, ScanVariant::Ordered, format, OutputKind::Indices, tuning);
        let chunk = culler.chunk_len() as usize;
        for n in [chunk - 3, 2 * chunk + 129, 4 * chunk] {
            let scene = edge_scene(n as u64, n, Camera::Perspective, format);
            let survivors = run(ctx, &culler, &scene, (4 * chunk) as u32);
            assert_ordered(
                &format!(
                    "{format:?} subgroups={} n={n} chunk={chunk}",
                    culler.uses_subgroups()
                ),
                &scene,
                format,
                &survivors,
            );
        }
    }
}
