//! Level of detail: one view per level (`Frustum::detail_levels`), all
//! culled in one pass (`Culler::cull`), in every variant (both forms of the
//! ordered one), format and output kind (each form with both output kinds,
//! each output kind with every format; every combination with
//! `GPU_CULL_FULL_MATRIX=1`), with the kernel that measures the frustum
//! once for all levels and with the one that tests each view's own frustum,
//! for four levels and for the most one cull takes ([`MAX_VIEWS`], the
//! plugin's `GpuCullLod::MAX_LEVELS`), and with levels that overlap (a
//! cross-fade's: a sphere in two lists). Each level is checked against the
//! CPU reference as an exact set, and together the levels keep every
//! clearly visible sphere above the cut-off at least once: a sphere within
//! the tolerance of a threshold may be in two levels, never in none.

use crate::harness::*;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullError, CullRequest, CullTarget, Culler, Frustum, GpuContext, InstanceFormat, MAX_VIEWS, OutputKind,
    SizeBand, SizeMetric, VisibilityTest,
};
use glam::Vec3;

const SIZES: [usize; 5] = [0, 1, 257, 4099, 100_003];
/// Level counts checked: a few, beside a plain view too, and the most one
/// multi-view cull takes (no room left for a plain view beside them).
const LEVEL_COUNTS: [usize; 2] = [4, MAX_VIEWS as usize];

/// The middle of the widest gap between neighbouring `sizes` (largest
/// first) among the pairs starting in `window`: a threshold no sphere sits
/// within the reference's tolerance of.
fn widest_gap(sizes: &[f64], window: std::ops::Range<usize>) -> Option<f32> {
    let gap = |j: usize| (sizes[j] - sizes[j + 1]) / sizes[j];
    let window = window.start..window.end.min(sizes.len().saturating_sub(1));
    let j = window.max_by(|&a, &b| gap(a).total_cmp(&gap(b)))?;
    Some((0.5 * (sizes[j] + sizes[j + 1])) as f32)
}

/// A metric from a point inside the scene's view, and `count` thresholds at
/// evenly spaced quantiles of the visible spheres' sizes, so that every
/// level and the cut-off get instances; and the sizes, largest first.
fn levels(
    scene: &Scene,
    format: InstanceFormat,
    camera: CameraKind,
    count: usize,
) -> (SizeMetric, Vec<Frustum>, Vec<f64>) {
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
    // Sizes largest first; each threshold in the widest gap between
    // neighbouring sizes near its quantile, so that no sphere sits within
    // the reference's tolerance of one. A threshold between two sizes a
    // dedup had merged could land on a sphere, hence the full list.
    sizes.sort_by(|a, b| b.total_cmp(a));
    let mut distinct = sizes.clone();
    distinct.dedup_by(|a, b| (*a - *b).abs() <= 1e-3 * b.abs());
    let thresholds: Vec<f32> = if distinct.len() >= 2 * count {
        let spacing = sizes.len() / (count + 1);
        (1..=count)
            .map(|k| {
                let at = (k * sizes.len() / (count + 1)).min(sizes.len() - 2);
                widest_gap(&sizes, at.saturating_sub(spacing / 2)..at + spacing / 2 + 1)
                    .expect("a window of sizes")
            })
            .collect()
    } else {
        // Too few sizes for quantiles (a packed format's orthographic view
        // gives one size to all): bands halving, skipping the largest size
        // itself (4s, 2s, s/2, s/4, ...), so no sphere sits on a threshold.
        let s = distinct.first().copied().unwrap_or(0.1) as f32;
        (0..count)
            .map(|k| {
                if k < 2 {
                    4.0 * s / (1u32 << k) as f32
                } else {
                    s / (1u32 << (k - 1)) as f32
                }
            })
            .collect()
    };
    let levels = frustum.detail_levels(metric, &thresholds).unwrap();
    (metric, levels, sizes)
}

/// `levels` with each coarser level reaching about 30% above the finer
/// level's threshold (as `Frustum::detail_levels_overlapping` makes them
/// for a cross-fade), each top end in a gap between `sizes`: the spheres
/// in an overlap are in two levels' lists.
fn overlapping(levels: &[Frustum], sizes: &[f64]) -> Vec<Frustum> {
    let mut out = levels.to_vec();
    for k in 1..levels.len() {
        let finer = levels[k - 1].size_band.unwrap().min;
        let band = levels[k].size_band.unwrap();
        // Sizes are largest first: those within 15-45% above the finer
        // threshold.
        let first = sizes.partition_point(|&x| x > finer as f64 * 1.45);
        let end = sizes.partition_point(|&x| x > finer as f64 * 1.15);
        let max = if end > first + 1 {
            widest_gap(sizes, first..end - 1).unwrap()
        } else {
            finer * 1.3
        };
        out[k] = levels[k].with_size_band(cull_core::SizeBand { max, ..band });
    }
    out
}

