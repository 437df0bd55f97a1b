//! Levels drawn as pixels ([`crate::GpuCullLodLevel::as_pixels`]) in a
//! camera's main pass. Per camera that can take them: which batches' levels
//! are splatted and with which ids (prepared after the targets), the splat
//! after the camera's culls (`cull_core::PixelSplatter`, one target for
//! every batch) and the tiles of the view its pixels lie in
//! ([`super::pixel_tiles`]), then, first in the batches' opaque pass, a
//! pass over those tiles writing the pixels' depth and one per batch over
//! its own tiles shading its pixels with its material
//! (`shaders/gpu_cull_pixel_resolve.wgsl`); the levels' own draws are
//! skipped there. A batch whose resolve pipeline is not ready yet
//! draws the level's mesh, as every other view does.

use super::batches::GpuBatch;
use super::bindings::InstanceBindings;
use super::extract::BatchData;
use super::material::GpuMaterial;
use super::pixel_tiles::{MAX_TILED_BATCHES, PixelTilePipeline, PixelTiles};
use super::targets::ViewTargets;
use bevy::core_pipeline::core_3d::CORE_3D_DEPTH_FORMAT;
use bevy::core_pipeline::prepass::{DeferredPrepass, DepthPrepass, MotionVectorPrepass, NormalPrepass};
use bevy::ecs::system::{SystemParamItem, lifetimeless::SRes};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::camera::ExtractedCamera;
use bevy::render::render_phase::{PhaseItem, RenderCommand, RenderCommandResult, TrackedRenderPass};
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayoutDescriptor, BindGroupLayoutEntries, BindingResource,
    BufferInitDescriptor, BufferUsages, CachedRenderPipelineId, ColorTargetState, ColorWrites,
    CompareFunction, DepthStencilState, FragmentState, MultisampleState, PipelineCache,
    RenderPipelineDescriptor, ShaderStages,
    binding_types::{storage_buffer_read_only_sized, uniform_buffer_sized},
};
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue, ViewQuery};
use bevy::render::sync_world::MainEntity;
use bevy::render::texture::FallbackImage;
use bevy::render::view::{ExtractedView, Msaa, ViewTarget};
use bevy::shader::Shader;
use cull_core::{PixelSplatSource, PixelSplatTarget, PixelSplatView, PixelSplatter};

/// One batch's pixels in a camera's view.
pub(crate) struct BatchPixels {
    pub main: MainEntity,
    /// Its levels drawn as pixels, bit `k` for level `k`.
    pub levels: u32,
    /// Its ids in the view's splat are `id_base + 1` to `id_base + id_count`.
    pub id_base: u32,
    id_count: u32,
    /// Its tile list's place in the view's [`PixelTiles`].
    slot: u32,
    /// Its resolve's group 2.
    pub bind_group: BindGroup,
}

/// One camera's pixels this frame.
pub(crate) struct ViewPixels {
    pub target: PixelSplatTarget,
    /// The lists `target` was made for.
    max_sources: u32,
    /// The tiles holding the pixels, per batch and in all.
    tiles: PixelTiles,
    depth_bind_group: BindGroup,
    pub depth_pipeline: CachedRenderPipelineId,
    /// The batches whose pixel levels the camera takes.
    pub batches: HashMap<Entity, BatchPixels>,
    /// The batches splatted this frame (their resolve pipelines ready): the
    /// only ones whose pixel levels' draws are skipped.
    pub splatted: HashMap<Entity, u32>,
}

/// Every camera's pixels, and what draws them.
#[derive(Resource, Default)]
pub(crate) struct PixelViews {
    splatter: Option<PixelSplatter>,
    pub views: HashMap<Entity, ViewPixels>,
    /// Per (view, batch) with pixel levels, the pipeline
    /// shading its pixels with its material (specialized by the queue,
    /// which runs before the views are prepared), ready or not.
    pub pipelines: HashMap<(Entity, Entity), CachedRenderPipelineId>,
    depth_pipelines: HashMap<(u32, bevy::render::render_resource::TextureFormat), CachedRenderPipelineId>,
}

