//! Instances written on the GPU by a compute pass of the application's
//! (`GpuCullComputeWrites`): what the pass writes is culled and drawn in
//! the same frame, in every variant and format, its GPU-written count
//! included; asking for cells too changes nothing.

use crate::harness::{Harness, SETTLE, harness_with_plugins, looking_down_grid};
use bevy::prelude::*;
use bevy::render::render_resource::{CachedComputePipelineId, ComputePipelineDescriptor, PipelineCache};
use bevy::render::renderer::{RenderContext, RenderGraph};
use bevy::render::{Render, RenderApp};
use bevy_gpu_cull::prelude::*;
use bevy_gpu_cull::{GpuCullInstanceBuffers, cull_core};

/// The instances the pass writes: the harness's grid moved 3 along x, its
/// first `WRITTEN` instances only (the count the pass sets), scales 0.5 to
/// 1.5, green; instance 7 with a scale outside the batch's (culled).
const WRITTEN: u32 = 1_200;
const CAPACITY: u32 = 2_000;

const PASS: &str = "#import bevy_gpu_cull::gpu_writes::{write_instance, culled_instance, set_instance_count}
@compute @workgroup_size(64)
fn write(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i == 0u { set_instance_count(1200u); }
    if i >= 1200u { return; }
    let position = vec3<f32>(f32(i % 40u) * 2.0 - 37.0, 0.0, f32(i / 40u) * -2.0);
    var scale = 0.5 + f32(i % 3u) * 0.5;
    if i == 7u { scale = 3.0; }
    // A rotation of length 2, which the write normalizes.
    let rotation = vec4<f32>(0.0, 2.0 * sin(f32(i) * 0.1), 0.0, 2.0 * cos(f32(i) * 0.1));
    write_instance(i, culled_instance(position, scale, rotation, vec4<f32>(0.0, 1.0, 0.0, 1.0)));
}";

/// The same instances on the CPU.
fn written() -> Vec<(u32, GpuCullInstance)> {
    (0..WRITTEN)
        .filter(|&i| i != 7)
        .map(|i| {
            let position = Vec3::new((i % 40) as f32 * 2.0 - 37.0, 0.0, (i / 40) as f32 * -2.0);
            let scale = 0.5 + (i % 3) as f32 * 0.5;
            let rotation = Quat::from_rotation_y(i as f32 * 0.2);
            (
                i,
                GpuCullInstance::new(position, LinearRgba::GREEN)
                    .with_scale(scale)
                    .with_rotation(rotation),
            )
        })
        .collect()
}

/// The batch the pass writes and its pipeline (render world).
#[derive(Resource, Clone)]
struct TestPass {
    /// Set once the harness has spawned it (the render app is on its own
    /// thread by then).
    batch: std::sync::Arc<std::sync::Mutex<Entity>>,
    shader: Handle<bevy::shader::Shader>,
}

#[derive(Resource)]
struct TestPipeline(CachedComputePipelineId);

fn queue_pipeline(
    mut commands: Commands,
    pass: Res<TestPass>,
    cache: Res<PipelineCache>,
    done: Option<Res<TestPipeline>>,
) {
    if done.is_some() {
        return;
    }
    let id = cache.queue_compute_pipeline(ComputePipelineDescriptor {
        label: Some("test_gpu_writes".into()),
        layout: vec![GpuCullInstanceBuffers::layout_descriptor()],
        immediate_size: 0,
        shader: pass.shader.clone(),
        shader_defs: Vec::new(),
        entry_point: Some("write".into()),
        zero_initialize_workgroup_memory: false,
    });
    commands.insert_resource(TestPipeline(id));
}

/// The application's pass, in `GpuCullSystems::WriteInstances`.
fn write_instances(
    pass: Res<TestPass>,
    pipeline: Option<Res<TestPipeline>>,
    cache: Res<PipelineCache>,
    buffers: Res<GpuCullInstanceBuffers>,
    mut ctx: RenderContext,
) {
    let Some(pipeline) = pipeline.and_then(|p| cache.get_compute_pipeline(p.0)) else {
        return;
    };
    let Some(batch) = buffers.get(*pass.batch.lock().unwrap()) else {
        return;
    };
    let mut compute = ctx.command_encoder().begin_compute_pass(&Default::default());
    compute.set_pipeline(pipeline);
    compute.set_bind_group(0, &**batch.bind_group(), &[]);
    let (x, y) = batch.workgroups(64);
    compute.dispatch_workgroups(x, y, 1);
}

