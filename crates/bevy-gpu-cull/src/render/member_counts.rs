//! A combined batch's visible counts per member (batches drawn together,
//! `super::merge`): after each cull of a combined batch, a small pass
//! counts each view's survivors by member into a buffer of the view's own
//! (`shaders/gpu_cull_member_counts.wgsl`), which the count readback copies
//! beside the view's count. The CPU reads a few words per view, whatever
//! the number of survivors.

use bevy::prelude::*;
use bevy::render::render_resource::binding_types::{storage_buffer_read_only_sized, storage_buffer_sized};
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayout, BindGroupLayoutDescriptor, BindGroupLayoutEntries,
    CachedComputePipelineId, ComputePipelineDescriptor, PipelineCache, ShaderStages,
};
use bevy::render::renderer::RenderDevice;
use cull_core::CullTarget;

/// The survivors one workgroup of the pass counts.
const WORKGROUP_SIZE: u32 = 256;

/// The counting pass's pipeline and its bind group layout.
#[derive(Resource)]
pub(crate) struct MemberCountPass {
    pub pipeline: CachedComputePipelineId,
    pub layout: BindGroupLayoutDescriptor,
}

fn layout_descriptor() -> BindGroupLayoutDescriptor {
    BindGroupLayoutDescriptor::new(
        "gpu_cull_member_counts",
        &BindGroupLayoutEntries::sequential(
            ShaderStages::COMPUTE,
            (
                storage_buffer_read_only_sized(false, None),
                storage_buffer_read_only_sized(false, None),
                storage_buffer_read_only_sized(false, None),
                storage_buffer_sized(false, None),
            ),
        ),
    )
}

/// Queues the counting pass's pipeline (in `RenderStartup`).
pub(crate) fn init_member_count_pass(
    mut commands: Commands,
    cache: Res<PipelineCache>,
    assets: Res<AssetServer>,
) {
    let shader = bevy::asset::load_embedded_asset!(assets.as_ref(), "shaders/gpu_cull_member_counts.wgsl");
    let layout = layout_descriptor();
    let pipeline = cache.queue_compute_pipeline(ComputePipelineDescriptor {
        label: Some("gpu_cull_member_counts".into()),
        layout: vec![layout.clone()],
        immediate_size: 0,
        shader,
        shader_defs: Vec::new(),
        entry_point: Some("count_members".into()),
        zero_initialize_workgroup_memory: false,
    });
    commands.insert_resource(MemberCountPass { pipeline, layout });
}

/// One view's counting of one list of a combined batch: its counts buffer
/// and the pass's bind group.
pub(crate) struct MemberCounts {
    pub buffer: wgpu::Buffer,
    bind_group: BindGroup,
    workgroups: u32,
}

impl MemberCounts {
    /// The counting of the view's list at `slot` of `lists`, whose
    /// combined batch's members start at `starts` (one `u32` each).
    pub fn new(
        device: &RenderDevice,
        layout: &BindGroupLayout,
        (lists, slot): (&CullTarget, u32),
        starts: &wgpu::Buffer,
    ) -> Self {
        let buffer = device.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu_cull_member_counts"),
            size: starts.size(),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let survivors = wgpu::BufferBinding {
            buffer: lists.output_buffer(),
            offset: lists.view_output_offset(slot),
            size: wgpu::BufferSize::new(lists.capacity() as u64 * lists.output_stride()),
        };
        let args = wgpu::BufferBinding {
            buffer: lists.draw_args(),
            offset: 0,
            size: wgpu::BufferSize::new(lists.draw_args_offset(slot) + cull_core::INSTANCE_COUNT_OFFSET + 4),
        };
        let bind_group = device.create_bind_group(
            "gpu_cull_member_counts",
            layout,
            &BindGroupEntries::sequential((
                wgpu::BindingResource::Buffer(survivors),
                wgpu::BindingResource::Buffer(args),
                starts.as_entire_binding(),
                buffer.as_entire_binding(),
            )),
        );
        Self {
            buffer,
            bind_group,
            workgroups: lists.capacity().div_ceil(WORKGROUP_SIZE),
        }
    }

    /// Records the count: its buffer cleared, then the pass, after the
    /// view's cull in `encoder`.
    pub fn record(&self, encoder: &mut wgpu::CommandEncoder, pipeline: &wgpu::ComputePipeline) {
        encoder.clear_buffer(&self.buffer, 0, None);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("gpu_cull_member_counts"),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &*self.bind_group, &[]);
        pass.dispatch_workgroups(self.workgroups, 1, 1);
    }
}