impl PixelViews {
    /// The levels of `batch` that `view` takes as pixels this frame (bit
    /// `k` for level `k`): their draws are skipped.
    pub fn levels_drawn_as_pixels(&self, view: Entity, batch: Entity) -> u32 {
        self.views
            .get(&view)
            .and_then(|v| v.splatted.get(&batch).copied())
            .unwrap_or(0)
    }
}

impl PixelViews {
    /// The depth pass's pipeline for a view of `msaa` and color `format`.
    fn depth_pipeline(
        &mut self,
        cache: &PipelineCache,
        pipelines: &PixelPipelines,
        msaa: Option<&Msaa>,
        format: bevy::render::render_resource::TextureFormat,
    ) -> CachedRenderPipelineId {
        let samples = msaa.map_or(1, Msaa::samples);
        *self
            .depth_pipelines
            .entry((samples, format))
            .or_insert_with(|| cache.queue_render_pipeline(depth_descriptor(pipelines, samples, format)))
    }
}

/// What the depth pass and the resolves bind besides the batches' groups.
#[derive(Resource)]
pub(crate) struct PixelPipelines {
    depth_layout: BindGroupLayoutDescriptor,
    depth_shader: Handle<Shader>,
    /// The vertex stage of the depth pass and the resolves: a quad per tile.
    tile_quad: Handle<Shader>,
}

pub(crate) fn init_pipelines(mut commands: Commands, asset_server: Res<AssetServer>) {
    let depth_layout = BindGroupLayoutDescriptor::new(
        "gpu_cull_pixel_depth",
        &BindGroupLayoutEntries::sequential(
            ShaderStages::FRAGMENT,
            (
                storage_buffer_read_only_sized(false, None),
                uniform_buffer_sized(false, None),
                // The tiles holding any pixel (the quads' vertex stage).
                storage_buffer_read_only_sized(false, None).visibility(ShaderStages::VERTEX),
            ),
        ),
    );
    commands.insert_resource(PixelPipelines {
        depth_layout,
        depth_shader: bevy::asset::load_embedded_asset!(
            asset_server.as_ref(),
            "shaders/gpu_cull_pixel_depth.wgsl"
        ),
        tile_quad: tile_quad_shader(&asset_server),
    });
}

/// The quads' vertex stage (`shaders/gpu_cull_pixel_tile_quad.wgsl`).
pub(crate) fn tile_quad_shader(assets: &AssetServer) -> Handle<Shader> {
    bevy::asset::load_embedded_asset!(assets, "shaders/gpu_cull_pixel_tile_quad.wgsl")
}

/// Whether a camera's main pass can take pixels: forward, without a
/// prepass (whose depth and normals the pixels would be missing from), at
/// its viewport's own resolution.
type PixelCamera = (
    With<ExtractedCamera>,
    Without<bevy::camera::MainPassResolutionOverride>,
    Without<DepthPrepass>,
    Without<NormalPrepass>,
    Without<MotionVectorPrepass>,
    Without<DeferredPrepass>,
);