/// The harness's grid, its batch written on the GPU by [`PASS`], in
/// `format`.
/// Adds the application's pass `source` (entry point `write`, one thread
/// per instance of the capacity) to `app`, for the batch set in the
/// returned cell once it is spawned.
pub(crate) fn add_test_pass(app: &mut App, source: &'static str) -> std::sync::Arc<std::sync::Mutex<Entity>> {
    let batch = std::sync::Arc::new(std::sync::Mutex::new(Entity::PLACEHOLDER));
    let shader = app
        .world_mut()
        .resource_mut::<Assets<bevy::shader::Shader>>()
        .add(bevy::shader::Shader::from_wgsl(source, "test_gpu_writes.wgsl"));
    app.sub_app_mut(RenderApp)
        .insert_resource(TestPass {
            batch: batch.clone(),
            shader,
        })
        .add_systems(Render, queue_pipeline)
        .add_systems(
            RenderGraph,
            write_instances.in_set(GpuCullSystems::WriteInstances),
        );
    batch
}

fn gpu_written(variant: Option<GpuCullScanVariant>, format: GpuCullInstanceFormat, cells: bool) -> Harness {
    let mut batch = None;
    let mut h = harness_with_plugins(
        variant,
        &[looking_down_grid()],
        crate::harness::CameraSetup::Plain,
        |app| batch = Some(add_test_pass(app, PASS)),
    );
    let batch = batch.expect("the harness adds the test's plugins");
    h.app.world_mut().resource_mut::<GpuCullSettings>().format = format;
    h.app
        .world_mut()
        .entity_mut(h.batch)
        .insert(GpuCullComputeWrites::new(CAPACITY).with_scales(0.5, 1.5));
    if cells {
        // Cells' bounds are computed on the CPU: the batch is culled flat.
        h.app.world_mut().entity_mut(h.batch).insert(GpuCullCells {
            min_skipped_bytes: Some(0),
        });
    }
    *batch.lock().unwrap() = h.batch;
    h
}

/// The CPU reference for the first camera: the written instances the
/// view's frustum keeps, tested with bounds covering the batch's scales
/// in a format without scale, as the plugin's.
fn expected(h: &mut Harness, format: GpuCullInstanceFormat) -> Option<u32> {
    let world = h.app.world_mut();
    let frustum = crate::harness::camera_frustum(world, h.cameras[0]);
    let bounds = *world.get::<GpuCullBounds>(h.batch)?;
    let mut sphere = cull_core::Sphere::new(bounds.center, bounds.radius);
    if !format.carries_scale() {
        sphere = sphere.covering_scales(0.5, 1.5).unwrap();
    }
    let instances: Vec<cull_core::Instance> = written()
        .iter()
        .map(|(_, i)| cull_core::Instance {
            position: i.position,
            rotation: i.rotation,
            scale: if format.carries_scale() { i.scale } else { 1.0 },
        })
        .collect();
    let bytes = format.encode(&instances).unwrap();
    let visible = cull_core::cpu::cull(format, &bytes, sphere, &frustum).unwrap();
    Some(visible.len() as u32)
}

/// Runs frames until the camera's count equals the reference and the
/// frame shows the GPU's green instances and none of the list's
/// red-orange ones.
fn assert_gpu_writes_drawn(h: &mut Harness, format: GpuCullInstanceFormat, what: &str) {
    let mut expected = None;
    let green = |p: &[u8]| p[1] > 60 && p[1] as u32 > p[0] as u32 + 30 && p[1] as u32 > p[2] as u32 + 30;
    let red = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30 && p[0] as u32 > p[1] as u32 + 30;
    let start = std::time::Instant::now();
    let mut last = (None, 0, 0);
    while start.elapsed() < SETTLE {
        h.app.update();
        expected = expected.or_else(|| self::expected(h, format));
        let stats = h.app.world().resource::<GpuCullStats>();
        let count = stats.visible.get(&(h.cameras[0], h.batch)).copied();
        let pixels = h.pixels.lock().unwrap().clone().unwrap_or_default();
        let rows = 0..crate::harness::HEIGHT as usize;
        let (g, r) = if pixels.is_empty() {
            (0, 0)
        } else {
            (
                crate::harness::count_pixels(&pixels, rows.clone(), green),
                crate::harness::count_pixels(&pixels, rows, red),
            )
        };
        last = (count, g, r);
        if count.is_some() && count == expected && g > 500 && r == 0 && stats.culled_frames > 3 {
            return;
        }
    }
    panic!(
        "{what}: GPU count {:?}, CPU reference {expected:?}; {} green and {} red-orange pixels",
        last.0, last.1, last.2
    );
}

#[test]
fn gpu_written_instances_and_count_are_culled_and_drawn_in_every_variant_and_format() {
    for (k, variant) in GpuCullScanVariant::compiled().enumerate() {
        let format = GpuCullInstanceFormat::ALL[k % GpuCullInstanceFormat::ALL.len()];
        let mut h = gpu_written(Some(variant), format, k % 2 == 1);
        assert_gpu_writes_drawn(&mut h, format, &format!("{variant:?}, {format:?}"));
    }
}
