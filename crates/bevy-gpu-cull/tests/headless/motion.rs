//! Per-instance motion vectors (`GpuCullMotionVectors`): the motion-vector
//! prepass of an instance moved every frame, by the CPU or by a GPU pass,
//! equals its motion on screen, and is zero for a still one under a still
//! camera; the same instance in a batch without the component has none.

use crate::harness::{CameraSetup, HEIGHT, WIDTH, harness_with_plugins};
use bevy::asset::RenderAssetUsages;
use bevy::core_pipeline::prepass::{DepthPrepass, MotionVectorPrepass, ViewPrepassTextures};
use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::prelude::*;
use bevy::render::gpu_readback::{Readback, ReadbackComplete};
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_resource::{
    BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, CachedComputePipelineId,
    ComputePipelineDescriptor, PipelineCache, ShaderStages, TextureSampleType,
    binding_types::{storage_buffer_sized, texture_2d},
};
use bevy::render::renderer::{RenderContext, ViewQuery};
use bevy::render::storage::{GpuShaderBuffer, ShaderBuffer};
use bevy::render::{Render, RenderApp};
use bevy_gpu_cull::prelude::*;
use std::sync::{Arc, Mutex};

/// World units the moving instance moves along x each frame.
const STEP: f32 = 0.02;

/// Copies the motion-vector texture into a buffer the test reads back.
const COPY: &str = "@group(0) @binding(0) var motion: texture_2d<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec2<f32>>;
@compute @workgroup_size(8, 8)
fn copy(@builtin(global_invocation_id) id: vec3<u32>) {
    let size = textureDimensions(motion);
    if id.x >= size.x || id.y >= size.y { return; }
    out[id.y * size.x + id.x] = textureLoad(motion, vec2<i32>(id.xy), 0).xy;
}";

#[derive(Resource, Clone)]
struct MotionCopy {
    shader: Handle<bevy::shader::Shader>,
    buffer: Handle<ShaderBuffer>,
}

#[derive(Resource)]
struct CopyPipeline(CachedComputePipelineId);

fn layout() -> BindGroupLayoutDescriptor {
    BindGroupLayoutDescriptor::new(
        "test_motion_copy",
        &BindGroupLayoutEntries::sequential(
            ShaderStages::COMPUTE,
            (
                texture_2d(TextureSampleType::Float { filterable: false }),
                storage_buffer_sized(false, None),
            ),
        ),
    )
}

fn queue_copy(
    mut commands: Commands,
    copy: Res<MotionCopy>,
    cache: Res<PipelineCache>,
    done: Option<Res<CopyPipeline>>,
) {
    if done.is_some() {
        return;
    }
    let id = cache.queue_compute_pipeline(ComputePipelineDescriptor {
        label: Some("test_motion_copy".into()),
        layout: vec![layout()],
        immediate_size: 0,
        shader: copy.shader.clone(),
        shader_defs: Vec::new(),
        entry_point: Some("copy".into()),
        zero_initialize_workgroup_memory: false,
    });
    commands.insert_resource(CopyPipeline(id));
}

/// After the prepass: the view's motion vectors into the buffer.
fn copy_motion(
    view: ViewQuery<&ViewPrepassTextures>,
    copy: Res<MotionCopy>,
    pipeline: Option<Res<CopyPipeline>>,
    cache: Res<PipelineCache>,
    buffers: Res<RenderAssets<GpuShaderBuffer>>,
    mut ctx: RenderContext,
) {
    let textures = view.into_inner();
    let (Some(pipeline), Some(motion), Some(buffer)) = (
        pipeline.as_ref().and_then(|p| cache.get_compute_pipeline(p.0)),
        textures.motion_vectors.as_ref(),
        buffers.get(&copy.buffer),
    ) else {
        return;
    };
    let layout = cache.get_bind_group_layout(&layout());
    let bind_group = ctx.render_device().create_bind_group(
        "test_motion_copy",
        &layout,
        &BindGroupEntries::sequential((&motion.texture.default_view, buffer.buffer.as_entire_binding())),
    );
    let mut compute = ctx.command_encoder().begin_compute_pass(&Default::default());
    compute.set_pipeline(pipeline);
    compute.set_bind_group(0, &*bind_group, &[]);
    compute.dispatch_workgroups(WIDTH.div_ceil(8), HEIGHT.div_ceil(8), 1);
}

