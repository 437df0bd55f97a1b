//! Every variant x format x output kind x camera x size, as exact sets.

use crate::harness::*;
use cull_core::{InstanceFormat, OutputKind};

const SIZES: [usize; 9] = [0, 1, 2, 255, 256, 257, 1023, 1025, 100_003];

fn check_all(output: OutputKind) {
    let ctx = gpu();
    let mut runs = 0;
    for (variant, tuning) in forms(ctx) {
        for format in InstanceFormat::ALL {
            let culler = culler(ctx, variant, format, output, tuning);
            let form = form_name(&culler);
            for (c, camera) in Camera::ALL.into_iter().enumerate() {
                for (s, &size) in SIZES.iter().enumerate() {
                    let scene = edge_scene((c * 100 + s) as u64, size, camera, format);
                    let reference = reference(&scene, format);
                    // A target larger than the count: survivors must not spill.
                    let survivors = run(ctx, &culler, &scene, size as u32 + 77);
                    assert_exact(
                        &format!("{variant:?} ({form}) {format:?} {output:?} {camera:?} n={size}"),
                        &reference,
                        &survivors,
                    );
                    if variant.preserves_order() {
                        assert!(
                            survivors.windows(2).all(|w| w[0] < w[1]),
                            "{variant:?} ({form}) lost order"
                        );
                    }
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, forms(ctx).len() * 3 * 3 * SIZES.len());
}

#[test]
fn every_variant_matches_reference_indices() {
    check_all(OutputKind::Indices);
}

#[test]
fn every_variant_matches_reference_instance_copies() {
    check_all(OutputKind::Instances);
}

#[test]
fn scenes_exercise_both_outcomes() {
    // Guards the tests above against vacuous scenes: plenty kept and culled.
    for camera in Camera::ALL {
        let scene = edge_scene(7, 100_003, camera, InstanceFormat::PosQuat);
        let r = reference(&scene, InstanceFormat::PosQuat);
        let kept = r.visible.len();
        assert!(kept > 2_000 && kept < 90_000, "{camera:?}: {kept} visible");
    }
}

#[test]
fn every_variant_matches_reference_for_meshes_centred_on_their_origin() {
    // The formats skip the rotation of the mesh's center when it is the
    // origin (a culler that compiles its own kernels picks a kernel without
    // it; tests/gpu/deferred.rs covers the general kernel's branch); the
    // other tests use an off-centre sphere.
    let ctx = gpu();
    for (variant, tuning) in forms(ctx) {
        for format in InstanceFormat::ALL {
            let culler = culler(ctx, variant, format, OutputKind::Indices, tuning);
            let form = form_name(&culler);
            for (c, camera) in Camera::ALL.into_iter().enumerate() {
                for (s, size) in [0usize, 1, 257, 100_003].into_iter().enumerate() {
                    let scene = edge_scene_centred((c * 10 + s) as u64, size, camera, format);
                    let reference = reference(&scene, format);
                    let survivors = run(ctx, &culler, &scene, (size as u32).max(1));
                    assert_exact(
                        &format!("{variant:?} ({form}) {format:?} {camera:?} n={size}, centred"),
                        &reference,
                        &survivors,
                    );
                }
            }
        }
    }
}

/// Views with five planes and no band take the kernel for plain views by
/// default (the infinite reverse-Z camera above does); here the same culls
/// with that form turned off (`Tuning::plain_views`), so that the general
/// kernel's untaken branches on a sixth plane and a band, which a renderer
/// runs until its plain form compiles and `BlockAtomic` runs for two to
/// four views, are checked as exact sets too: one view, and four in one
/// pass.
#[test]
fn every_variant_matches_reference_without_the_plain_form() {
    let ctx = gpu();
    for (variant, tuning) in forms(ctx) {
        let tuning = cull_core::Tuning {
            plain_views: Some(false),
            ..tuning
        };
        for format in InstanceFormat::ALL {
            let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 4);
            assert!(!culler.takes_plain_form(1) && !culler.takes_plain_form(4));
            let form = form_name(&culler);
            for (s, size) in [257usize, 100_003].into_iter().enumerate() {
                let scene = edge_scene(s as u64 + 40, size, Camera::InfiniteReverseZ, format);
                let what = format!("{variant:?} ({form}) {format:?} n={size}, plain form off");
                let survivors = run(ctx, &culler, &scene, size as u32);
                assert_exact(&what, &reference(&scene, format), &survivors);
                // The scene's view and three turned about its vertical,
                // each of five planes.
                let clip_from_world = scene.clip_from_world;
                let projection = Camera::InfiniteReverseZ.projection();
                let view = projection.inverse() * clip_from_world;
                let frusta: Vec<cull_core::Frustum> = (0..4)
                    .map(|i| {
                        let turn = glam::Mat4::from_rotation_y(i as f32 * 0.3);
                        cull_core::Frustum::from_clip_from_world(projection * turn * view, None).unwrap()
                    })
                    .collect();
                assert!(frusta.iter().all(|f| f.planes().len() == 5));
                let views = run_views(ctx, &culler, &scene, &frusta, size as u32, 4);
                assert_views_exact(&what, &culler, &scene, &frusta, &views);
            }
        }
    }
}