fn check(output: OutputKind) {
    let ctx = gpu();
    let mut runs = 0;
    let kernels = topic_kernels(ctx, output);
    for &(variant, tuning, format) in &kernels {
        let culler = views_culler(ctx, variant, format, output, tuning, MAX_VIEWS);
        for (s, &size) in SIZES.iter().enumerate() {
            for count in LEVEL_COUNTS {
                check_levels(ctx, &culler, output, (s, size), count);
                runs += 1;
            }
        }
    }
    assert_eq!(runs, kernels.len() * SIZES.len() * LEVEL_COUNTS.len());
}

/// `count` levels of one camera over the `s`-th edge scene of `size`
/// instances, against the reference.
fn check_levels(
    ctx: &GpuContext,
    culler: &Culler,
    output: OutputKind,
    (s, size): (usize, usize),
    count: usize,
) {
    let format = culler.format();
    let camera = Camera::ALL[s % Camera::ALL.len()];
    let scene = edge_scene(s as u64 + 900, size, camera, format);
    let (metric, frusta, sizes) = levels(&scene, format, camera, count);
    let what = format!(
        "{:?} ({}) {format:?} {output:?} n={size} {camera:?} {count} levels",
        culler.variant(),
        form_name(culler)
    );
    let capacity = size as u32 + 13;
    let survivors = run_views(ctx, culler, &scene, &frusta, capacity, count as u32);
    assert_views_exact(&what, culler, &scene, &frusta, &survivors);
    // The same levels beside a view without a band are no longer one
    // camera's: the frustum test's own kernel votes each level with its
    // frustum (VisibilityTest::Frustum), where the run above measured the
    // frustum once per instance (VisibilityTest::DetailLevels). The same
    // reference holds. At MAX_VIEWS levels there is no room for the plain
    // view.
    assert_eq!(VisibilityTest::for_views(&frusta), VisibilityTest::DetailLevels);
    if count < MAX_VIEWS as usize {
        // Levels that overlap (a cross-fade's): the spheres in an overlap
        // are in both lists, in every variant.
        let overlap = overlapping(&frusta, &sizes);
        assert_eq!(VisibilityTest::for_views(&overlap), VisibilityTest::DetailLevels);
        let overlap_survivors = run_views(ctx, culler, &scene, &overlap, capacity, count as u32);
        assert_views_exact(
            &format!("{what} overlapping"),
            culler,
            &scene,
            &overlap,
            &overlap_survivors,
        );
        if size == 100_003 {
            let both: usize = (1..count)
                .map(|k| {
                    let finer: std::collections::HashSet<u32> =
                        overlap_survivors[k - 1].iter().copied().collect();
                    overlap_survivors[k].iter().filter(|i| finer.contains(i)).count()
                })
                .sum();
            assert!(both > 0, "{what}: no instance in two overlapping levels");
        }
        let mut mixed = frusta.clone();
        mixed.push(scene.frustum().unwrap());
        assert_eq!(VisibilityTest::for_views(&mixed), VisibilityTest::Frustum);
        let mixed_survivors = run_views(ctx, culler, &scene, &mixed, capacity, count as u32 + 1);
        assert_views_exact(
            &format!("{what} beside a plain view"),
            culler,
            &scene,
            &mixed,
            &mixed_survivors,
        );
    }
    // No gap between levels: every sphere clearly inside the frustum and
    // clearly above the cut-off is in some level.
    let bytes = format.encode(&scene.instances).unwrap();
    let plain = scene.frustum().unwrap();
    let cut_off = frusta[count - 1].size_band.unwrap().min as f64 * (1.0 + 1e-3);
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
        let clearly = plain.classify(&s) == cull_core::SphereClass::Inside;
        if clearly && s.radius.is_finite() && metric.size(s.center, s.radius) > cut_off {
            assert!(kept >= 1, "{what}: instance {i} is in no level");
        }
        assert!(kept <= 2, "{what}: instance {i} is in {kept} levels");
    }
    if size == 100_003 {
        for (k, level) in survivors.iter().enumerate() {
            assert!(
                !level.is_empty(),
                "{what}: level {k} of {count} is empty: the test would not see bands ignored"
            );
        }
    }
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
        let request = CullRequest::new(
            &job.input,
            &target,
            std::slice::from_ref(&band),
            scene.bounds,
            job.count,
        );
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let result = culler.cull(&mut encoder, &ctx.queue, request);
        assert!(
            matches!(result, Err(CullError::InvalidParameter(_))),
            "min {min}, max {max}: {result:?}"
        );
    }
}
