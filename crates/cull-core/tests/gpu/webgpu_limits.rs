//! WebGPU's limits (issue 15): Bevy's own GPU culling is off in browsers, so
//! every variant that needs no native-only feature must run within WebGPU's
//! default limits (`wgpu::Limits::default()`: 8 storage buffers per stage,
//! 128 MiB per binding, 16 KiB of workgroup memory, 256 invocations) and
//! without subgroups or immediates. A device with exactly those limits and
//! no optional features is opened on the test adapter (lavapipe here) and the
//! exact-set tests run through it, past one binding's worth of instances too.

use crate::harness::*;
use cull_core::{CullError, GpuContext, InstanceFormat, OutputKind, ScanVariant, Tuning};

fn webgpu_device() -> GpuContext {
    GpuContext::with_limits(
        wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
        wgpu::Features::all(),
        Some(wgpu::Limits::default()),
    )
    .unwrap_or_else(|e| panic!("a device with WebGPU's default limits: {e}"))
}

#[test]
fn every_portable_variant_is_exact_within_webgpu_limits() {
    let ctx = webgpu_device();
    assert!(ctx.device.features().is_empty(), "no optional feature");
    assert_eq!(ctx.device.limits().max_storage_buffers_per_shader_stage, 8);
    let portable: Vec<ScanVariant> = ScanVariant::compiled()
        .filter(|v| v.is_available(wgpu::Features::empty()))
        .collect();
    if portable.is_empty() {
        // Only subgroup variants are compiled in (a feature-subset build):
        // such a device gets a typed refusal, which is what is checked.
        let err = cull_core::Culler::new(&ctx.device, &ctx.queue, &Default::default()).err();
        assert!(matches!(err, Some(CullError::NoVariantAvailable)), "{err:?}");
        eprintln!("no variant without subgroups is compiled in: checked the refusal only");
        return;
    }
    // Small bindings put every shape's largest bind group (four output
    // windows) and the chunk loop through the same limits at small sizes.
    let small = Tuning {
        max_binding_size: Some(64 << 10),
        ..Default::default()
    };
    // The pixel splat after a cull, within the same limits.
    crate::splat::check_splat_on(&ctx, portable[0], "WebGPU limits");
    // Several culls in one pass, within the same limits.
    for &variant in &portable {
        crate::cull_all::check_cull_all_on(&ctx, variant, small, "WebGPU limits");
    }
    for variant in portable {
        for format in InstanceFormat::ALL {
            for output in [OutputKind::Indices, OutputKind::Instances] {
                for tuning in [Tuning::default(), small] {
                    let culler = culler(&ctx, variant, format, output, tuning);
                    assert!(!culler.uses_subgroups());
                    let chunk = culler.chunk_len() as usize;
                    let sizes: Vec<usize> = if tuning == small {
                        vec![chunk + 1, 3 * chunk + 77]
                    } else {
                        vec![0, 1, 255, 257, 100_003]
                    };
                    for n in sizes {
                        let scene = edge_scene(n as u64 + 5, n, Camera::InfiniteReverseZ, format);
                        let survivors = run(&ctx, &culler, &scene, (n as u32).max(1));
                        let what =
                            format!("{variant:?} {format:?} {output:?} n={n} chunk={chunk} (WebGPU limits)");
                        assert_exact(&what, &reference(&scene, format), &survivors);
                        if variant.preserves_order() {
                            assert!(survivors.windows(2).all(|w| w[0] < w[1]), "{what}: out of order");
                        }
                        // A mesh centred on its origin takes a kernel of its own.
                        let scene = edge_scene_centred(n as u64 + 7, n, Camera::InfiniteReverseZ, format);
                        let survivors = run(&ctx, &culler, &scene, (n as u32).max(1));
                        assert_exact(
                            &format!("{what}, centred"),
                            &reference(&scene, format),
                            &survivors,
                        );
                    }
                }
                // Several views in one pass within the same limits.
                let many = views_culler(&ctx, variant, format, output, Tuning::default(), 4);
                for n in [0usize, 1, 257, 4099] {
                    let scene = edge_scene(n as u64 + 9, n, Camera::Perspective, format);
                    let frusta = view_frusta(&scene, n as u64, 4);
                    let survivors = run_views(&ctx, &many, &scene, &frusta, (n as u32).max(1), 4);
                    let what = format!("{variant:?} {format:?} {output:?} n={n} 4 views (WebGPU limits)");
                    assert_views_exact(&what, &many, &scene, &frusta, &survivors);
                    let levels = test_levels(&frusta[0]);
                    let survivors = run_views(&ctx, &many, &scene, &levels, (n as u32).max(1), 4);
                    assert_views_exact(&format!("{what}, levels"), &many, &scene, &levels, &survivors);
                    // By cells (one more binding for the cull), where the
                    // variant culls cells.
                    {
                        let (sorted, layout) = crate::cells::sorted(&scene, &many);
                        let capacity = (n as u32).max(1);
                        let (survivors, _) =
                            crate::cells::run_cells(&ctx, &many, &sorted, &layout, &frusta, capacity, 4);
                        assert_views_exact(&format!("{what}, by cells"), &many, &sorted, &frusta, &survivors);
                        if n == 4099 {
                            crate::cells::check_whole_cells(&ctx, &many, 4, &what);
                        }
                    }
                }
            }
        }
    }
}

