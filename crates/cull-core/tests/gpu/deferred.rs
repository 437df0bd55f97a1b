//! A renderer that compiles the kernels itself (as the Bevy plugin does
//! through Bevy's pipeline cache): `Culler::deferred` compiles nothing, its
//! `recipe` is composed here with naga_oil against `shader::library()`, the
//! pipelines are handed over with `provide_pipelines`, and the culls are the
//! same exact sets as a culler that compiles its own.

use crate::harness::{self, Camera, Job};
use cull_core::GpuContext;
use cull_core::scene::Scene;
use cull_core::shader::{KernelRecipe, ShaderDefValue};
use cull_core::{
    CullError, Culler, CullerDesc, InstanceFormat, KernelSpec, OutputKind, ScanVariant, VisibilityTest,
};
use naga_oil::compose::{ComposableModuleDescriptor, Composer, NagaModuleDescriptor};

/// The general frustum kernel for one window and one view.
fn one_view() -> KernelSpec {
    KernelSpec::flat(1, 1, VisibilityTest::Frustum)
}

/// Compiles `culler.recipe(one_view())` (one window, one view) the way a renderer would.
fn compile_recipe(device: &wgpu::Device, culler: &Culler) -> Vec<wgpu::ComputePipeline> {
    compile(device, culler.recipe(one_view()))
}

/// Compiles `recipe` the way a renderer would.
fn compile(device: &wgpu::Device, recipe: KernelRecipe) -> Vec<wgpu::ComputePipeline> {
    let caps = if recipe.subgroups {
        naga::valid::Capabilities::SUBGROUP
    } else {
        naga::valid::Capabilities::empty()
    };
    let mut composer = Composer::default().with_capabilities(caps);
    for module in cull_core::shader::library() {
        composer
            .add_composable_module(ComposableModuleDescriptor {
                source: module.source,
                file_path: module.path,
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{}: {e:?}", module.path));
    }
    let shader_defs: std::collections::HashMap<String, naga_oil::compose::ShaderDefValue> = recipe
        .shader_defs
        .iter()
        .map(|&(name, value)| {
            let value = match value {
                ShaderDefValue::Bool(b) => naga_oil::compose::ShaderDefValue::Bool(b),
                ShaderDefValue::UInt(u) => naga_oil::compose::ShaderDefValue::UInt(u),
            };
            (name.to_owned(), value)
        })
        .collect();
    // Each entry module once (a pass may live in a module of its own).
    let shaders: Vec<(&str, wgpu::ShaderModule)> = recipe
        .modules()
        .into_iter()
        .map(|entry| {
            let module = composer
                .make_naga_module(NagaModuleDescriptor {
                    source: entry.source,
                    file_path: entry.path,
                    shader_defs: shader_defs.clone(),
                    ..Default::default()
                })
                .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&composer)));
            let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
                .subgroup_operations(naga::valid::SubgroupOperationSet::all())
                .validate(&module)
                .unwrap();
            let wgsl = naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
                .unwrap();
            let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("deferred-test"),
                source: wgpu::ShaderSource::Wgsl(wgsl.into()),
            });
            (entry.path, shader)
        })
        .collect();
    recipe
        .passes
        .iter()
        .map(|pass| {
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &pass.layout_entries(),
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let path = recipe.module_of(pass).path;
            let shader = &shaders
                .iter()
                .find(|(p, _)| *p == path)
                .expect("composed above")
                .1;
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(pass.entry_point),
                layout: Some(&pipeline_layout),
                module: shader,
                entry_point: Some(pass.entry_point),
                // As the recipe asks: a kernel that stages its output
                // clears its counts itself.
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: pass.zeroed_workgroup_memory,
                    ..Default::default()
                },
                cache: None,
            })
        })
        .collect()
}

/// Culls `job` (of `scene`) and checks the survivors against the CPU
/// reference as an exact set.
fn assert_culls_exactly(ctx: &GpuContext, culler: &Culler, job: &Job, scene: &Scene, what: &str) {
    job.cull(ctx, culler);
    let visible = job.target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
    let out = job.target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    let survivors = harness::survivors_as_indices(culler.format(), culler.output(), &job.bytes, &out);
    harness::assert_exact(what, &harness::reference(scene, culler.format()), &survivors);
}

/// Checks that a cull of `job` is refused with a typed error because its
/// one-window, one-view kernel was not provided (not a panic in wgpu).
fn assert_not_ready(ctx: &GpuContext, culler: &Culler, job: &Job, what: &str) {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let err = culler.cull(&mut encoder, &ctx.queue, job.request()).unwrap_err();
    assert!(
        matches!(err, CullError::PipelinesNotReady { windows: 1, views: 1 }),
        "{what}: {err}"
    );
}

