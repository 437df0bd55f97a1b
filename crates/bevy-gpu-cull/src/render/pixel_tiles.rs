//! Where a camera's pixel levels lie, so that the passes drawing them
//! cover only that: after the splat, a compute pass
//! (`shaders/gpu_cull_pixel_tiles.wgsl`) lists the view's tiles of 16x16
//! pixels holding each batch's pixels, and those holding any; the pixels'
//! depth pass and each batch's resolve then draw a quad per listed tile
//! (`shaders/gpu_cull_pixel_tile_quad.wgsl`), one indirect draw each. The
//! far instances a pixel level holds lie in a band of the view, and each
//! batch's in its own part of it: a resolve's fragments are then about its
//! own pixels' tiles, not the whole view's.

use bevy::prelude::*;
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, Buffer, BufferDescriptor,
    BufferUsages, CachedComputePipelineId, ComputePipelineDescriptor, PipelineCache, ShaderStages,
    binding_types::{storage_buffer_read_only_sized, storage_buffer_sized, uniform_buffer_sized},
};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use cull_core::PixelSplatTarget;

/// A tile's side, in pixels (the shaders' `TILE`).
const TILE: u32 = 16;
/// The most batches one view's tiles tell apart (the kernel's
/// `MAX_BATCHES`): a view's batches past it draw their pixel levels'
/// meshes.
pub(crate) const MAX_TILED_BATCHES: usize = 256;
/// Words of a list's header: the view's tiles across, its width and height.
const HEADER_WORDS: u32 = 4;
/// The words of an indirect draw's arguments.
const DRAW_WORDS: u32 = 4;

/// The tiles' kernel (queued once a camera takes pixels) and its group's
/// layout.
#[derive(Resource)]
pub(crate) struct PixelTilePipeline {
    layout: BindGroupLayoutDescriptor,
    shader: Handle<Shader>,
    pipeline: Option<CachedComputePipelineId>,
}

/// The kernel's layout and shader, at startup (the kernel is queued later,
/// [`PixelTilePipeline::queue`]).
pub(crate) fn init_tile_pipeline(mut commands: Commands, assets: Res<AssetServer>) {
    let layout = BindGroupLayoutDescriptor::new(
        "gpu_cull_pixel_tiles",
        &BindGroupLayoutEntries::sequential(
            ShaderStages::COMPUTE,
            (
                storage_buffer_read_only_sized(false, None),
                storage_buffer_read_only_sized(false, None),
                storage_buffer_sized(false, None),
                storage_buffer_sized(false, None),
                uniform_buffer_sized(false, None),
            ),
        ),
    );
    let shader = bevy::asset::load_embedded_asset!(assets.as_ref(), "shaders/gpu_cull_pixel_tiles.wgsl");
    commands.insert_resource(PixelTilePipeline {
        layout,
        shader,
        pipeline: None,
    });
}

impl PixelTilePipeline {
    /// Queues the kernel, the first time.
    pub fn queue(&mut self, cache: &PipelineCache) {
        self.pipeline.get_or_insert_with(|| {
            cache.queue_compute_pipeline(ComputePipelineDescriptor {
                label: Some("gpu_cull_pixel_tiles".into()),
                layout: vec![self.layout.clone()],
                immediate_size: 0,
                shader: self.shader.clone(),
                shader_defs: Vec::new(),
                entry_point: Some("list_tiles".into()),
                zero_initialize_workgroup_memory: false,
            })
        });
    }

    /// The kernel, once compiled.
    fn kernel<'a>(
        &self,
        cache: &'a PipelineCache,
    ) -> Option<&'a bevy::render::render_resource::ComputePipeline> {
        cache.get_compute_pipeline(self.pipeline?)
    }

    /// Whether its kernel has compiled.
    pub fn is_ready(&self, cache: &PipelineCache) -> bool {
        self.kernel(cache).is_some()
    }
}

/// One view's tile lists: one per batch (in slot order), then the pixels'
/// depth's, with an indirect draw each.
pub(crate) struct PixelTiles {
    /// Each batch's first and last id, by slot.
    ranges: Buffer,
    /// Per list, its draw's arguments.
    draws: Buffer,
    /// Per list, its header and its tiles, `list_stride` words apart.
    lists: Buffer,
    bind_group: BindGroup,
    /// The view's size in pixels it was made for.
    size: (u32, u32),
    /// The view's tiles across and down.
    tiles: UVec2,
    /// The batches it was made for.
    batches: u32,
    list_stride: u32,
    /// Every list's draw empty (six vertices, no tile), what each frame
    /// starts from.
    empty_draws: Vec<u32>,
}

