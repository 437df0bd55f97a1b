//! The culled batches first in each camera's main opaque pass. Bevy renders
//! the items a plugin puts in its opaque phase (non-mesh items) after its
//! own meshes; a batch of thousands of instances drawn after the ground,
//! terrain or floor under it would shade every pixel of those twice. So a
//! pass of their own draws the batches just before Bevy's main opaque pass,
//! into the same color and depth attachments (it clears them, as that pass
//! would have). Bevy's meshes behind a batch fail the depth test before
//! they shade. The batches' items are kept here rather than in Bevy's
//! phase: a binned phase's items are taken out and put back every frame,
//! and Bevy's pass would go through each only to skip it. A camera with no
//! opaque mesh of Bevy's own has nothing to draw first against: its
//! batches are items of Bevy's phase, drawn there without a pass of their
//! own.

use super::draw::DrawCulledPixels;
use super::pixels::{PixelViews, draw_pixel_depth};
use bevy::asset::UntypedAssetId;
use bevy::camera::{MainPassResolutionOverride, Viewport};
use bevy::core_pipeline::core_3d::Opaque3d;
use bevy::core_pipeline::prepass::DeferredPrepass;
use bevy::ecs::entity::EntityHashMap;
use bevy::prelude::*;
use bevy::render::camera::ExtractedCamera;
use bevy::render::diagnostic::RecordDiagnostics;
use bevy::render::render_phase::{
    BinnedPhaseItem, DrawFunctionId, DrawFunctions, PhaseItem, PhaseItemExtraIndex,
};
use bevy::render::render_resource::CachedRenderPipelineId;
use bevy::render::render_resource::{PipelineCache, RenderPassDescriptor, StoreOp};
use bevy::render::renderer::{RenderContext, ViewQuery};
use bevy::render::sync_world::MainEntity;
use bevy::render::view::{ViewDepthTexture, ViewTarget};

/// The render world's opaque batch draws of each forward camera this frame,
/// as `Opaque3d` items (keyed by pipeline and mesh, like Bevy's), drawn in
/// a pass of their own just before Bevy's main opaque pass. They are not in
/// Bevy's `Opaque3d` phase, so a tool that looks there for what a frame
/// draws looks here too. A deferred camera's forward batches, and those of
/// a forward camera with no opaque mesh of Bevy's own and no pixel levels,
/// are non-mesh items of Bevy's phase instead.
#[derive(Resource, Default)]
pub struct GpuCullOpaqueBatches(EntityHashMap<Vec<Opaque3d>>);

impl GpuCullOpaqueBatches {
    /// The draws of the render-world view `view`, in their order.
    pub fn of_view(&self, view: Entity) -> &[Opaque3d] {
        self.0.get(&view).map_or(&[], Vec::as_slice)
    }

    /// Every view's draws.
    pub fn iter(&self) -> impl Iterator<Item = (Entity, &[Opaque3d])> {
        self.0.iter().map(|(view, items)| (*view, items.as_slice()))
    }

    /// Forgets last frame's items, and the cameras that had none.
    pub(crate) fn clear(&mut self) {
        self.0.retain(|_, items| {
            let had_items = !items.is_empty();
            items.clear();
            had_items
        });
    }

    /// Takes the draws of the render-world view `view` out.
    fn take(&mut self, view: Entity) -> Vec<Opaque3d> {
        self.0.get_mut(&view).map(std::mem::take).unwrap_or_default()
    }

    /// Orders each camera's items by pipeline and mesh, as Bevy's bins
    /// would: fewer changes of pipeline and bindings between draws.
    pub(crate) fn sort(&mut self) {
        for items in self.0.values_mut() {
            items
                .sort_unstable_by(|a, b| (&a.batch_set_key, &a.bin_key).cmp(&(&b.batch_set_key, &b.bin_key)));
        }
    }

    /// Adds `batch`'s draw in `view` (`pipeline`, `draw_function`, from
    /// `mesh`'s buffers).
    pub(crate) fn add(
        &mut self,
        view: Entity,
        batch: (Entity, MainEntity),
        mesh: UntypedAssetId,
        (pipeline, draw_function): (CachedRenderPipelineId, DrawFunctionId),
    ) {
        let (set, bin) = <Opaque3d as super::queue::BatchPhase>::batch_keys(pipeline, draw_function, mesh);
        let item = Opaque3d::new(set, bin, batch, 0..1, PhaseItemExtraIndex::None);
        self.0.entry(view).or_default().push(item);
    }
}