/// A deferred culler's description: `variant` (no fallback), `format`,
/// index output.
fn deferred_desc(variant: ScanVariant, format: InstanceFormat) -> CullerDesc {
    CullerDesc {
        variant: Some(variant),
        allow_fallback: false,
        format,
        output: OutputKind::Indices,
        ..Default::default()
    }
}

/// Compiles the kernel `spec` names as a renderer would and hands it to
/// `culler`.
fn provide(ctx: &GpuContext, culler: &Culler, spec: KernelSpec) {
    culler
        .provide_pipelines(spec, compile(&ctx.device, culler.recipe(spec)))
        .unwrap();
}

#[test]
fn kernels_compiled_by_the_renderer_cull_exact_sets() {
    let ctx = harness::gpu();
    for variant in harness::variants(ctx) {
        let desc = CullerDesc {
            variant: Some(variant),
            allow_fallback: false,
            format: InstanceFormat::PosQuat,
            output: OutputKind::Indices,
            ..Default::default()
        };
        let culler = Culler::deferred(&ctx.device, &ctx.queue, &desc).unwrap();
        let scene = harness::edge_scene(7, 10_007, Camera::Perspective, InstanceFormat::PosQuat);
        let job = Job::new(ctx, &culler, &scene, 10_007);
        // Nothing compiled yet: a typed error, not a panic in wgpu.
        assert!(!culler.has_pipelines(one_view()));
        assert_not_ready(
            ctx,
            &culler,
            &job,
            &format!("deferred {variant:?}, nothing provided"),
        );
        // Wrong handovers are refused.
        assert!(matches!(
            culler.provide_pipelines(one_view(), Vec::new()).unwrap_err(),
            CullError::PipelineCount { got: 0, .. }
        ));
        assert!(matches!(
            culler
                .provide_pipelines(KernelSpec::flat(0, 1, VisibilityTest::Frustum), Vec::new())
                .unwrap_err(),
            CullError::InvalidParameter(_)
        ));
        culler
            .provide_pipelines(one_view(), compile_recipe(&ctx.device, &culler))
            .unwrap();
        assert!(
            culler.has_pipelines(one_view())
                && !culler.has_pipelines(KernelSpec::flat(0, 1, VisibilityTest::Frustum))
        );
        assert_culls_exactly(ctx, &culler, &job, &scene, &format!("deferred {variant:?}"));
        assert!(ScanVariant::compiled().any(|v| v == culler.variant()));
        // A mesh centred on its origin: a culler that compiles its own
        // kernels would pick the kernel without the rotation; this one has
        // only the general kernel, whose uniform branch skips it.
        let scene = harness::edge_scene_centred(8, 10_007, Camera::Perspective, InstanceFormat::PosQuat);
        let job = Job::new(ctx, &culler, &scene, 10_007);
        assert_culls_exactly(
            ctx,
            &culler,
            &job,
            &scene,
            &format!("deferred {variant:?}, centred"),
        );
    }
}

/// The kernel for plain views, compiled by the renderer
/// (`KernelSpec::for_plain_views`: no sixth plane, no size band): a deferred
/// culler given only that kernel culls a five-plane view with it (exact
/// sets, for a mesh off its origin and, through its centred form, one
/// centred on it), and refuses with a typed error the views it would cull
/// wrongly, a sixth plane's or a band's, rather than take it for them. With
/// `Tuning::plain_views` off it takes the plain kernel for no view.
#[test]
fn plain_kernel_compiled_by_the_renderer_culls_only_plain_views() {
    let ctx = harness::gpu();
    let general = KernelSpec::flat(1, 1, VisibilityTest::Frustum);
    let plain = general.for_plain_views();
    for variant in harness::variants(ctx) {
        let format = InstanceFormat::Packed16;
        let desc = deferred_desc(variant, format);
        let culler = Culler::deferred(&ctx.device, &ctx.queue, &desc).unwrap();
        let what = format!("deferred plain kernel, {variant:?}");
        assert!(culler.takes_plain_form(1), "{what}");
        assert_ne!(
            culler.recipe(plain).shader_defs,
            culler.recipe(general).shader_defs,
            "{what}"
        );
        for spec in [plain, plain.for_centred_meshes()] {
            provide(ctx, &culler, spec);
        }
        assert!(
            culler.has_pipelines(plain) && !culler.has_pipelines(general),
            "{what}"
        );
        // Five planes (an infinite reverse-Z camera), no band.
        for centred in [false, true] {
            let scene = if centred {
                harness::edge_scene_centred(12, 4_099, Camera::InfiniteReverseZ, format)
            } else {
                harness::edge_scene(12, 4_099, Camera::InfiniteReverseZ, format)
            };
            assert_eq!(scene.frustum().unwrap().planes().len(), 5);
            let job = Job::new(ctx, &culler, &scene, 4_099);
            assert_culls_exactly(ctx, &culler, &job, &scene, &format!("{what}, centred: {centred}"));
        }
        // A sixth plane (a finite far plane) needs the general kernel.
        let scene = harness::edge_scene(12, 4_099, Camera::Perspective, format);
        assert_eq!(scene.frustum().unwrap().planes().len(), 6);
        let job = Job::new(ctx, &culler, &scene, 4_099);
        assert_not_ready(ctx, &culler, &job, &format!("{what}, six planes"));
        // So does a view with a size band.
        let scene = harness::edge_scene(12, 4_099, Camera::InfiniteReverseZ, format);
        let mut job = Job::new(ctx, &culler, &scene, 4_099);
        job.frustum = harness::test_levels(&job.frustum).remove(1);
        assert!(job.frustum.size_band.is_some());
        assert_not_ready(ctx, &culler, &job, &format!("{what}, a band"));
        // Turned off, the plain form is never taken.
        let off = CullerDesc {
            tuning: cull_core::Tuning {
                plain_views: Some(false),
                ..Default::default()
            },
            ..desc
        };
        let culler = Culler::deferred(&ctx.device, &ctx.queue, &off).unwrap();
        assert!(!culler.takes_plain_form(1));
        provide(ctx, &culler, plain);
        let job = Job::new(ctx, &culler, &scene, 4_099);
        assert_not_ready(ctx, &culler, &job, &format!("{what}, turned off"));
    }
}

