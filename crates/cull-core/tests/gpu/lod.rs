//! Level of detail: one view per level (`Frustum::detail_levels`), all
//! culled in one pass (`Culler::cull_views`), in every variant (both forms
//! of the ordered one), format and output kind, with the kernel that
//! measures the frustum once for all levels and with the one that tests
//! each view's own frustum. Each level is checked
//! against the CPU reference as an exact set, and together the levels keep
//! every clearly visible sphere above the cut-off at least once: a sphere
//! within the tolerance of a threshold may be in two levels, never in none.

use crate::harness::*;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullError, CullTarget, CullViewsParams, Frustum, InstanceFormat, OutputKind, SizeBand, SizeMetric,
    VisibilityTest,
};
use glam::Vec3;

const SIZES: [usize; 5] = [0, 1, 257, 4099, 100_003];
const LEVELS: usize = 4;

/// A metric from a point inside the scene's view, and thresholds at
/// quantiles of the visible spheres' sizes, so that every level and the
/// cut-off get instances.
fn levels(scene: &Scene, format: InstanceFormat, camera: CameraKind) -> (SizeMetric, Vec<Frustum>) {
    let frustum = scene.frustum().unwrap();
    let metric = SizeMetric {
        origin: scene
            .clip_from_world
            .inverse()
            .project_point3(Vec3::new(0.0, 0.0, 0.5)),
        scale: 1.5,
        perspective: camera != CameraKind::Orthographic,
    };
    let bytes = format.encode(&scene.instances).unwrap();
    let mut sizes: Vec<f64> = (0..scene.instances.len())
        .filter_map(|i| format.world_sphere(&bytes, i, scene.bounds))
        .filter(|s| {
            s.center.is_finite() && s.radius.is_finite() && frustum.intersects_sphere(s.center, s.radius)
        })
        .map(|s| metric.size(s.center, s.radius))
        .collect();
    // Distinct sizes, largest first; thresholds halfway between neighbours
    // at quantiles, so that no sphere sits on one (a packed format's
    // orthographic view gives one size to all).
    sizes.sort_by(|a, b| b.total_cmp(a));
    sizes.dedup_by(|a, b| (*a - *b).abs() <= 1e-3 * b.abs());
    let thresholds: Vec<f32> = if sizes.len() >= 8 {
        [0.2, 0.45, 0.7, 0.9]
            .iter()
            .map(|q| {
                let j = ((q * sizes.len() as f64) as usize).min(sizes.len() - 2);
                (0.5 * (sizes[j] + sizes[j + 1])) as f32
            })
            .collect()
    } else {
        let s = sizes.first().copied().unwrap_or(0.1) as f32;
        vec![4.0 * s, 2.0 * s, 0.5 * s, 0.25 * s]
    };
    (metric, frustum.detail_levels(metric, &thresholds).unwrap())
}

