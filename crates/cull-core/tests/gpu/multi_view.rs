//! Several views culled in one pass (`Culler::cull`): every variant (both
//! forms of the ordered one), format and output kind (each form with both
//! output kinds, each output kind with every format; every combination with
//! `GPU_CULL_FULL_MATRIX=1`); each view's survivors against the CPU
//! reference as exact sets, and equal to a single-view cull of the same
//! frustum.

use crate::harness::*;
use cull_core::{CullError, CullRequest, CullTarget, InstanceFormat, MAX_VIEWS, OutputKind, Tuning};

const SIZES: [usize; 6] = [0, 1, 257, 1025, 4099, 100_003];

fn check_all(output: OutputKind) {
    let ctx = gpu();
    let mut runs = 0;
    let kernels = topic_kernels(ctx, output);
    for &(variant, tuning, format) in &kernels {
        let many = views_culler(ctx, variant, format, output, tuning, MAX_VIEWS);
        let one = culler(ctx, variant, format, output, tuning);
        let form = form_name(&many);
        for (s, &size) in SIZES.iter().enumerate() {
            let camera = Camera::ALL[s % Camera::ALL.len()];
            let scene = edge_scene(s as u64 + 500, size, camera, format);
            // All eight views, then three of a target that holds eight.
            for k in [MAX_VIEWS as usize, 3] {
                let frusta = view_frusta(&scene, s as u64 + k as u64, k);
                let what = format!("{variant:?} ({form}) {format:?} {output:?} n={size} views={k}");
                let capacity = size as u32 + 77;
                let survivors = run_views(ctx, &many, &scene, &frusta, capacity, MAX_VIEWS);
                assert_views_exact(&what, &many, &scene, &frusta, &survivors);
                for (view, frustum) in frusta.iter().enumerate() {
                    let mut alone =
                        run_views(ctx, &one, &scene, std::slice::from_ref(frustum), capacity, 1).remove(0);
                    let mut together = survivors[view].clone();
                    if !variant.preserves_order() {
                        alone.sort_unstable();
                        together.sort_unstable();
                    }
                    if together != alone {
                        let only_together: Vec<_> =
                            together.iter().filter(|i| !alone.contains(i)).take(8).collect();
                        let only_alone: Vec<_> =
                            alone.iter().filter(|i| !together.contains(i)).take(8).collect();
                        panic!(
                            "{what} view {view}: {} survivors, {} in a single-view cull; only together {only_together:?}, only alone {only_alone:?}",
                            together.len(),
                            alone.len()
                        );
                    }
                }
                if k > 3 {
                    let sorted = |v: &Vec<u32>| {
                        let mut v = v.clone();
                        v.sort_unstable();
                        v
                    };
                    assert_eq!(
                        sorted(&survivors[3]),
                        sorted(&survivors[0]),
                        "{what}: equal frusta, different sets"
                    );
                }
                runs += 1;
            }
        }
    }
    assert_eq!(runs, kernels.len() * SIZES.len() * 2);
}

#[test]
fn every_variant_matches_reference_per_view_indices() {
    check_all(OutputKind::Indices);
}

#[test]
fn every_variant_matches_reference_per_view_instance_copies() {
    check_all(OutputKind::Instances);
}

/// The subgroup variants stage index output in workgroup memory by
/// default (what the tests above run, in a target of eight views); here
/// each kernel from one view to eight (`VIEWS`: one row, pairs, an odd last
/// view) with staging and without (`Tuning::staged_indices: Some(false)`,
/// each lane storing its own survivors), at the default workgroup and at
/// 32 invocations (tiles of 128), empty, one instance and across tiles.
#[test]
fn subgroup_index_output_matches_reference_with_and_without_staging() {
    let ctx = gpu();
    let staging: Vec<_> = [
        cull_core::ScanVariant::SubgroupBallot,
        cull_core::ScanVariant::SubgroupShuffle,
    ]
    .into_iter()
    .filter(|v| v.is_compiled())
    .collect();
    for variant in staging {
        if !variant.is_available(ctx.device.features()) {
            panic!("the test adapter has no subgroups: install Mesa's lavapipe (see README)");
        }
        for (w, workgroup_size) in [None, Some(32)].into_iter().enumerate() {
            for (t, staged) in [false, true].into_iter().enumerate() {
                let tuning = Tuning {
                    staged_indices: Some(staged),
                    workgroup_size,
                    ..Tuning::default()
                };
                for format in formats_turning(variant as usize + 2 * w + t, OutputKind::Indices) {
                    let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, MAX_VIEWS);
                    for (s, &size) in [0usize, 1, 1025, 20_011].iter().enumerate() {
                        let camera = Camera::ALL[s % Camera::ALL.len()];
                        let scene = edge_scene(s as u64 + 900, size, camera, format);
                        for k in 1..=MAX_VIEWS {
                            let frusta = view_frusta(&scene, s as u64 + 31 * k as u64, k as usize);
                            let what = format!(
                                "{variant:?} {format:?} staged={staged} workgroup={workgroup_size:?} n={size} views={k}"
                            );
                            let survivors = run_views(ctx, &culler, &scene, &frusta, (size as u32).max(1), k);
                            assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
                        }
                    }
                }
            }
        }
    }
}

