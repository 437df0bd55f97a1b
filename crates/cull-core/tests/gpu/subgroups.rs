//! The subgroup variants at subgroup sizes 4, 8 and 16: lavapipe's width
//! follows LP_NATIVE_VECTOR_WIDTH (128, 256, 512 bits), read when the driver
//! loads, so each width other than this process's own runs this test
//! binary again in a child process (`subgroup_variants_at_this_width` runs
//! the process's own, with every format; a child turns one format per form).

use crate::harness::*;
use cull_core::{InstanceFormat, OutputKind, ScanVariant, Tuning};

const EXPECT_VAR: &str = "CULL_CORE_EXPECT_SUBGROUP_SIZE";

/// The subgroup size the device really uses in a compute shader.
fn measured_subgroup_size(ctx: &cull_core::GpuContext) -> u32 {
    let src = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(64) fn main(@builtin(subgroup_size) s: u32, @builtin(local_invocation_index) i: u32) {
            if i == 0u { out[0] = s; }
        }";
    let device = &ctx.device;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buffer.as_entire_binding(),
        }],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    ctx.queue.submit([encoder.finish()]);
    let bytes = cull_core::read_back(device, &ctx.queue, &buffer, 0, 4).unwrap();
    bytemuck::pod_read_unaligned(&bytes)
}

/// Runs in each child (and once on its own at the default width).
#[test]
fn subgroup_variants_at_this_width() {
    let ctx = gpu();
    assert!(
        ctx.device.features().contains(wgpu::Features::SUBGROUP),
        "the adapter has no subgroups; lavapipe has them: is mesa-vulkan-drivers installed?"
    );
    let size = measured_subgroup_size(ctx);
    eprintln!("subgroup size {size}");
    if let Ok(expected) = std::env::var(EXPECT_VAR) {
        assert_eq!(
            size.to_string(),
            expected,
            "LP_NATIVE_VECTOR_WIDTH did not give the expected subgroup size"
        );
    }
    // The ordered variant in both forms: its subgroup form scans with
    // ballots, and its workgroup form's look-back runs under the same
    // driver scheduling. Its output must also be in index order.
    let forms = [
        (ScanVariant::SubgroupBallot, Tuning::default()),
        (ScanVariant::SubgroupShuffle, Tuning::default()),
        (ScanVariant::Ordered, Tuning::default()),
        (ScanVariant::Ordered, workgroup_scan()),
        (ScanVariant::OrderedTwoPass, Tuning::default()),
        (ScanVariant::OrderedTwoPass, workgroup_scan()),
    ];
    #[cfg(feature = "subgroup-ballot")]
    ballot_row_writes_at_this_width(ctx, size);
    let pyramids = cull_core::PyramidBuilder::new(&ctx.device).unwrap();
    // At a width set from outside (a child of subgroup_sizes_4_8_16), each
    // form culls one format, turning with the form, so that every format
    // still meets every width and every form (the formats read instances;
    // the widths change only the scans); the process's own width culls
    // every form with every format. GPU_CULL_FULL_MATRIX runs all of them
    // at every width.
    let width_from_outside = std::env::var_os(EXPECT_VAR).is_some();
    for (i, (variant, tuning)) in forms.into_iter().enumerate() {
        if !variant.is_compiled() {
            continue;
        }
        let formats = if width_from_outside {
            formats_turning(i, OutputKind::Indices)
        } else {
            InstanceFormat::ALL.to_vec()
        };
        for format in formats {
            // Several views in one pass at this width too.
            let many = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 5);
            for n in [255usize, 4099] {
                let scene = edge_scene(n as u64 + 3, n, Camera::Perspective, format);
                let frusta = view_frusta(&scene, 11, 5);
                let survivors = run_views(ctx, &many, &scene, &frusta, n as u32, 5);
                let what = format!("{variant:?} ({}) {format:?} sg={size} n={n}", form_name(&many));
                assert_views_exact(&what, &many, &scene, &frusta, &survivors);
                // Levels of detail (views with size bands) at this width.
                let levels = test_levels(&frusta[0]);
                let survivors = run_views(ctx, &many, &scene, &levels, n as u32, 5);
                assert_views_exact(&format!("{what} levels"), &many, &scene, &levels, &survivors);
                // Both phases of occlusion culling, one view and four levels.
                for with_levels in [false, true] {
                    let what = format!("{what} occlusion levels={with_levels}");
                    crate::occlusion::two_frames(
                        ctx,
                        &many,
                        Some(&pyramids),
                        &scene,
                        Camera::Perspective,
                        with_levels,
                        &what,
                    );
                }
            }
            // By cells at this width (the subgroup variants cull cells).
            {
                for n in [255usize, 4099] {
                    let scene = edge_scene(n as u64 + 5, n, Camera::Perspective, format);
                    let (scene, layout) = crate::cells::sorted(&scene, &many);
                    let frusta = view_frusta(&scene, 13, 3);
                    let (survivors, _) =
                        crate::cells::run_cells(ctx, &many, &scene, &layout, &frusta, n as u32, 5);
                    let what = format!("{variant:?} {format:?} sg={size} n={n} by cells");
                    assert_views_exact(&what, &many, &scene, &frusta, &survivors);
                }
                // Whole cells (kept untested) beside straddling ones.
                crate::cells::check_whole_cells(ctx, &many, 5, &format!("{variant:?} {format:?} sg={size}"));
            }
            if format == InstanceFormat::PosQuat {
                // Several culls in one pass at this width.
                crate::cull_all::check_cull_all_on(ctx, variant, tuning, &format!("sg={size}"));
            }
            let culler = culler(ctx, variant, format, OutputKind::Indices, tuning);
            let what = format!(
                "{variant:?} (subgroups: {}) {format:?} sg={size}",
                culler.uses_subgroups()
            );
            for (s, n) in [1usize, 3, 255, 257, 4099, 65_537].into_iter().enumerate() {
                let scene = edge_scene(s as u64 + 17, n, Camera::InfiniteReverseZ, format);
                let survivors = run(ctx, &culler, &scene, n as u32);
                assert_exact(&format!("{what} n={n}"), &reference(&scene, format), &survivors);
                if variant.preserves_order() {
                    assert!(
                        survivors.windows(2).all(|w| w[0] < w[1]),
                        "{what} n={n}: out of order"
                    );
                }
            }
            // A mesh centred on its origin takes a kernel of its own.
            for n in [0usize, 1, 4099] {
                let scene = edge_scene_centred(n as u64 + 23, n, Camera::InfiniteReverseZ, format);
                let survivors = run(ctx, &culler, &scene, (n as u32).max(1));
                assert_exact(
                    &format!("{what} n={n}, centred"),
                    &reference(&scene, format),
                    &survivors,
                );
            }
        }
    }
}