/// Each camera's batches with pixel levels it can take, their ids, the
/// view's splat target and the bind groups of its depth pass and
/// resolves. A batch that the view culls with occlusion, or whose material
/// cannot shade a resolved pixel, draws its levels' meshes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_pixel_views(
    mut pixels: ResMut<PixelViews>,
    pipelines: Option<Res<PixelPipelines>>,
    cameras: Query<(Entity, &ExtractedView, &ViewTarget, Option<&Msaa>), PixelCamera>,
    targets: Res<ViewTargets>,
    batches: Query<(Entity, &MainEntity, &BatchData, &GpuBatch, &GpuMaterial)>,
    eligible: super::custom_material::PixelMaterials,
    (device, queue, cache, bindings, fallback): (
        Res<RenderDevice>,
        Res<RenderQueue>,
        Res<PipelineCache>,
        Res<InstanceBindings>,
        Res<FallbackImage>,
    ),
    tile_pipeline: Option<ResMut<PixelTilePipeline>>,
) {
    let (Some(pipelines), Some(mut tile_pipeline)) = (pipelines, tile_pipeline) else {
        return;
    };
    let pixels = &mut *pixels;
    let mut candidates: Vec<_> = batches
        .iter()
        .filter(|(_, main, data, ..)| pixel_levels(data) != 0 && eligible.shades_pixels(main))
        .collect();
    candidates.sort_by_key(|(entity, ..)| *entity);
    let id_bases = id_bases(
        candidates
            .iter()
            .map(|(entity, _, _, gpu, _)| (*entity, gpu.capacity)),
    );
    let mut live = Vec::new();
    for (view_entity, view, view_target, msaa) in &cameras {
        let mut sources: Vec<_> = candidates
            .iter()
            .filter(|(entity, ..)| id_bases.contains_key(entity))
            .filter(|(entity, _, data, ..)| splattable(&targets, view_entity, *entity, data))
            .collect();
        if sources.is_empty() {
            continue;
        }
        // In id order (the tiles' kernel searches them so).
        sources.truncate(MAX_TILED_BATCHES);
        tile_pipeline.queue(&cache);
        let source_count: u32 = sources
            .iter()
            .map(|(_, _, data, ..)| pixel_levels(data).count_ones())
            .sum();
        let depth_pipeline =
            pixels.depth_pipeline(&cache, &pipelines, msaa, view_target.main_texture_format());
        let reused = pixels.views.remove(&view_entity);
        let Some((target, max_sources, tiles)) = splat_target(&device, reused, view.viewport, source_count)
        else {
            continue;
        };
        let tiling = (&*cache, &*tile_pipeline);
        let Some(tiles) =
            PixelTiles::kept_or_new(tiles, (&device, &queue), tiling, &target, sources.len() as u32)
        else {
            continue;
        };
        let depth_bind_group =
            depth_bind_group(&device, &cache, &pipelines, (&target, &tiles), view.viewport);
        let layout = cache.get_bind_group_layout(&bindings.layout);
        let resolves = Resolves {
            device: &device,
            layout: &layout,
            viewport: view.viewport,
            target: &target,
            tiles: &tiles,
            fallback: &fallback,
        };
        let batch_pixels = sources
            .into_iter()
            .enumerate()
            .map(|(slot, (entity, main, data, gpu, material))| {
                let batch = resolves.batch(slot as u32, (**main, id_bases[entity]), (data, gpu, material));
                (*entity, batch)
            })
            .collect();
        live.push(view_entity);
        let view_pixels = ViewPixels {
            target,
            max_sources,
            tiles,
            depth_bind_group,
            depth_pipeline,
            batches: batch_pixels,
            splatted: HashMap::default(),
        };
        pixels.views.insert(view_entity, view_pixels);
    }
    pixels.views.retain(|view, _| live.contains(view));
    if pixels.splatter.is_none() && !pixels.views.is_empty() {
        pixels.splatter = Some(PixelSplatter::new(device.wgpu_device(), Default::default()));
    }
}

/// Whether `view` culls `batch` (of `data`) without occlusion, a list per
/// level: its pixel levels can be splatted.
fn splattable(targets: &ViewTargets, view: Entity, batch: Entity, data: &BatchData) -> bool {
    targets.map.get(&(view, batch)).is_some_and(|t| {
        t.late.is_none() && t.levels() as usize == data.lod.len() && t.bind_groups.len() == data.lod.len()
    })
}

/// What every batch's resolve in one view binds besides its own.
struct Resolves<'a> {
    device: &'a RenderDevice,
    layout: &'a bevy::render::render_resource::BindGroupLayout,
    viewport: UVec4,
    target: &'a PixelSplatTarget,
    tiles: &'a PixelTiles,
    fallback: &'a FallbackImage,
}