/// A GPU pass that moves instance 1 `STEP` along x each frame.
const GPU_MOVE: &str = "#import bevy_gpu_cull::gpu_writes::{read_instance, write_instance}
@compute @workgroup_size(64)
fn write(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x != 0u || id.y != 0u { return; }
    var moving = read_instance(1u);
    moving.position_scale.x += 0.02;
    write_instance(1u, moving);
}";

/// Who moves the instance.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mover {
    Cpu,
    Gpu,
}

/// Whether the instance moves yet: from when the pipelines are ready, so
/// that it is still in view however long they take to compile.
#[derive(Resource, Clone, Default)]
struct Moving(Arc<std::sync::atomic::AtomicBool>);

/// Moves instance 1 of every batch `STEP` along x each frame, once
/// [`Moving`].
fn move_instance(moving: Res<Moving>, mut batches: Query<&mut GpuCullInstances>) {
    if !moving.0.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    for mut batch in &mut batches {
        let mut moving = batch.instances()[1];
        moving.position.x += STEP;
        batch.set(1, moving);
    }
}

/// The motion (in UV units, as Bevy's prepass writes it) of a point
/// moving from `from` to `to` under the still camera.
fn uv_motion(clip_from_world: Mat4, from: Vec3, to: Vec3) -> Vec2 {
    let ndc = |p: Vec3| clip_from_world.project_point3(p).truncate();
    (ndc(to) - ndc(from)) * Vec2::new(0.5, -0.5)
}