/// Small limits: chunks, output windows that span several views' lists, and
/// a dispatch that wraps into y with surplus workgroups.
#[test]
fn views_across_chunks_windows_and_two_dimensional_dispatch() {
    let ctx = gpu();
    for (variant, tuning) in forms(ctx) {
        let tuning = narrow_tuning(tuning);
        for format in InstanceFormat::ALL {
            let culler = views_culler(ctx, variant, format, OutputKind::Instances, tuning, 3);
            let chunk = culler.chunk_len() as usize;
            // Three views of 1.2 chunks fill four windows.
            let size = chunk + chunk / 5;
            let scene = edge_scene(size as u64, size, Camera::Perspective, format);
            let frusta = view_frusta(&scene, 9, 3);
            let survivors = run_views(ctx, &culler, &scene, &frusta, size as u32, 3);
            let what = format!(
                "{variant:?} ({}) {format:?} n={size} chunk={chunk}",
                form_name(&culler)
            );
            assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
            // Past four windows: refused, not overrun.
            let err = CullTarget::with_views(&ctx.device, &culler, (2 * chunk) as u32, 3).err();
            assert!(
                matches!(err, Some(CullError::BatchTooLarge { .. })),
                "{what}: {err:?}"
            );
        }
    }
}

/// Views are counted where they are asked for: a culler holds 1 to
/// MAX_VIEWS, a target no more than its culler, a cull 1 to its target's.
#[test]
fn view_counts_are_checked() {
    let ctx = gpu();
    let variant = variants(ctx)[0];
    let format = InstanceFormat::PosQuat;
    for bad in [0, MAX_VIEWS + 1] {
        let desc = cull_core::CullerDesc {
            max_views: bad,
            ..Default::default()
        };
        let err = cull_core::Culler::new(&ctx.device, &ctx.queue, &desc).err();
        assert!(
            matches!(err, Some(CullError::ViewCount { .. })),
            "max_views {bad}: {err:?}"
        );
    }
    let culler = views_culler(ctx, variant, format, OutputKind::Indices, Tuning::default(), 4);
    for bad in [0, 5] {
        let err = CullTarget::with_views(&ctx.device, &culler, 10, bad).err();
        assert!(
            matches!(err, Some(CullError::ViewCount { .. })),
            "views {bad}: {err:?}"
        );
    }
    let scene = edge_scene(3, 100, Camera::Perspective, format);
    let job = Job::new(ctx, &culler, &scene, 100);
    let target = CullTarget::with_views(&ctx.device, &culler, 100, 2).unwrap();
    let frusta = view_frusta(&scene, 3, 3);
    for k in [0, 3] {
        let request = CullRequest::new(&job.input, &target, &frusta[..k], scene.bounds, 100);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let err = culler.cull(&mut encoder, &ctx.queue, request);
        assert!(
            matches!(err, Err(CullError::ViewCount { .. })),
            "{k} frusta: {err:?}"
        );
    }
    let err = target.read_view_count(&ctx.device, &ctx.queue, 2);
    assert!(matches!(err, Err(CullError::ViewCount { .. })), "{err:?}");
    // Each view's list starts at a multiple of 256 bytes, so it can be bound.
    assert_eq!(target.view_output_offset(1) % 256, 0);
    assert_eq!(target.draw_args_offset(1), cull_core::DRAW_ARGS_SIZE);
}