impl Resolves<'_> {
    /// The batch in `slot` of the view's tiles, its ids from `id_base + 1`.
    fn batch(
        &self,
        slot: u32,
        (main, id_base): (MainEntity, u32),
        (data, gpu, material): (&BatchData, &GpuBatch, &GpuMaterial),
    ) -> BatchPixels {
        let resolve = Resolve {
            viewport: self.viewport,
            id_base,
            data,
            gpu,
        };
        let uniform = resolve.uniform(self.device);
        let bind_group = super::bind_groups::resolve_bind_group(
            self.device,
            self.layout,
            self.tiles.list_binding(slot),
            (gpu, material),
            (self.target.ids(), &uniform),
            &self.fallback.d2,
        );
        BatchPixels {
            main,
            levels: pixel_levels(data),
            id_base,
            id_count: gpu.capacity,
            slot,
            bind_group,
        }
    }
}

/// Each batch's first id less one: the capacities before it, in order; the
/// batches past 32 bits of ids are left out (their levels' meshes drawn).
fn id_bases(batches: impl Iterator<Item = (Entity, u32)>) -> HashMap<Entity, u32> {
    let mut ids = 0u32;
    let mut bases = HashMap::default();
    for (entity, capacity) in batches {
        let Some(next) = ids.checked_add(capacity).filter(|&n| n < u32::MAX) else {
            break;
        };
        bases.insert(entity, ids);
        ids = next;
    }
    bases
}

/// The view's splat target: last frame's where it fits the viewport's size
/// and `sources` lists, with its tiles, else a new one (`None`, logged,
/// where it cannot be made); with the lists it was made for.
fn splat_target(
    device: &RenderDevice,
    last: Option<ViewPixels>,
    viewport: UVec4,
    sources: u32,
) -> Option<(PixelSplatTarget, u32, Option<PixelTiles>)> {
    let size = (viewport.z.max(1), viewport.w.max(1));
    if let Some(last) = last.filter(|v| v.target.size() == size && v.max_sources >= sources) {
        return Some((last.target, last.max_sources, Some(last.tiles)));
    }
    PixelSplatTarget::new(device.wgpu_device(), size, sources)
        .map(|target| (target, sources, None))
        .map_err(|e| error_once!("GPU culling: pixel levels drawn as meshes: {e}"))
        .ok()
}

/// The depth pass's group: the target's keys, where the viewport lies and
/// the tiles holding a pixel.
fn depth_bind_group(
    device: &RenderDevice,
    cache: &PipelineCache,
    pipelines: &PixelPipelines,
    (target, tiles): (&PixelSplatTarget, &PixelTiles),
    viewport: UVec4,
) -> BindGroup {
    let origin_and_width = [viewport.x, viewport.y, target.size().0, 0];
    let uniform = device.create_buffer_with_data(&BufferInitDescriptor {
        label: Some("gpu_cull_pixel_depth"),
        contents: bytemuck::cast_slice(&origin_and_width),
        usage: BufferUsages::UNIFORM,
    });
    device.create_bind_group(
        "gpu_cull_pixel_depth",
        &cache.get_bind_group_layout(&pipelines.depth_layout),
        &BindGroupEntries::sequential((
            target.keys().as_entire_binding(),
            uniform.as_entire_binding(),
            BindingResource::Buffer(tiles.list_binding(tiles.depth_slot())),
        )),
    )
}

/// What a batch's resolve in a view reads (`PixelResolve` in
/// `shaders/gpu_cull_pixel_resolve.wgsl`).
struct Resolve<'a> {
    viewport: UVec4,
    id_base: u32,
    data: &'a BatchData,
    gpu: &'a GpuBatch,
}