/// The motion read back for the pixels of the left and right halves that
/// move at all, and every pixel's largest motion in the left half.
fn read_motion(mover: Mover, with_motion_vectors: bool) -> (Vec<Vec2>, f32, Mat4) {
    let camera = Transform::from_xyz(0.0, 0.0, 6.0).looking_at(Vec3::ZERO, Vec3::Y);
    let mut pass = None;
    let mut h = harness_with_plugins(None, &[camera], CameraSetup::PlainSynchronous, |app| {
        if mover == Mover::Gpu {
            pass = Some(crate::gpu_writes::add_test_pass(app, GPU_MOVE));
        }
    });
    if pass.is_some() {
        h.app
            .world_mut()
            .entity_mut(h.batch)
            .insert(GpuCullComputeWrites::new(2));
    }
    let world = h.app.world_mut();
    world
        .entity_mut(h.cameras[0])
        .insert((DepthPrepass, MotionVectorPrepass));
    let still = GpuCullInstance::new(Vec3::new(-2.5, 0.0, 0.0), LinearRgba::RED);
    let moving = GpuCullInstance::new(Vec3::new(1.0, 0.0, 0.0), LinearRgba::RED);
    world
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .replace(vec![still, moving]);
    if with_motion_vectors {
        world.entity_mut(h.batch).insert(GpuCullMotionVectors);
    }
    let shader = world
        .resource_mut::<Assets<bevy::shader::Shader>>()
        .add(bevy::shader::Shader::from_wgsl(COPY, "test_motion_copy.wgsl"));
    let mut buffer = ShaderBuffer::with_size((WIDTH * HEIGHT * 8) as usize, RenderAssetUsages::RENDER_WORLD);
    buffer.buffer_description.usage |= wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::STORAGE;
    let buffer = world.resource_mut::<Assets<ShaderBuffer>>().add(buffer);
    let read: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    let sink = read.clone();
    world
        .spawn(Readback::buffer(buffer.clone()))
        .observe(move |event: On<ReadbackComplete>| *sink.lock().unwrap() = Some(event.data.clone()));
    let moving = Moving::default();
    if mover == Mover::Cpu {
        h.app
            .insert_resource(moving.clone())
            .add_systems(Update, move_instance);
    }
    h.app
        .sub_app_mut(RenderApp)
        .insert_resource(MotionCopy { shader, buffer })
        .add_systems(Render, queue_copy)
        .add_systems(
            Core3d,
            copy_motion
                .after(Core3dSystems::Prepass)
                .before(Core3dSystems::MainPass),
        );
    // Frames until pipelines settle, the instance moves (from then on: the
    // CPU's system or the GPU pass, once given the batch) and the readback
    // holds some frames of its motion (or a generous number of frames).
    let mut motion = Vec::new();
    let mut moving_from = None;
    for frame in 0..400 {
        h.app.update();
        let idle = h
            .app
            .world()
            .resource::<crate::common::PipelinesIdle>()
            .0
            .load(std::sync::atomic::Ordering::Relaxed);
        if idle > 0 && moving_from.is_none() {
            moving_from = Some(frame);
            moving.0.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(pass) = &pass {
                *pass.lock().unwrap() = h.batch;
            }
        }
        let Some(bytes) = read.lock().unwrap().clone() else {
            continue;
        };
        motion = bytemuck::pod_collect_to_vec::<u8, [f32; 2]>(&bytes)
            .into_iter()
            .map(Vec2::from)
            .collect();
        if idle > 5 && frame > 30 && moving_from.is_some_and(|from| frame > from + 8) {
            break;
        }
    }
    let world = h.app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, h.cameras[0])
        .unwrap();
    let clip_from_world = cam.clip_from_view() * transform.to_matrix().inverse();
    let left_max = (0..HEIGHT as usize)
        .flat_map(|y| (0..WIDTH as usize / 2).map(move |x| y * WIDTH as usize + x))
        .map(|i| motion.get(i).map_or(f32::NAN, |m| m.length()))
        .fold(0.0f32, f32::max);
    let right: Vec<Vec2> = (0..HEIGHT as usize)
        .flat_map(|y| (WIDTH as usize / 2..WIDTH as usize).map(move |x| y * WIDTH as usize + x))
        .filter_map(|i| motion.get(i).copied())
        .filter(|m| m.length() > 0.0)
        .collect();
    (right, left_max, clip_from_world)
}

#[test]
fn a_moving_instance_has_its_own_motion_vectors_and_a_still_one_none() {
    for mover in [Mover::Cpu, Mover::Gpu] {
        assert_own_motion(mover);
    }
    // Without GpuCullMotionVectors the moving instance has no motion of its
    // own: the test sees the difference.
    let (right, _, _) = read_motion(Mover::Cpu, false);
    assert!(
        right.is_empty(),
        "{} pixels move without the component",
        right.len()
    );
}

fn assert_own_motion(mover: Mover) {
    let (right, left_max, clip_from_world) = read_motion(mover, true);
    // The instance's center moved STEP along x since last frame; its
    // surface's points are up to its radius (0.5) nearer or farther than
    // its center, 6 from the camera, so their motion on screen differs
    // from the center's by up to 0.5 / 5.5: 9%, plus Rg16Float's rounding.
    let center = Vec3::new(1.0, 0.0, 0.0);
    let expected = uv_motion(clip_from_world, center, center + Vec3::X * STEP);
    assert!(
        right.len() > 30,
        "{mover:?}: only {} pixels of the moving instance move",
        right.len()
    );
    for m in &right {
        assert!(
            (*m - expected).length() <= 0.1 * expected.length() + 1.0e-4,
            "{mover:?}: a pixel of the moving instance moves {m}, its center {expected}"
        );
    }
    assert!(
        left_max < 1.0e-6,
        "{mover:?}: the still instance moves {left_max}"
    );
}