/// The kernel for meshes centred on their origin, compiled by the renderer
/// (`KernelSpec::for_centred_meshes`): a deferred culler given only that
/// kernel culls a centred mesh with it (exact sets; the general kernel is
/// not there to fall back on) and refuses an off-centre one with a typed
/// error. A format without that form names its general kernel.
#[test]
fn centred_kernel_compiled_by_the_renderer_culls_centred_meshes() {
    let ctx = harness::gpu();
    let general = KernelSpec::flat(1, 1, VisibilityTest::Frustum);
    let centred = general.for_centred_meshes();
    for variant in harness::variants(ctx) {
        for format in [InstanceFormat::PosQuat, InstanceFormat::Packed16] {
            assert!(format.has_centred_form());
            let desc = deferred_desc(variant, format);
            let culler = Culler::deferred(&ctx.device, &ctx.queue, &desc).unwrap();
            let what = format!("deferred centred kernel, {variant:?}, {format:?}");
            assert_ne!(
                culler.recipe(centred).shader_defs,
                culler.recipe(general).shader_defs,
                "{what}"
            );
            provide(ctx, &culler, centred);
            assert!(
                culler.has_pipelines(centred) && !culler.has_pipelines(general),
                "{what}"
            );
            let scene = harness::edge_scene_centred(9, 4_099, Camera::Perspective, format);
            let job = Job::new(ctx, &culler, &scene, 4_099);
            assert_culls_exactly(ctx, &culler, &job, &scene, &what);
            // An off-centre mesh needs the general kernel, not provided.
            let scene = harness::edge_scene(9, 4_099, Camera::Perspective, format);
            let job = Job::new(ctx, &culler, &scene, 4_099);
            assert_not_ready(ctx, &culler, &job, &what);
        }
    }
    // Levels of detail of one camera take their own kernel (the frustum
    // tested once per instance); given only its centred form, a deferred
    // culler culls a centred mesh's levels with it.
    let desc = CullerDesc {
        format: InstanceFormat::PosQuat,
        output: OutputKind::Indices,
        max_views: 4,
        ..Default::default()
    };
    let culler = Culler::deferred(&ctx.device, &ctx.queue, &desc).unwrap();
    let scene = harness::edge_scene_centred(10, 4_099, Camera::Perspective, InstanceFormat::PosQuat);
    let levels = harness::test_levels(&scene.frustum().unwrap());
    assert_eq!(VisibilityTest::for_views(&levels), VisibilityTest::DetailLevels);
    let windows = culler.windows_for(4_099, 4).unwrap();
    let spec = KernelSpec::flat(windows, 4, VisibilityTest::DetailLevels).for_centred_meshes();
    provide(ctx, &culler, spec);
    let survivors = harness::run_views(ctx, &culler, &scene, &levels, 4_099, 4);
    harness::assert_views_exact(
        "deferred centred levels kernel",
        &culler,
        &scene,
        &levels,
        &survivors,
    );
    // The matrix format has no centred form: its spec names the general kernel.
    let desc = CullerDesc {
        format: InstanceFormat::Matrix,
        ..Default::default()
    };
    let culler = Culler::deferred(&ctx.device, &ctx.queue, &desc).unwrap();
    assert!(!InstanceFormat::Matrix.has_centred_form());
    assert_eq!(
        culler.recipe(centred).shader_defs,
        culler.recipe(general).shader_defs
    );
    culler
        .provide_pipelines(one_view(), compile_recipe(&ctx.device, &culler))
        .unwrap();
    assert!(culler.has_pipelines(centred));
}