impl Resolve<'_> {
    /// Its uniform buffer.
    fn uniform(&self, device: &RenderDevice) -> bevy::render::render_resource::Buffer {
        let (data, viewport) = (self.data, self.viewport);
        let (center, surface) = (data.bounds.center, data.pixel_surface);
        let level = pixel_levels(data).trailing_zeros();
        let facing = surface.faces_view || data.lod_facing & (1 << level) != 0;
        let f = f32::to_bits;
        let words: [u32; 16] = [
            viewport.x,
            viewport.y,
            viewport.z.max(1),
            self.id_base,
            f(center.x),
            f(center.y),
            f(center.z),
            self.gpu.capacity,
            f(surface.normal.x),
            f(surface.normal.y),
            f(surface.normal.z),
            u32::from(facing),
            f(surface.uv.x),
            f(surface.uv.y),
            0,
            0,
        ];
        device.create_buffer_with_data(&BufferInitDescriptor {
            label: Some("gpu_cull_pixel_resolve"),
            contents: bytemuck::cast_slice(&words),
            usage: BufferUsages::UNIFORM,
        })
    }
}

/// The batch's levels drawn as pixels, of those it has.
pub(crate) fn pixel_levels(data: &BatchData) -> u32 {
    data.lod_pixels & ((1u32 << data.lod.len().min(31)) - 1)
}

/// The depth pass's pipeline for a pass of `samples` samples and color
/// `format` (its color writes off).
fn depth_descriptor(
    pipelines: &PixelPipelines,
    samples: u32,
    format: bevy::render::render_resource::TextureFormat,
) -> RenderPipelineDescriptor {
    RenderPipelineDescriptor {
        label: Some("gpu_cull_pixel_depth".into()),
        layout: vec![pipelines.depth_layout.clone()],
        vertex: bevy::render::render_resource::VertexState {
            shader: pipelines.tile_quad.clone(),
            shader_defs: Vec::new(),
            entry_point: Some("tile_quad".into()),
            buffers: Vec::new(),
        },
        fragment: Some(FragmentState {
            shader: pipelines.depth_shader.clone(),
            entry_point: Some("write_depth".into()),
            targets: vec![Some(ColorTargetState {
                format,
                blend: None,
                write_mask: ColorWrites::empty(),
            })],
            ..default()
        }),
        depth_stencil: Some(DepthStencilState {
            format: CORE_3D_DEPTH_FORMAT,
            depth_write_enabled: Some(true),
            depth_compare: Some(CompareFunction::GreaterEqual),
            stencil: default(),
            bias: default(),
        }),
        multisample: MultisampleState {
            count: samples,
            ..default()
        },
        ..default()
    }
}

/// Whether any view takes pixel levels this frame ([`splat_view`]'s run
/// condition).
pub(crate) fn any_pixel_views(pixels: Option<Res<PixelViews>>) -> bool {
    pixels.is_some_and(|pixels| !pixels.views.is_empty())
}

