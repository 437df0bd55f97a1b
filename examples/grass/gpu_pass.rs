//! The example's own compute pass (render world): places and sways every
//! blade into the batch's instance buffer, in
//! `GpuCullSystems::WriteInstances`, before the plugin culls them.

use super::blades::{SPACING, STEP};
use super::{Field, GRASS_SHADER, Mode};
use bevy::prelude::*;
use bevy::render::render_resource::binding_types::uniform_buffer_sized;
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, Buffer,
    BufferInitDescriptor, BufferUsages, CachedComputePipelineId, ComputePipelineDescriptor, PipelineCache,
    ShaderStages,
};
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue};
use bevy_gpu_cull::prelude::*;

/// The pass's uniform and pipeline (render world).
#[derive(Resource)]
pub(crate) struct GrassGpu {
    pipeline: CachedComputePipelineId,
    uniform: Buffer,
    bind_group: BindGroup,
    frame: u32,
    /// Frames the pass has written the field.
    writes: u32,
}

fn field_layout() -> BindGroupLayoutDescriptor {
    BindGroupLayoutDescriptor::new(
        "grass",
        &BindGroupLayoutEntries::single(ShaderStages::COMPUTE, uniform_buffer_sized(false, None)),
    )
}

impl GrassGpu {
    fn new(device: &RenderDevice, cache: &PipelineCache) -> Self {
        let uniform = device.create_buffer_with_data(&BufferInitDescriptor {
            label: Some("grass_field"),
            contents: &[0; 16],
            usage: BufferUsages::UNIFORM | BufferUsages::COPY_DST,
        });
        let layout = cache.get_bind_group_layout(&field_layout());
        let bind_group = device.create_bind_group(
            "grass",
            &layout,
            &BindGroupEntries::single(uniform.as_entire_binding()),
        );
        let pipeline = cache.queue_compute_pipeline(ComputePipelineDescriptor {
            label: Some("grass_sway".into()),
            layout: vec![GpuCullInstanceBuffers::layout_descriptor(), field_layout()],
            immediate_size: 0,
            shader: GRASS_SHADER,
            shader_defs: Vec::new(),
            entry_point: Some("sway".into()),
            zero_initialize_workgroup_memory: false,
        });
        Self {
            pipeline,
            uniform,
            bind_group,
            frame: 0,
            writes: 0,
        }
    }
}

/// Places and sways every blade: the application's pass in
/// `GpuCullSystems::WriteInstances`, before every cull. `--mode static`
/// writes the field a few times, then never again.
pub fn sway_on_gpu(
    field: Option<Res<Field>>,
    mut gpu: Option<ResMut<GrassGpu>>,
    mut commands: Commands,
    buffers: Res<GpuCullInstanceBuffers>,
    cache: Res<PipelineCache>,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    mut ctx: RenderContext,
) {
    let Some(field) = field.filter(|f| matches!(f.mode, Mode::Gpu | Mode::Static)) else {
        return;
    };
    let Some(gpu) = gpu.as_deref_mut() else {
        commands.insert_resource(GrassGpu::new(&device, &cache));
        return;
    };
    gpu.frame += 1;
    let (Some(pipeline), Some(batch)) = (cache.get_compute_pipeline(gpu.pipeline), buffers.get(field.batch))
    else {
        return;
    };
    if field.mode == Mode::Static && gpu.writes >= 3 {
        return;
    }
    let uniform = [
        field.count,
        field.side,
        SPACING.to_bits(),
        (gpu.frame as f32 * STEP).to_bits(),
    ];
    queue.write_buffer(&gpu.uniform, 0, bytemuck::cast_slice(&uniform));
    let mut pass = ctx.command_encoder().begin_compute_pass(&Default::default());
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, &**batch.bind_group(), &[]);
    pass.set_bind_group(1, &*gpu.bind_group, &[]);
    let (x, y) = batch.workgroups(64);
    pass.dispatch_workgroups(x, y, 1);
    gpu.writes += 1;
}