impl PixelTiles {
    /// Lists for `batches` batches over `target`'s pixels, or `None` (logged)
    /// where they would not fit one storage binding: the view's pixel levels
    /// then draw their meshes.
    pub fn new(
        device: &RenderDevice,
        queue: &RenderQueue,
        (cache, pipeline): (&PipelineCache, &PixelTilePipeline),
        target: &PixelSplatTarget,
        batches: u32,
    ) -> Option<Self> {
        let (width, height) = target.size();
        let tiles = UVec2::new(width.div_ceil(TILE), height.div_ceil(TILE));
        // Each list starts where a storage binding may: the resolves bind
        // their own.
        let limits = device.limits();
        let align = limits.min_storage_buffer_offset_alignment / 4;
        let list_stride = (HEADER_WORDS + tiles.x * tiles.y).next_multiple_of(align.max(1));
        let lists_count = batches + 1;
        let lists_bytes = u64::from(list_stride) * u64::from(lists_count) * 4;
        if lists_bytes > limits.max_storage_buffer_binding_size.min(limits.max_buffer_size) {
            error_once!(
                "GPU culling: pixel levels drawn as meshes: {batches} batches' tiles over {width}x{height} pixels take {lists_bytes} bytes, past one storage binding"
            );
            return None;
        }
        let buffer = |label, words: u32, usage| {
            device.create_buffer(&BufferDescriptor {
                label: Some(label),
                size: u64::from(words.max(1)) * 4,
                usage,
                mapped_at_creation: false,
            })
        };
        let storage = BufferUsages::STORAGE | BufferUsages::COPY_DST;
        let ranges = buffer("gpu_cull_pixel_tile_ranges", 2 * batches, storage);
        let draws = buffer(
            "gpu_cull_pixel_tile_draws",
            DRAW_WORDS * lists_count,
            storage | BufferUsages::INDIRECT,
        );
        let lists = buffer("gpu_cull_pixel_tile_lists", list_stride * lists_count, storage);
        let header = [tiles.x, width, height, 0];
        for list in 0..lists_count {
            queue.write_buffer(
                &lists,
                u64::from(list * list_stride) * 4,
                bytemuck::cast_slice(&header),
            );
        }
        let words = [width, height, tiles.x, batches, list_stride, 0, 0, 0];
        let uniform = device.create_buffer_with_data(&bevy::render::render_resource::BufferInitDescriptor {
            label: Some("gpu_cull_pixel_tiling"),
            contents: bytemuck::cast_slice(&words),
            usage: BufferUsages::UNIFORM,
        });
        let bind_group = device.create_bind_group(
            "gpu_cull_pixel_tiles",
            &cache.get_bind_group_layout(&pipeline.layout),
            &BindGroupEntries::sequential((
                target.ids().as_entire_binding(),
                ranges.as_entire_binding(),
                draws.as_entire_binding(),
                lists.as_entire_binding(),
                uniform.as_entire_binding(),
            )),
        );
        Some(Self {
            ranges,
            draws,
            lists,
            bind_group,
            size: (width, height),
            tiles,
            batches,
            list_stride,
            empty_draws: (0..lists_count).flat_map(|_| [6, 0, 0, 0]).collect(),
        })
    }

    /// `last` where it serves `batches` batches over `target` (made with
    /// that target: it binds its ids), else new lists ([`Self::new`]).
    pub fn kept_or_new(
        last: Option<Self>,
        (device, queue): (&RenderDevice, &RenderQueue),
        tiling: (&PipelineCache, &PixelTilePipeline),
        target: &PixelSplatTarget,
        batches: u32,
    ) -> Option<Self> {
        last.filter(|t| t.batches == batches && t.size == target.size())
            .or_else(|| Self::new(device, queue, tiling, target, batches))
    }

    /// Lists this frame's tiles, after the splat: `ranges[slot]` is the
    /// first and last id of the batch in `slot` (ascending and apart; an
    /// empty range, first past last, for a batch not splatted). `false`,
    /// and nothing listed, until the kernel has compiled or where `ranges`
    /// is not one per batch.
    pub fn list(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &RenderQueue,
        (cache, pipeline): (&PipelineCache, &PixelTilePipeline),
        ranges: &[[u32; 2]],
    ) -> bool {
        let Some(kernel) = pipeline.kernel(cache) else {
            return false;
        };
        if ranges.len() != self.batches as usize {
            return false;
        }
        if !ranges.is_empty() {
            queue.write_buffer(&self.ranges, 0, bytemuck::cast_slice(ranges));
        }
        queue.write_buffer(&self.draws, 0, bytemuck::cast_slice(&self.empty_draws));
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("gpu_cull_pixel_tiles"),
            timestamp_writes: None,
        });
        pass.set_pipeline(kernel);
        pass.set_bind_group(0, &*self.bind_group, &[]);
        pass.dispatch_workgroups(self.tiles.x, self.tiles.y, 1);
        true
    }

    /// The list of the batch in `slot` (or, at `self.batches`, the pixels'
    /// depth's), as its quads' vertex stage binds it.
    pub fn list_binding(&self, slot: u32) -> wgpu::BufferBinding<'_> {
        wgpu::BufferBinding {
            buffer: &self.lists,
            offset: u64::from(slot * self.list_stride) * 4,
            size: wgpu::BufferSize::new(u64::from(self.list_stride) * 4),
        }
    }

    /// The slot of the pixels' depth's list.
    pub fn depth_slot(&self) -> u32 {
        self.batches
    }

    /// The draws' arguments, and where `slot`'s lie in them.
    pub fn draw(&self, slot: u32) -> (&Buffer, u64) {
        (&self.draws, u64::from(slot * DRAW_WORDS) * 4)
    }
}
