//! Instances that live on the GPU: the buffers of batches written by the
//! application's compute passes, published for those passes
//! ([`GpuCullInstanceBuffers`]); the plugin's pass after them that marks
//! instances past the count culled; and the copy of last frame's records
//! for per-instance motion vectors, made after each frame's draws.

use super::batches::GpuBatch;
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::render_resource::binding_types::storage_buffer_sized;
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, CachedComputePipelineId,
    ComputePipelineDescriptor, PipelineCache, ShaderStages,
};
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue};
use bevy::render::sync_world::MainEntity;

/// Render world: the buffers of every batch written on the GPU
/// ([`crate::GpuCullComputeWrites`]), by the batch's main-world entity, for
/// the application's compute passes in
/// [`crate::GpuCullSystems::WriteInstances`].
///
/// A pass binds [`GpuCullInstanceBuffer::bind_group`] as its group 0 (its
/// pipeline's first layout is [`Self::layout_descriptor`]) and writes
/// through the WGSL import `bevy_gpu_cull::gpu_writes`. The bind group
/// changes when the batch's buffers do (a new capacity, a new culling
/// format, a device loss): take it again each frame.
#[derive(Resource, Default)]
pub struct GpuCullInstanceBuffers {
    batches: HashMap<Entity, GpuCullInstanceBuffer>,
}

/// One batch's buffers in [`GpuCullInstanceBuffers`].
pub struct GpuCullInstanceBuffer {
    capacity: u32,
    list_len: u32,
    bind_group: BindGroup,
    buffers: [wgpu::Buffer; 3],
    buffers_id: u64,
}

impl GpuCullInstanceBuffer {
    /// The count the batch's list last set (its length when it was last
    /// uploaded). The count the GPU writes is not read back: a pass reads
    /// it with `instance_count()`.
    pub fn list_len(&self) -> u32 {
        self.list_len
    }

    /// The batch's records, `GpuCullInstance`s of 64 bytes (binding 0), for
    /// a bind group of your own.
    pub fn records(&self) -> &wgpu::Buffer {
        &self.buffers[0]
    }

    /// The batch's header (binding 1): count, capacity, format, scales.
    pub fn header(&self) -> &wgpu::Buffer {
        &self.buffers[1]
    }

    /// The cull's input in the culler's format (binding 2), which
    /// `write_instance` writes besides the record.
    pub fn cull_input(&self) -> &wgpu::Buffer {
        &self.buffers[2]
    }

    /// The most instances the batch holds: a pass writing one instance per
    /// thread dispatches this many threads.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Group 0 of the application's pass: the batch's records, header and
    /// cull input.
    pub fn bind_group(&self) -> &BindGroup {
        &self.bind_group
    }

    /// Workgroups of `workgroup_size` threads for one thread per instance
    /// of the capacity, as `(x, y)`: over 65,535 they wrap into y (a pass
    /// takes `id.y * num_workgroups.x * workgroup_size + id.x` as its index).
    pub fn workgroups(&self, workgroup_size: u32) -> (u32, u32) {
        let groups = self.capacity.div_ceil(workgroup_size.max(1)).max(1);
        let x = groups.min(65_535);
        (x, groups.div_ceil(x))
    }
}

impl GpuCullInstanceBuffers {
    /// The layout of a batch's bind group: its records (binding 0), header
    /// (1) and cull input (2), all read-write storage, as
    /// `bevy_gpu_cull::gpu_writes` declares them.
    pub fn layout_descriptor() -> BindGroupLayoutDescriptor {
        BindGroupLayoutDescriptor::new(
            "gpu_cull_gpu_writes",
            &BindGroupLayoutEntries::sequential(
                ShaderStages::COMPUTE,
                (
                    storage_buffer_sized(false, None),
                    storage_buffer_sized(false, None),
                    storage_buffer_sized(false, None),
                ),
            ),
        )
    }

    /// The buffers of the batch whose main-world entity is `batch`, once
    /// they exist (the frame after it is spawned at the earliest).
    pub fn get(&self, batch: Entity) -> Option<&GpuCullInstanceBuffer> {
        self.batches.get(&batch)
    }

    /// Every batch written on the GPU, by main-world entity.
    pub fn iter(&self) -> impl Iterator<Item = (Entity, &GpuCullInstanceBuffer)> {
        self.batches.iter().map(|(e, b)| (*e, b))
    }
}