/// Splats the camera's batches whose resolve pipelines are ready, after
/// its culls: the only ones whose pixel levels are then drawn as pixels.
pub(crate) fn splat_view(
    view: ViewQuery<(Entity, &ExtractedView)>,
    mut pixels: ResMut<PixelViews>,
    targets: Res<ViewTargets>,
    batches: Query<(&BatchData, &GpuBatch)>,
    (cache, tile_pipeline): (Res<PipelineCache>, Option<Res<PixelTilePipeline>>),
    queue: Res<RenderQueue>,
    materials: (
        Res<bevy::pbr::RenderMaterialInstances>,
        Res<bevy::render::erased_render_asset::ErasedRenderAssets<bevy::pbr::PreparedMaterial>>,
        Res<bevy::pbr::MaterialBindGroupAllocators>,
    ),
    mut ctx: RenderContext,
) {
    let (view_entity, extracted) = view.into_inner();
    let (instances, prepared, allocators) = (&*materials.0, &*materials.1, &*materials.2);
    let pixels = &mut *pixels;
    let (Some(splatter), Some(tile_pipeline)) = (&pixels.splatter, tile_pipeline) else {
        return;
    };
    let Some(view_pixels) = pixels.views.get_mut(&view_entity) else {
        return;
    };
    view_pixels.splatted.clear();
    if cache.get_render_pipeline(view_pixels.depth_pipeline).is_none() || !tile_pipeline.is_ready(&cache) {
        return;
    }
    let mut sources = Vec::new();
    for (entity, batch) in &view_pixels.batches {
        // Splatted only where the shading draw will run: its pipeline and
        // its material's bind group ready (the pixels' depth is written for
        // every batch splatted).
        let ready = pixels
            .pipelines
            .get(&(view_entity, *entity))
            .is_some_and(|id| cache.get_render_pipeline(*id).is_some())
            && super::custom_material::material_bind_group(instances, prepared, allocators, &batch.main)
                .is_some();
        let (Some(target), Ok((data, gpu))) =
            (targets.map.get(&(view_entity, *entity)), batches.get(*entity))
        else {
            continue;
        };
        if !ready {
            continue;
        }
        for level in (0..target.levels()).filter(|k| batch.levels & (1 << k) != 0) {
            sources.push(PixelSplatSource {
                input: &gpu.input,
                target: &target.target,
                list: target.slot + level,
                local_center: data.bounds.center,
                world_from_local: Mat4::from(data.world_from_local),
                id_base: batch.id_base,
            });
        }
        view_pixels.splatted.insert(*entity, batch.levels);
    }
    if sources.is_empty() {
        return;
    }
    let clip_from_world = extracted
        .clip_from_world
        .unwrap_or_else(|| extracted.clip_from_view * extracted.world_from_view.to_matrix().inverse());
    let splat_view = PixelSplatView {
        clip_from_world,
        reverse_z: true,
    };
    let splatted = splatter.splat(
        ctx.command_encoder(),
        &queue,
        &view_pixels.target,
        &splat_view,
        &sources,
    );
    if let Err(e) = splatted {
        error_once!("GPU culling: pixel levels not splatted: {e}");
        view_pixels.splatted.clear();
        return;
    }
    if !list_tiles(
        view_pixels,
        ctx.command_encoder(),
        &queue,
        (&cache, &tile_pipeline),
    ) {
        view_pixels.splatted.clear();
    }
}

/// Lists the tiles holding each splatted batch's pixels, and any pixel.
fn list_tiles(
    view_pixels: &ViewPixels,
    encoder: &mut wgpu::CommandEncoder,
    queue: &RenderQueue,
    tiling: (&PipelineCache, &PixelTilePipeline),
) -> bool {
    let mut ranges = vec![[0, 0]; view_pixels.batches.len()];
    for (entity, batch) in &view_pixels.batches {
        let first = batch.id_base + 1;
        // A batch not splatted: no id, in its place among the others.
        let last = if view_pixels.splatted.contains_key(entity) {
            batch.id_base + batch.id_count
        } else {
            batch.id_base
        };
        if let Some(range) = ranges.get_mut(batch.slot as usize) {
            *range = [first, last];
        }
    }
    view_pixels.tiles.list(encoder, queue, tiling, &ranges)
}

/// Draws the view's pixels first in the batches' opaque pass: their depth,
/// then, per batch, its material's resolve ([`DrawPixelTiles`]).
pub(crate) fn draw_pixel_depth<'w>(
    pixels: &'w PixelViews,
    cache: &'w PipelineCache,
    view: Entity,
    pass: &mut TrackedRenderPass<'w>,
) -> bool {
    let Some(view_pixels) = pixels.views.get(&view).filter(|v| !v.splatted.is_empty()) else {
        return false;
    };
    let Some(pipeline) = cache.get_render_pipeline(view_pixels.depth_pipeline) else {
        return false;
    };
    pass.set_render_pipeline(pipeline);
    pass.set_bind_group(0, &view_pixels.depth_bind_group, &[]);
    let (draws, offset) = view_pixels.tiles.draw(view_pixels.tiles.depth_slot());
    pass.draw_indirect(draws, offset);
    true
}

