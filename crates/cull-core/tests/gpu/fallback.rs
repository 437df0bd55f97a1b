//! Devices without subgroups: a subgroup variant falls back (logged) or is
//! refused, and what runs still matches the reference.

use crate::harness::*;
use cull_core::{CullError, Culler, CullerDesc, GpuContext, InstanceFormat, OutputKind, ScanVariant, Tuning};

fn check_without_subgroups(ctx: &GpuContext) {
    assert!(!ctx.device.features().contains(wgpu::Features::SUBGROUP));
    for variant in [ScanVariant::SubgroupBallot, ScanVariant::SubgroupShuffle] {
        let strict = CullerDesc {
            variant: Some(variant),
            allow_fallback: false,
            ..Default::default()
        };
        let err = Culler::new(&ctx.device, &ctx.queue, &strict)
            .err()
            .expect("must be refused");
        assert!(
            matches!(
                err,
                CullError::MissingFeature { .. } | CullError::VariantNotCompiled { .. }
            ),
            "{err}"
        );
        let lenient = CullerDesc {
            variant: Some(variant),
            output: OutputKind::Indices,
            ..Default::default()
        };
        if !portable_compiled(ctx) {
            // Only subgroup variants are compiled in: nothing to fall back to.
            let err = Culler::new(&ctx.device, &ctx.queue, &lenient).err();
            assert!(matches!(err, Some(CullError::NoVariantAvailable)), "{err:?}");
            continue;
        }
        let culler = Culler::new(&ctx.device, &ctx.queue, &lenient).unwrap();
        assert!(culler.variant().required_features().is_empty());
        let scene = edge_scene(3, 5_000, Camera::InfiniteReverseZ, InstanceFormat::PosQuat);
        let survivors = run(ctx, &culler, &scene, 5_000);
        assert_exact(
            &format!("fallback {:?}", culler.variant()),
            &reference(&scene, InstanceFormat::PosQuat),
            &survivors,
        );
    }
    // Several views in one pass with every variant this device runs.
    // wgpu's GL backend cannot build the pyramid (a typed error): the
    // levels are written from the CPU there.
    let pyramids = cull_core::PyramidBuilder::new(&ctx.device);
    let gl = ctx.adapter.get_info().backend == wgpu::Backend::Gl;
    match &pyramids {
        Err(e) => assert!(gl && matches!(e, CullError::UnsupportedBackend { .. }), "{e}"),
        Ok(_) => assert!(!gl, "the GL backend must refuse to build a pyramid"),
    }
    for variant in variants(ctx) {
        let format = InstanceFormat::PosQuat;
        let culler = views_culler(ctx, variant, format, OutputKind::Indices, Default::default(), 5);
        for n in [0usize, 1, 1_000] {
            let scene = edge_scene(n as u64 + 4, n, Camera::Perspective, format);
            let frusta = view_frusta(&scene, 2, 5);
            let survivors = run_views(ctx, &culler, &scene, &frusta, (n as u32).max(1), 5);
            assert_views_exact(
                &format!("{variant:?} n={n}, no subgroups"),
                &culler,
                &scene,
                &frusta,
                &survivors,
            );
            // A mesh centred on its origin takes a kernel of its own.
            let centred = edge_scene_centred(n as u64 + 6, n, Camera::Perspective, format);
            let centred_frusta = view_frusta(&centred, 3, 5);
            let survivors = run_views(ctx, &culler, &centred, &centred_frusta, (n as u32).max(1), 5);
            let what = format!("{variant:?} n={n}, no subgroups, centred");
            assert_views_exact(&what, &culler, &centred, &centred_frusta, &survivors);
            // Levels of detail (views with size bands) on this device too.
            let levels = test_levels(&frusta[0]);
            let survivors = run_views(ctx, &culler, &scene, &levels, (n as u32).max(1), 5);
            let what = format!("{variant:?} n={n}, no subgroups, levels");
            assert_views_exact(&what, &culler, &scene, &levels, &survivors);
            // By cells, where the variant culls cells.
            {
                let (sorted, layout) = crate::cells::sorted(&scene, &culler);
                for (name, frusta) in [("views", &frusta), ("levels", &levels)] {
                    let capacity = (n as u32).max(1);
                    let (survivors, _) =
                        crate::cells::run_cells(ctx, &culler, &sorted, &layout, frusta, capacity, 5);
                    let what = format!("{variant:?} n={n}, no subgroups, {name} by cells");
                    assert_views_exact(&what, &culler, &sorted, frusta, &survivors);
                }
                if n == 1_000 {
                    crate::cells::check_whole_cells(ctx, &culler, 5, &format!("{variant:?}, no subgroups"));
                }
            }
            // Both phases of occlusion culling on this device; wgpu's GL
            // backend refuses them (a typed error).
            let what = format!("{variant:?} n={n}, no subgroups, occlusion");
            match &pyramids {
                Ok(builder) => {
                    crate::occlusion::two_frames(
                        ctx,
                        &culler,
                        Some(builder),
                        &scene,
                        Camera::Perspective,
                        true,
                        &what,
                    );
                }
                Err(_) => crate::occlusion::refused_on_gl(ctx, &culler, &scene),
            }
        }
    }
    // Several culls in one pass on this device.
    for variant in variants(ctx) {
        let what = format!("no subgroups, {:?}", ctx.adapter.get_info().backend);
        crate::cull_all::check_cull_all_on(ctx, variant, Tuning::default(), &what);
    }
    // The pixel splat after this device's culls.
    if let Some(&variant) = variants(ctx).first() {
        crate::splat::check_splat_on(
            ctx,
            variant,
            &format!("no subgroups, {:?}", ctx.adapter.get_info().backend),
        );
    }
    // The default picks a variant that runs, or says there is none.
    match Culler::new(&ctx.device, &ctx.queue, &CullerDesc::default()) {
        Ok(culler) => assert!(culler.variant().is_available(ctx.device.features())),
        Err(e) => assert!(
            !portable_compiled(ctx) && matches!(e, CullError::NoVariantAvailable),
            "{e}"
        ),
    }
}

/// Whether a compiled-in variant runs on this device.
fn portable_compiled(ctx: &GpuContext) -> bool {
    ScanVariant::compiled().any(|v| v.is_available(ctx.device.features()))
}

/// A Vulkan device created without `SUBGROUP`.
#[test]
fn device_without_subgroup_feature() {
    let ctx = GpuContext::new(wgpu::Backends::VULKAN, wgpu::Features::SUBGROUP)
        .expect("needs a Vulkan adapter: install mesa-vulkan-drivers");
    check_without_subgroups(&ctx);
}

/// wgpu's GL backend (llvmpipe through EGL) has no subgroups at all.
#[test]
fn gl_backend_falls_back() {
    if std::env::var_os("WGPU_BACKEND").is_some() {
        eprintln!("WGPU_BACKEND is set, which overrides the GL backend this test asks for");
    }
    let ctx = GpuContext::new(wgpu::Backends::GL, wgpu::Features::empty()).unwrap_or_else(|e| {
        panic!("needs an OpenGL ES 3.1 adapter through EGL: {e}. Install libegl-mesa0 and libgl1-mesa-dri")
    });
    eprintln!("GL backend: {}", ctx.describe());
    check_without_subgroups(&ctx);
}