/// WebGPU's limits with its `subgroups` extension: the subgroup variants
/// stage index output in workgroup memory (two views' rows of a tile),
/// which must fit the 16 KiB a browser grants at the largest workgroup,
/// with every view a target can have.
#[test]
fn staged_subgroup_variants_fit_webgpu_workgroup_memory() {
    let ctx = GpuContext::with_limits(
        wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
        !wgpu::Features::SUBGROUP,
        Some(wgpu::Limits::default()),
    )
    .unwrap_or_else(|e| panic!("a device with WebGPU's default limits: {e}"));
    assert_eq!(ctx.device.limits().max_compute_workgroup_storage_size, 16 * 1024);
    let staging: Vec<ScanVariant> = [ScanVariant::SubgroupBallot, ScanVariant::SubgroupShuffle]
        .into_iter()
        .filter(|v| ScanVariant::compiled().any(|c| c == *v))
        .collect();
    for variant in staging {
        assert!(
            variant.is_available(ctx.device.features()),
            "the test adapter has no subgroups: install Mesa's lavapipe (see README)"
        );
        for format in InstanceFormat::ALL {
            let views = cull_core::MAX_VIEWS;
            let many = views_culler(
                &ctx,
                variant,
                format,
                OutputKind::Indices,
                Tuning::default(),
                views,
            );
            for n in [0usize, 1, 4099] {
                let scene = edge_scene(n as u64 + 13, n, Camera::Perspective, format);
                let frusta = view_frusta(&scene, n as u64 + 1, views as usize);
                let survivors = run_views(&ctx, &many, &scene, &frusta, (n as u32).max(1), views);
                let what = format!("{variant:?} {format:?} n={n} {views} views, staged (WebGPU limits)");
                assert_views_exact(&what, &many, &scene, &frusta, &survivors);
            }
        }
    }
}

/// A device that binds fewer storage buffers than a pass needs gets a typed
/// error from the culler, not a wgpu validation panic.
#[test]
fn too_few_storage_buffers_is_an_error() {
    let limits = wgpu::Limits {
        max_storage_buffers_per_shader_stage: 4,
        ..wgpu::Limits::downlevel_defaults()
    };
    let ctx = GpuContext::with_limits(
        wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
        wgpu::Features::all(),
        Some(limits),
    )
    .unwrap();
    for variant in ScanVariant::compiled().filter(|v| v.is_available(wgpu::Features::empty())) {
        let desc = cull_core::CullerDesc {
            variant: Some(variant),
            allow_fallback: false,
            format: InstanceFormat::PosQuat,
            output: OutputKind::Indices,
            ..Default::default()
        };
        match cull_core::Culler::new(&ctx.device, &ctx.queue, &desc) {
            // Fits in four with one output window: then a batch needing four
            // windows must be refused when its target is made.
            Ok(culler) => {
                let four_windows = 3 * culler.chunk_len() + 1;
                let err = cull_core::CullTarget::new(&ctx.device, &culler, four_windows).err();
                assert!(
                    matches!(
                        err,
                        Some(
                            CullError::TooManyStorageBuffers { .. } | CullError::CountExceedsCapacity { .. }
                        )
                    ),
                    "{variant:?}: {err:?}"
                );
            }
            Err(e) => assert!(
                matches!(e, CullError::TooManyStorageBuffers { .. }),
                "{variant:?}: {e}"
            ),
        }
    }
}

/// Both phases of occlusion culling within WebGPU's default limits, in
/// every portable variant, also past one binding (the history and the
/// pyramid beside four output windows, chunk after chunk).
#[test]
fn occlusion_is_exact_within_webgpu_limits() {
    let ctx = webgpu_device();
    let builder = cull_core::PyramidBuilder::new(&ctx.device).unwrap();
    let small = Tuning {
        max_binding_size: Some(64 << 10),
        ..Default::default()
    };
    for variant in ScanVariant::compiled().filter(|v| v.is_available(wgpu::Features::empty())) {
        for tuning in [Tuning::default(), small] {
            let format = InstanceFormat::PosQuat;
            let culler = culler(&ctx, variant, format, OutputKind::Indices, tuning);
            let chunk = culler.chunk_len() as usize;
            let (n, camera) = if tuning == small {
                (3 * chunk + 77, Camera::Perspective)
            } else {
                (4099, Camera::InfiniteReverseZ)
            };
            let scene = edge_scene(n as u64 + 31, n, camera, format);
            let what = format!("{variant:?} n={n} chunk={chunk} occlusion (WebGPU limits)");
            crate::occlusion::two_frames(&ctx, &culler, Some(&builder), &scene, camera, false, &what);
        }
    }
}