/// A batch's resolve: its group (group `I`: the view's pixels, the tiles
/// holding the batch's), then a quad per listed tile, one indirect draw.
pub(crate) struct DrawPixelTiles<const I: usize>;

impl<P: PhaseItem, const I: usize> RenderCommand<P> for DrawPixelTiles<I> {
    type Param = SRes<PixelViews>;
    type ViewQuery = Entity;
    type ItemQuery = ();

    fn render<'w>(
        item: &P,
        view: Entity,
        _: Option<()>,
        pixels: SystemParamItem<'w, '_, Self::Param>,
        pass: &mut TrackedRenderPass<'w>,
    ) -> RenderCommandResult {
        let Some(view_pixels) = pixels.into_inner().views.get(&view) else {
            return RenderCommandResult::Skip;
        };
        let Some(batch) = view_pixels.batches.get(&item.entity()) else {
            return RenderCommandResult::Skip;
        };
        pass.set_bind_group(I, &batch.bind_group, &[]);
        let (draws, offset) = view_pixels.tiles.draw(batch.slot);
        pass.draw_indirect(draws, offset);
        RenderCommandResult::Success
    }
}

/// Where Bevy loads its stand-in for `bevy_pbr::meshlet_visibility_buffer_resolve`
/// (without its meshlets), whose contents the plugin replaces with its
/// resolve of pixel levels.
const BEVY_RESOLVE_STAND_IN: &str = "embedded://bevy_pbr/meshlet/dummy_visibility_buffer_resolve.wgsl";

/// The stand-in's handle, until its contents are replaced.
#[derive(Resource)]
struct ResolveStandIn(Option<Handle<Shader>>);

/// Gives `shaders/gpu_cull_pixel_resolve.wgsl` Bevy's import path for a
/// resolved pixel's surface: the stand-in Bevy loads under it is replaced,
/// once loaded and once a batch has a pixel level, by the plugin's module
/// (one shader keeps the path, so no pipeline composes the other; Bevy
/// compiles the PBR pipelines that import it again, once). An app with
/// Bevy's meshlets has its own resolve there, and no pixel levels.
pub(crate) fn add_resolve_shader(app: &mut App) {
    let stand_in = app.world().resource::<AssetServer>().load(BEVY_RESOLVE_STAND_IN);
    app.insert_resource(ResolveStandIn(Some(stand_in)))
        .add_systems(PreUpdate, replace_resolve_stand_in);
}

fn replace_resolve_stand_in(
    mut stand_in: ResMut<ResolveStandIn>,
    mut shaders: ResMut<Assets<Shader>>,
    lods: Query<&crate::GpuCullLod>,
) {
    let Some(handle) = stand_in.0.as_ref() else {
        return;
    };
    if !lods
        .iter()
        .any(|lod| lod.levels.iter().any(|level| level.as_pixels))
    {
        return;
    }
    let Some(loaded) = shaders.get(handle) else {
        return;
    };
    // Bevy's meshlets load their own resolve under the same path: left
    // alone (the pixel levels' resolves then fail to compose, and their
    // meshes are drawn).
    let (path, id) = (loaded.import_path.clone(), handle.id());
    if shaders
        .iter()
        .any(|(other, shader)| other != id && shader.import_path == path)
    {
        error_once!(
            "bevy-gpu-cull: Bevy's meshlets resolve their pixels under the import path pixel levels use: \
             pixel levels are drawn as meshes"
        );
        stand_in.0 = None;
        return;
    }
    let resolve = Shader::from_wgsl(
        include_str!("shaders/gpu_cull_pixel_resolve.wgsl"),
        "bevy_gpu_cull/gpu_cull_pixel_resolve.wgsl",
    );
    let _ = shaders.insert(handle, resolve);
    stand_in.0 = None;
}
