//! A flock simulated on the GPU and drawn culled: each frame a compute pass
//! of the example's own (`shaders/boids.wgsl`) steers every boid and writes
//! it into a batch with `GpuCullComputeWrites`; the plugin culls and draws
//! what the pass wrote in the same frame. The CPU never sees a boid. Each
//! boid gets its own motion vectors (`GpuCullMotionVectors`).
//!
//! ```text
//! cargo run --release --example boids
//! cargo run --release --example boids -- --count 1e6
//! cargo run --release --example boids -- --headless --frames 60 --screenshot boids.png
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::prelude::*;
use bevy::render::RenderApp;
use bevy::render::extract_resource::{ExtractResource, ExtractResourcePlugin};
use bevy::render::render_resource::binding_types::{
    storage_buffer_read_only_sized, storage_buffer_sized, uniform_buffer_sized,
};
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, Buffer,
    BufferInitDescriptor, BufferUsages, CachedComputePipelineId, ComputePipelineDescriptor, PipelineCache,
    ShaderStages,
};
use bevy::render::renderer::{RenderContext, RenderDevice, RenderGraph, RenderQueue};
use bevy::shader::Shader;
use bevy_gpu_cull::prelude::*;

/// The flock's step, compiled into the example.
const BOIDS_SHADER: Handle<Shader> = bevy::asset::uuid_handle!("4b1f7e2a-9c3d-4e8f-a6b5-1d2c3e4f5a6b");

type Args = support::SceneArgs;

/// The flock, in both worlds: the batch the boids are written into and
/// their number.
#[derive(Resource, Clone, ExtractResource)]
struct Flock {
    batch: Entity,
    count: u32,
}

/// A flock simulated on the GPU (a compute pass of the example's own) and drawn culled.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// boids in the flock (default 50000; 1e6 works)
    #[argh(option, default = "50_000", from_str_fn(support::parse_count))]
    count: usize,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless (default 60)
    #[argh(option, default = "60")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

fn main() {
    let flags: Flags = argh::from_env();
    let mut app = support::example_app("boids", &support::scene_args!(flags));
    let wgsl = include_str!("shaders/boids.wgsl");
    support::embed_shader(&mut app, BOIDS_SHADER, wgsl, "shaders/boids.wgsl");
    app.add_plugins((
        GpuCullPlugin::default(),
        ExtractResourcePlugin::<Flock>::default(),
    ))
    .insert_resource(ClearColor(Color::srgb(0.01, 0.01, 0.03)))
    .add_systems(Startup, setup)
    .add_systems(Update, support::finish_headless);
    app.sub_app_mut(RenderApp)
        .add_systems(RenderGraph, step_flock.in_set(GpuCullSystems::WriteInstances));
    app.run();
}