/// Hands the opaque batches of each forward camera in `cameras` (render
/// world entity, retained view) that has no item of its own in Bevy's
/// `Opaque3d` phase this frame, nor pixel levels, to that phase: Bevy's main
/// opaque pass draws them before anything else there, so the camera needs
/// no pass of theirs (whose attachments would be loaded and stored once
/// more). Runs after Bevy's queues and the batches' own.
pub(crate) fn hand_lone_cameras_to_bevy(
    first: &mut GpuCullOpaqueBatches,
    opaque: &mut super::queue::BatchQueue<Opaque3d>,
    cameras: impl Iterator<Item = (Entity, bevy::render::view::RetainedViewEntity)>,
    pixels: &PixelViews,
) {
    for (view, retained) in cameras {
        let has_pixels = pixels.pipelines.keys().any(|&(v, _)| v == view);
        if first.of_view(view).is_empty() || has_pixels || !opaque.is_empty(&retained) {
            continue;
        }
        for item in first.take(view) {
            let (set, bin) = (&item.batch_set_key, &item.bin_key);
            let batch = (item.entity(), item.main_entity());
            // Its twin was recorded when it was queued.
            let draw = (set.pipeline, set.draw_function);
            opaque.add((view, retained), batch, bin.asset_id, draw, None);
        }
    }
}

/// Whether any camera draws opaque batches first this frame
/// ([`draw_opaque_batches_first`]'s run condition).
pub(crate) fn any_drawn_first(first: Option<Res<GpuCullOpaqueBatches>>) -> bool {
    first.is_some_and(|first| first.0.values().any(|items| !items.is_empty()))
}

/// Draws the view's opaque batches (its [`GpuCullOpaqueBatches`]) in a pass of
/// their own before Bevy's main opaque pass (after the deferred lighting
/// and screen-space reflections, which write a deferred camera's color
/// target first), for each camera that has batches to draw first: not a
/// deferred one, whose lighting pass has written the color target by then
/// from its own depth, nor one with no opaque mesh of Bevy's own (their
/// batches are items of Bevy's phase). Skipped by its run condition where
/// no camera has any.
#[allow(clippy::type_complexity)]
pub(crate) fn draw_opaque_batches_first(
    world: &World,
    view: ViewQuery<
        (
            &ExtractedCamera,
            &ViewTarget,
            &ViewDepthTexture,
            Option<&MainPassResolutionOverride>,
        ),
        Without<DeferredPrepass>,
    >,
    first_items: Res<GpuCullOpaqueBatches>,
    draw_functions: Res<DrawFunctions<Opaque3d>>,
    (pixels, cache): (Res<PixelViews>, Res<PipelineCache>),
    mut ctx: RenderContext,
) {
    let view_entity = view.entity();
    let (camera, target, depth, resolution_override) = view.into_inner();
    let items = first_items.of_view(view_entity);
    if items.is_empty() {
        return;
    }
    let diagnostics = ctx.diagnostic_recorder();
    let diagnostics = diagnostics.as_deref();
    let color_attachments = [Some(target.get_color_attachment())];
    let mut pass = ctx.begin_tracked_render_pass(RenderPassDescriptor {
        label: Some("gpu_cull_opaque_batches"),
        color_attachments: &color_attachments,
        depth_stencil_attachment: Some(depth.get_attachment(StoreOp::Store)),
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    });
    let span = diagnostics.pass_span(&mut pass, "gpu_cull_opaque_batches");
    if let Some(viewport) =
        Viewport::from_viewport_and_override(camera.viewport.as_ref(), resolution_override)
    {
        pass.set_camera_viewport(&viewport);
    }
    let pixel_items = if draw_pixel_depth(&pixels, &cache, view_entity, &mut pass) {
        resolve_items(&pixels, view_entity, &draw_functions)
    } else {
        Vec::new()
    };
    {
        let mut functions = draw_functions.write();
        functions.prepare(world);
        for item in pixel_items.iter().chain(items) {
            let Some(function) = functions.get_mut(item.draw_function()) else {
                continue;
            };
            if let Err(e) = function.draw(world, &mut pass, view_entity, item) {
                error!("GPU culling: drawing a batch failed: {e:?}");
            }
        }
    }
    span.end(&mut pass);
}

/// The view's pixel resolves (`super::pixels`) as items of its opaque
/// phase: one per batch splatted this frame, its material's
/// draw, after the pixels' depth and before the batches' own draws.
fn resolve_items(
    pixels: &PixelViews,
    view: Entity,
    draw_functions: &DrawFunctions<Opaque3d>,
) -> Vec<Opaque3d> {
    let Some(draw_function) = draw_functions.read().get_id::<DrawCulledPixels>() else {
        return Vec::new();
    };
    let Some(view_pixels) = pixels.views.get(&view) else {
        return Vec::new();
    };
    view_pixels
        .splatted
        .keys()
        .filter_map(|entity| {
            let batch = view_pixels.batches.get(entity)?;
            let set = bevy::core_pipeline::core_3d::Opaque3dBatchSetKey {
                pipeline: *pixels.pipelines.get(&(view, *entity))?,
                draw_function,
                material_bind_group_index: None,
                slabs: Default::default(),
                lightmap_slab: None,
            };
            let bin = bevy::core_pipeline::core_3d::Opaque3dBinKey {
                asset_id: AssetId::<Mesh>::default().untyped(),
            };
            Some(Opaque3d::new(
                set,
                bin,
                (*entity, batch.main),
                0..1,
                PhaseItemExtraIndex::None,
            ))
        })
        .collect()
}