#[test]
fn subgroup_sizes_4_8_16() {
    let ctx = gpu();
    if !is_lavapipe(ctx) {
        // A real GPU's subgroup size cannot be chosen from outside: the
        // native one is tested by subgroup_variants_at_this_width.
        eprintln!(
            "subgroup sizes 4/8/16 are set through lavapipe; on {} only the native size ({}) is tested, by subgroup_variants_at_this_width",
            ctx.describe(),
            measured_subgroup_size(ctx)
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // This process's own width is run by subgroup_variants_at_this_width
    // itself.
    let native = measured_subgroup_size(ctx);
    // The children run at once: each compiles its own kernels (a width is
    // a kernel of its own to lavapipe) on one thread.
    let children: Vec<_> = [("128", 4), ("256", 8), ("512", 16)]
        .into_iter()
        .filter(|&(_, s)| s != native)
        .map(|(width, size)| {
            let child = std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "subgroups::subgroup_variants_at_this_width",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("LP_NATIVE_VECTOR_WIDTH", width)
                .env(EXPECT_VAR, size.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (width, child)
        })
        .collect();
    for (width, child) in children {
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "width {width}:\n{text}");
        assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
    }
}

/// SubgroupBallot writing dense rows of wide instance copies together
/// (`Tuning::row_writes`), at the subgroup width this process has
/// (subgroup_variants_at_this_width calls it, so it runs at 4, 8 and 16):
/// exact sets of instance copies for every format, with one view and with
/// three, with about all, half and a quarter of the instances visible
/// (rows dense, mixed and sparse), at sizes 0 and 1 and sizes that leave
/// partial rows and tiles.
#[cfg(feature = "subgroup-ballot")]
fn ballot_row_writes_at_this_width(ctx: &cull_core::GpuContext, size: u32) {
    let tuning = Tuning {
        row_writes: Some(true),
        ..Default::default()
    };
    for format in InstanceFormat::ALL {
        let one = culler(
            ctx,
            ScanVariant::SubgroupBallot,
            format,
            OutputKind::Instances,
            tuning,
        );
        let three = views_culler(
            ctx,
            ScanVariant::SubgroupBallot,
            format,
            OutputKind::Instances,
            tuning,
            3,
        );
        for (seed, visible) in [(1u64, 1.0f32), (2, 0.5), (3, 0.25)] {
            for n in [0usize, 1, 31, 257, 4099] {
                let scene = cull_core::scene::Scene::random(
                    seed + n as u64,
                    n,
                    Camera::InfiniteReverseZ,
                    Some(visible),
                )
                .fit(format);
                let what = format!("row writes {format:?} sg={size} n={n} visible~{visible}");
                // A target holds at least one survivor (ZeroCapacity).
                let capacity = (n as u32).max(1);
                let survivors = run(ctx, &one, &scene, capacity);
                assert_exact(&what, &reference(&scene, format), &survivors);
                let frusta = view_frusta(&scene, seed + 7, 3);
                let survivors = run_views(ctx, &three, &scene, &frusta, capacity, 3);
                assert_views_exact(
                    &format!("{what} three views"),
                    &three,
                    &scene,
                    &frusta,
                    &survivors,
                );
            }
        }
    }
}