fn setup(
    mut commands: Commands,
    args: Res<Args>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let count = args.count as u32;
    // An empty list: every boid is written on the GPU.
    let batch = commands
        .spawn((
            Mesh3d(meshes.add(Cone::new(0.25, 0.9))),
            MeshMaterial3d(materials.add(StandardMaterial {
                perceptual_roughness: 0.6,
                ..default()
            })),
            GpuCullInstances::default(),
            GpuCullComputeWrites::new(count),
            GpuCullMotionVectors,
        ))
        .id();
    commands.insert_resource(Flock { batch, count });
    commands.spawn((
        DirectionalLight {
            illuminance: 6_000.0,
            ..default()
        },
        Transform::from_xyz(2.0, 10.0, 4.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn((
        Camera3d::default(),
        Transform::from_xyz(0.0, 25.0, 70.0).looking_at(Vec3::new(0.0, 6.0, 0.0), Vec3::Y),
    ));
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The boids' state on the GPU (render world), made on the first frame
/// that has the flock.
#[derive(Resource)]
struct FlockGpu {
    pipeline: CachedComputePipelineId,
    uniform: Buffer,
    /// Frame `f` reads state `f % 2` and writes the other.
    bind_groups: [BindGroup; 2],
    frame: u32,
}

fn flock_layout() -> BindGroupLayoutDescriptor {
    BindGroupLayoutDescriptor::new(
        "boids",
        &BindGroupLayoutEntries::sequential(
            ShaderStages::COMPUTE,
            (
                storage_buffer_read_only_sized(false, None),
                storage_buffer_sized(false, None),
                uniform_buffer_sized(false, None),
            ),
        ),
    )
}

impl FlockGpu {
    /// `count` boids scattered in a ball, flying outwards, and the step's pipeline.
    fn new(count: u32, device: &RenderDevice, cache: &PipelineCache) -> Self {
        let hash = |n: u32| {
            let mut x = n.wrapping_mul(0x9E37_79B9) ^ 0x85EB_CA6B;
            x ^= x >> 16;
            x = x.wrapping_mul(0x7FEB_352D);
            x ^= x >> 15;
            x as f32 / u32::MAX as f32 * 2.0 - 1.0
        };
        let state: Vec<[f32; 8]> = (0..count.max(1))
            .map(|i| {
                let p = Vec3::new(hash(4 * i), hash(4 * i + 1), hash(4 * i + 2)) * 25.0;
                let v = p.normalize_or(Vec3::X) * 4.0;
                [p.x, p.y + 8.0, p.z, 1.0, v.x, v.y, v.z, 0.0]
            })
            .collect();
        let states: [Buffer; 2] = std::array::from_fn(|_| {
            device.create_buffer_with_data(&BufferInitDescriptor {
                label: Some("boids_state"),
                contents: bytemuck::cast_slice(&state),
                usage: BufferUsages::STORAGE,
            })
        });
        let uniform = device.create_buffer_with_data(&BufferInitDescriptor {
            label: Some("boids_flock"),
            contents: &[0; 16],
            usage: BufferUsages::UNIFORM | BufferUsages::COPY_DST,
        });
        let layout = cache.get_bind_group_layout(&flock_layout());
        let bind_groups = std::array::from_fn(|k| {
            device.create_bind_group(
                "boids",
                &layout,
                &BindGroupEntries::sequential((
                    states[k].as_entire_binding(),
                    states[1 - k].as_entire_binding(),
                    uniform.as_entire_binding(),
                )),
            )
        });
        let pipeline = cache.queue_compute_pipeline(ComputePipelineDescriptor {
            label: Some("boids_step".into()),
            layout: vec![GpuCullInstanceBuffers::layout_descriptor(), flock_layout()],
            immediate_size: 0,
            shader: BOIDS_SHADER,
            shader_defs: Vec::new(),
            entry_point: Some("step".into()),
            zero_initialize_workgroup_memory: false,
        });
        Self {
            pipeline,
            uniform,
            bind_groups,
            frame: 0,
        }
    }
}

/// One step of the flock, written into the batch: the application's pass
/// in `GpuCullSystems::WriteInstances`, before every cull.
fn step_flock(
    flock: Option<Res<Flock>>,
    mut gpu: Option<ResMut<FlockGpu>>,
    mut commands: Commands,
    buffers: Res<GpuCullInstanceBuffers>,
    cache: Res<PipelineCache>,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    mut ctx: RenderContext,
) {
    let Some(flock) = flock else {
        return;
    };
    let Some(gpu) = gpu.as_deref_mut() else {
        commands.insert_resource(FlockGpu::new(flock.count, &device, &cache));
        return;
    };
    let (Some(pipeline), Some(batch)) = (cache.get_compute_pipeline(gpu.pipeline), buffers.get(flock.batch))
    else {
        return;
    };
    // A fixed step, so that a headless run draws the same flock anywhere.
    let dt = 1.0 / 60.0;
    let uniform = [
        flock.count,
        gpu.frame,
        f32::to_bits(dt),
        f32::to_bits(gpu.frame as f32 * dt),
    ];
    queue.write_buffer(&gpu.uniform, 0, bytemuck::cast_slice(&uniform));
    let mut pass = ctx.command_encoder().begin_compute_pass(&Default::default());
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, &**batch.bind_group(), &[]);
    pass.set_bind_group(1, &*gpu.bind_groups[(gpu.frame % 2) as usize], &[]);
    let (x, y) = batch.workgroups(64);
    pass.dispatch_workgroups(x, y, 1);
    gpu.frame += 1;
}