fn check(output: OutputKind) {
    let ctx = gpu();
    let mut runs = 0;
    for (variant, tuning) in forms(ctx) {
        for format in InstanceFormat::ALL {
            let culler = views_culler(ctx, variant, format, output, tuning, LEVELS as u32 + 1);
            let form = form_name(&culler);
            for (s, &size) in SIZES.iter().enumerate() {
                let camera = Camera::ALL[s % Camera::ALL.len()];
                let scene = edge_scene(s as u64 + 900, size, camera, format);
                let (metric, frusta) = levels(&scene, format, camera);
                let what = format!("{variant:?} ({form}) {format:?} {output:?} n={size} {camera:?}");
                let capacity = size as u32 + 13;
                let survivors = run_views(ctx, &culler, &scene, &frusta, capacity, LEVELS as u32);
                assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
                // The same levels beside a view without a band are no longer
                // one camera's: the frustum test's own kernel votes each
                // level with its frustum (VisibilityTest::Frustum), where the
                // run above measured the frustum once per instance
                // (VisibilityTest::DetailLevels). The same reference holds.
                assert_eq!(VisibilityTest::for_views(&frusta), VisibilityTest::DetailLevels);
                let mut mixed = frusta.clone();
                mixed.push(scene.frustum().unwrap());
                assert_eq!(VisibilityTest::for_views(&mixed), VisibilityTest::Frustum);
                let mixed_survivors = run_views(ctx, &culler, &scene, &mixed, capacity, LEVELS as u32 + 1);
                assert_views_exact(
                    &format!("{what} beside a plain view"),
                    &culler,
                    &scene,
                    &mixed,
                    &mixed_survivors,
                );
                // No gap between levels: every sphere clearly inside the
                // frustum and clearly above the cut-off is in some level.
                let bytes = format.encode(&scene.instances).unwrap();
                let plain = scene.frustum().unwrap();
                let cut_off = frusta[LEVELS - 1].size_band.unwrap().min as f64 * (1.0 + 1e-3);
                let mut kept = vec![0u8; size];
                for level in &survivors {
                    for &i in level {
                        kept[i as usize] += 1;
                    }
                }
                for (i, &kept) in kept.iter().enumerate() {
                    let Some(s) = format.world_sphere(&bytes, i, scene.bounds) else {
                        continue;
                    };
                    let clearly = plain.classify(&s) == cull_core::frustum::SphereClass::Inside;
                    if clearly && s.radius.is_finite() && metric.size(s.center, s.radius) > cut_off {
                        assert!(kept >= 1, "{what}: instance {i} is in no level");
                    }
                    assert!(kept <= 2, "{what}: instance {i} is in {kept} levels");
                }
                if size == 100_003 {
                    for (k, level) in survivors.iter().enumerate() {
                        assert!(
                            !level.is_empty(),
                            "{what}: level {k} is empty: the test would not see bands ignored"
                        );
                    }
                }
                runs += 1;
            }
        }
    }
    assert_eq!(runs, forms(ctx).len() * 3 * SIZES.len());
}

#[test]
fn every_variant_matches_reference_per_level_indices() {
    check(OutputKind::Indices);
}

#[test]
fn every_variant_matches_reference_per_level_instance_copies() {
    check(OutputKind::Instances);
}

/// Bands the GPU and the reference could read differently are refused:
/// thresholds not descending, a NaN or negative end, a non-finite camera.
#[test]
fn invalid_bands_are_refused() {
    let ctx = gpu();
    let scene = edge_scene(7, 100, CameraKind::InfiniteReverseZ, InstanceFormat::PosQuat);
    let frustum = scene.frustum().unwrap();
    let metric = SizeMetric {
        origin: Vec3::ZERO,
        scale: 1.0,
        perspective: true,
    };
    for thresholds in [
        &[0.1, 0.2][..],
        &[0.2, 0.2],
        &[f32::NAN],
        &[-0.1],
        &[f32::INFINITY],
    ] {
        assert!(
            matches!(
                frustum.detail_levels(metric, thresholds),
                Err(CullError::InvalidParameter(_))
            ),
            "{thresholds:?}"
        );
    }
    let bad_origin = SizeMetric {
        origin: Vec3::NAN,
        ..metric
    };
    assert!(frustum.detail_levels(bad_origin, &[0.1]).is_err());
    let culler = posquat_culler(ctx, variants(ctx)[0]);
    let job = Job::new(ctx, &culler, &scene, 128);
    let target = CullTarget::with_views(&ctx.device, &culler, 128, 1).unwrap();
    for (min, max) in [(f32::NAN, 1.0), (0.5, 0.5), (-1.0, 1.0), (0.1, f32::NAN)] {
        let band = frustum.with_size_band(SizeBand { metric, min, max });
        let params = CullViewsParams {
            frusta: std::slice::from_ref(&band),
            local_bounds: scene.bounds,
            count: job.params.count,
        };
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let result = culler.cull_views(&mut encoder, &ctx.queue, &job.input, &target, &params);
        assert!(
            matches!(result, Err(CullError::InvalidParameter(_))),
            "min {min}, max {max}: {result:?}"
        );
    }
}
