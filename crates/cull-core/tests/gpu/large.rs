//! Sizes past the device's limits: more workgroups than one dispatch
//! dimension holds, and batches larger than one storage binding.

use crate::harness::*;
use cull_core::{InstanceFormat, OutputKind, Tuning};

/// Forced small limits exercise the same code paths at small sizes: a
/// dispatch wider than 7 workgroups wraps into y, and a binding of 128 KiB
/// splits the batch into chunks with up to four output windows.
#[test]
fn chunked_and_two_dimensional_dispatch_with_small_limits() {
    let ctx = gpu();
    let limits = Tuning {
        max_binding_size: Some(128 << 10),
        max_workgroups_per_dimension: Some(7),
        ..Default::default()
    };
    for variant in variants(ctx) {
        for format in InstanceFormat::ALL {
            for output in [OutputKind::Indices, OutputKind::Instances] {
                let culler = culler(ctx, variant, format, output, limits);
                let chunk = culler.chunk_len() as usize;
                for size in [chunk - 1, chunk, chunk + 1, 3 * chunk + 77] {
                    let capacity = (4 * chunk) as u32;
                    let scene = edge_scene(size as u64, size, Camera::InfiniteReverseZ, format);
                    let survivors = run(ctx, &culler, &scene, capacity);
                    let what = format!("{variant:?} {format:?} {output:?} n={size} chunk={chunk}");
                    assert_exact(&what, &reference(&scene, format), &survivors);
                }
                // Five windows are refused, not overrun.
                let err = cull_core::CullTarget::new(&ctx.device, &culler, (4 * chunk + 1) as u32).err();
                assert!(
                    matches!(err, Some(cull_core::CullError::BatchTooLarge { .. })),
                    "{err:?}"
                );
            }
        }
    }
}

/// Real limits: a batch bigger than the device's largest storage binding
/// (128 MiB on lavapipe: over 4M instances of 32 B).
#[test]
fn batch_larger_than_one_binding() {
    let ctx = gpu();
    let binding = ctx.device.limits().max_storage_buffer_binding_size;
    let format = InstanceFormat::PosQuat;
    let n = (binding / format.stride()) as usize + 4099;
    let scene = edge_scene(99, n, Camera::Perspective, format);
    let reference = reference(&scene, format);
    for variant in variants(ctx) {
        let culler = culler(ctx, variant, format, OutputKind::Instances, Default::default());
        assert!(
            culler.chunk_len() < n as u32,
            "{variant:?} should need two chunks"
        );
        let survivors = run(ctx, &culler, &scene, n as u32);
        assert_exact(&format!("{variant:?} n={n}"), &reference, &survivors);
    }
    // Two views in one pass over the same chunks (indices: both lists fit).
    for variant in variants(ctx) {
        let culler = views_culler(ctx, variant, format, OutputKind::Indices, Default::default(), 2);
        let frusta = view_frusta(&scene, 1, 2);
        let survivors = run_views(ctx, &culler, &scene, &frusta, n as u32, 2);
        assert_views_exact(
            &format!("{variant:?} n={n}"),
            &culler,
            &scene,
            &frusta,
            &survivors,
        );
    }
}

/// Real limits: Hillis-Steele's passes run one thread per instance, so
/// 65535 * 256 + 1 instances need more workgroups than one dispatch
/// dimension holds. Where the storage binding is large (2 GiB on NVIDIA) one
/// chunk dispatches them in two dimensions; on lavapipe (128 MiB bindings)
/// the batch is first split into chunks. Either way, the survivors must be exact.
#[cfg(feature = "hillis-steele")]
#[test]
fn more_than_65535_workgroups() {
    let ctx = gpu();
    let max = ctx.device.limits().max_compute_workgroups_per_dimension as usize;
    let format = InstanceFormat::Packed16;
    let n = max * 256 + 1;
    let culler = culler(
        ctx,
        cull_core::ScanVariant::HillisSteele,
        format,
        OutputKind::Indices,
        Default::default(),
    );
    assert!(n.div_ceil(256) > max);
    let scene = cull_core::scene::Scene::random(5, n, Camera::InfiniteReverseZ, Some(0.3)).fit(format);
    let survivors = run(ctx, &culler, &scene, n as u32);
    assert_exact(
        &format!("n={n}, chunk={}", culler.chunk_len()),
        &reference(&scene, format),
        &survivors,
    );
}