/// Publishes the buffers of every batch written on the GPU; a batch's bind
/// group is made again only when its buffers change.
pub(crate) fn publish_instance_buffers(
    mut published: ResMut<GpuCullInstanceBuffers>,
    batches: Query<(&MainEntity, &GpuBatch)>,
    device: Res<RenderDevice>,
    pipeline_cache: Res<PipelineCache>,
) {
    let mut live = bevy::platform::collections::HashSet::new();
    for (main, gpu) in &batches {
        let Some(header) = &gpu.gpu_writes else {
            continue;
        };
        live.insert(main.id());
        if let Some(published) = published.batches.get_mut(&main.id())
            && published.buffers_id == gpu.buffers_id
        {
            published.list_len = gpu.count;
            continue;
        }
        let layout = pipeline_cache.get_bind_group_layout(&GpuCullInstanceBuffers::layout_descriptor());
        let bind_group = device.create_bind_group(
            "gpu_cull_gpu_writes",
            &layout,
            &BindGroupEntries::sequential((
                gpu.draw_data.as_entire_binding(),
                header.as_entire_binding(),
                gpu.input.buffer().as_entire_binding(),
            )),
        );
        published.batches.insert(
            main.id(),
            GpuCullInstanceBuffer {
                capacity: gpu.capacity,
                list_len: gpu.count,
                bind_group,
                buffers: [gpu.draw_data.clone(), header.clone(), gpu.input.buffer().clone()],
                buffers_id: gpu.buffers_id,
            },
        );
    }
    published.batches.retain(|e, _| live.contains(e));
}

/// The plugin's pass after the application's writes
/// (`gpu_cull_count.wgsl`): instances past each batch's count marked culled.
#[derive(Resource)]
pub(crate) struct CountPass(CachedComputePipelineId);

pub(crate) fn init_count_pass(mut commands: Commands, cache: Res<PipelineCache>, assets: Res<AssetServer>) {
    let shader = bevy::asset::load_embedded_asset!(assets.as_ref(), "shaders/gpu_cull_count.wgsl");
    let id = cache.queue_compute_pipeline(ComputePipelineDescriptor {
        label: Some("gpu_cull_mark_past_count".into()),
        layout: vec![GpuCullInstanceBuffers::layout_descriptor()],
        immediate_size: 0,
        shader,
        shader_defs: Vec::new(),
        entry_point: Some("mark_past_count".into()),
        zero_initialize_workgroup_memory: false,
    });
    commands.insert_resource(CountPass(id));
}

/// Marks every instance past each batch's count culled, after the
/// application's writes and before any cull. (Until its pipeline is
/// compiled, the count stays where the list's length put it, since the
/// upload marks the instances past it.)
pub(crate) fn mark_past_count(
    pass: Option<Res<CountPass>>,
    cache: Res<PipelineCache>,
    published: Res<GpuCullInstanceBuffers>,
    mut ctx: RenderContext,
) {
    let Some(pipeline) = pass.and_then(|p| cache.get_compute_pipeline(p.0)) else {
        return;
    };
    if published.batches.is_empty() {
        return;
    }
    let mut compute = ctx
        .command_encoder()
        .begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("gpu_cull_mark_past_count"),
            timestamp_writes: None,
        });
    compute.set_pipeline(pipeline);
    for batch in published.batches.values() {
        let (x, y) = batch.workgroups(64);
        compute.set_bind_group(0, &*batch.bind_group, &[]);
        compute.dispatch_workgroups(x, y, 1);
    }
}

/// After the frame's draws: each batch with motion vectors copies its
/// records to last frame's, submitted at once so that it lands before the
/// next frame's uploads (which the queue applies before that frame's
/// commands).
pub(crate) fn keep_previous_instances(
    batches: Query<&GpuBatch>,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
) {
    let mut encoder = None;
    for gpu in &batches {
        let Some(previous) = &gpu.previous else {
            continue;
        };
        let records = gpu.cull_count() as u64 * size_of::<crate::GpuCullInstance>() as u64;
        if records == 0 {
            continue;
        }
        encoder
            .get_or_insert_with(|| device.create_command_encoder(&Default::default()))
            .copy_buffer_to_buffer(&gpu.draw_data, 0, previous, 0, records);
    }
    if let Some(encoder) = encoder {
        queue.submit([encoder.finish()]);
    }
}
