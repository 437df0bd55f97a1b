//! The cull pass, run for each view in `Core3d` before the main pass, and the
//! asynchronous readback of the visible counts.

use super::batches::{BatchCells, GpuBatch};
use super::blend::BlendedDraws;
use super::count_readback::CountReadback;
use super::extract::BatchData;
use super::groups::ViewGroups;
use super::kernels::{RenderCuller, RenderFrame};
use super::member_counts::MemberCountPass;
use super::pyramids::Pyramids;
use super::targets::{GroupOcclusion, ViewTarget, ViewTargets};
use super::views::{
    CameraMatrices, OcclusionQueryData, ViewVolume, camera_volume, cascade_volume, frusta_in, level_frusta,
    occlusion_camera, occlusion_culled, occlusion_jitter, spot_cone,
};
use crate::components::GpuCullFrustumOverride;
use crate::stats::{GpuCullCellStats, StatMessage, StatSender};
use bevy::ecs::system::SystemParam;
use bevy::pbr::{ExtractedDirectionalLight, ExtractedPointLight, LightEntity};
use bevy::prelude::*;
use bevy::render::camera::ExtractedCamera;
use bevy::render::diagnostic::RecordDiagnostics;
use bevy::render::render_resource::PipelineCache;
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue, ViewQuery};
use bevy::render::view::{ExtractedView, ViewDepthTexture};
use cull_core::{
    CellPick, CullRequest, Frustum, INSTANCE_COUNT_OFFSET, KernelSpec, LocalFrame, SizeMetric, VisibilityTest,
};
use std::sync::atomic::{AtomicBool, Ordering};

/// What culling one view needs besides its frustum.
#[derive(SystemParam)]
pub(crate) struct CullResources<'w, 's> {
    batches: Query<'w, 's, (Entity, &'static BatchData, &'static GpuBatch)>,
    targets: Res<'w, ViewTargets>,
    culler: Option<Res<'w, RenderCuller>>,
    queue: Res<'w, RenderQueue>,
    frame: Res<'w, RenderFrame>,
    culled: Res<'w, CulledThisFrame>,
    sender: Res<'w, StatSender>,
    blended: Res<'w, BlendedDraws>,
    device: Res<'w, RenderDevice>,
    counts: Res<'w, CountReadback>,
    member_pass: Option<Res<'w, MemberCountPass>>,
    pipeline_cache: Res<'w, PipelineCache>,
}

/// Set when any view culled a batch this render frame; reported once per
/// frame by [`report_culled_frame`] (shadow views cull too, so a frame has
/// many culls).
#[derive(Resource, Default)]
pub(crate) struct CulledThisFrame(AtomicBool);

/// Sends [`crate::GpuCullStats::culled_frames`]'s message once per frame that culled.
pub(crate) fn report_culled_frame(
    culled: Res<CulledThisFrame>,
    groups_culled: Res<LightGroupsCulled>,
    culler: Option<Res<RenderCuller>>,
    frame: Res<RenderFrame>,
    sender: Res<StatSender>,
) {
    if let Ok(mut groups) = groups_culled.0.lock() {
        groups.clear();
    }
    if culled.0.swap(false, Ordering::Relaxed)
        && let Some(culler) = culler
    {
        let _ = sender.0.lock().map(|s| {
            s.send(StatMessage::Frame {
                variant: culler.culler().variant(),
                frame: frame.0,
            })
        });
    }
}

impl CullResources<'_, '_> {
    /// Culls every batch with a target for the view group `group` (its
    /// views, in their slots' order) against their view volumes, taken
    /// into each batch's frame, in one pass. A batch with levels of detail
    /// is culled into one list per (view, level), each level's band
    /// measured as `camera` sees sizes (the camera's, so that shadow views
    /// take the camera's levels); without a camera such batches are not
    /// culled.
    fn cull(
        &self,
        group: &[Entity],
        volumes: &[ViewVolume],
        camera: Option<CameraMatrices>,
        ctx: &mut RenderContext,
    ) {
        let Some(culler) = &self.culler else {
            return;
        };
        let world_frusta = frusta_in(volumes, &LocalFrame::IDENTITY);
        let mut planned = Vec::new();
        for (batch_entity, data, batch) in &self.batches {
            // Views in the batch's frame; the world's as they are.
            let frame_frusta;
            let frusta = if data.frame.is_identity() {
                &world_frusta
            } else {
                frame_frusta = frusta_in(volumes, &data.frame);
                &frame_frusta
            };
            let metric = camera.map(|c| c.metric(&data.frame));
            let local_bounds = data.cull_bounds(culler.culler().format());
            // The group's target, and the targets of views that cull this
            // batch alone (a batch too large for the group's lists).
            let shared = self.targets.groups.get(&(group[0], batch_entity));
            let alone = group.iter().zip(frusta.iter()).filter_map(|(view, frustum)| {
                let own = self.targets.map.get(&(*view, batch_entity))?;
                let grouped = shared.is_some_and(|g| std::sync::Arc::ptr_eq(&g.target, &own.target));
                (!grouped).then_some((
                    &own.target,
                    std::slice::from_ref(frustum),
                    &own.lod,
                    std::slice::from_ref(view),
                ))
            });
            let together = shared.map(|g| {
                let views = (g.target.views() as usize / g.lod.len().max(1)).min(frusta.len());
                (&g.target, &frusta[..views], &g.lod, group)
            });
            let occlusion = shared.and_then(|g| g.occlusion.as_ref());
            let together = together.map(|t| (t, occlusion));
            let alone = alone.map(|t| (t, None));
            for ((target, frusta, lod, members), occlusion) in together.into_iter().chain(alone) {
                let Some(frusta) = level_frusta(frusta, lod, data.lod_cross_fade, metric) else {
                    self.clear_counts(ctx, target);
                    continue;
                };
                planned.push(PlannedCull {
                    target,
                    frusta: frusta.into_owned(),
                    members,
                    local_bounds,
                    batch,
                    batch_entity,
                    occlusion,
                });
            }
        }
        let (occluded, plain): (Vec<_>, Vec<_>) = planned.into_iter().partition(|p| p.occlusion.is_some());
        for cull in &occluded {
            self.cull_occluded(ctx, cull);
        }
        self.cull_plain(ctx, &plain);
    }

    /// Sorts `camera`'s lists of its blended batches back to front: the
    /// early (or only) lists, or, where `late`, the late phase's.
    fn sort_blended(&self, ctx: &mut RenderContext, camera: (Entity, &ExtractedView), late: bool) {
        for (batch_entity, data, batch) in &self.batches {
            let Some(view_target) = self.targets.map.get(&(camera.0, batch_entity)) else {
                continue;
            };
            let target = match (&view_target.late, late) {
                (_, false) => &view_target.target,
                (Some(lists), true) => &lists.target,
                (None, true) => continue,
            };
            self.blended.sort(
                &self.device,
                ctx.command_encoder(),
                &self.queue,
                camera,
                (batch_entity, data, &batch.input),
                (target, view_target.slot, late),
            );
        }
    }

    /// Reports `pick` for `batch` culled by the group of `first_view`,
    /// under the first view's main-world entities, as its counts are.
    fn send_cell_stats(&self, first_view: Entity, batch_entity: Entity, cells: &BatchCells, pick: CellPick) {
        let Some(main) = self.targets.map.get(&(first_view, batch_entity)) else {
            return;
        };
        let stats = GpuCullCellStats {
            cells: cells.layout.cells(),
            kept: pick.kept,
            by_cells: pick.by_cells,
        };
        let _ = self.sender.0.lock().map(|s| {
            s.send(StatMessage::Cells {
                view: main.main_view,
                batch: main.main_batch,
                cells: stats,
            })
        });
    }

    /// Zeroes every view's instance count in `target`: its batch draws
    /// nothing this frame.
    fn clear_counts(&self, ctx: &mut RenderContext, target: &cull_core::CullTarget) {
        let encoder = ctx.command_encoder();
        for view in 0..target.views() {
            let count = target.draw_args_offset(view) + INSTANCE_COUNT_OFFSET;
            encoder.clear_buffer(target.draw_args(), count, Some(4));
        }
    }

    /// The plain culls of a view group, every batch's, recorded together
    /// (`Culler::cull_all`: the flat ones in one compute pass).
    fn cull_plain(&self, ctx: &mut RenderContext, planned: &[PlannedCull]) {
        let Some(culler) = &self.culler else {
            return;
        };
        // Each batch's targets are its own, and a group's views are in one
        // of them or each in its own: no target twice (`cull_all` refuses).
        debug_assert!(
            {
                let mut seen = bevy::platform::collections::HashSet::new();
                planned.iter().all(|p| seen.insert(std::ptr::from_ref(p.target)))
            },
            "a target planned twice in one view group"
        );
        let requests = planned.iter().map(|cull| cull.request(culler, None));
        let outcomes = culler
            .culler()
            .cull_all(ctx.command_encoder(), &self.queue, requests);
        for (cull, culled) in planned.iter().zip(outcomes) {
            self.after_cull(ctx, cull, culled);
        }
    }

    /// The early phase of occlusion culling for an occluded camera's group:
    /// `cull`'s batch into its target against its frusta.
    fn cull_occluded(&self, ctx: &mut RenderContext, cull: &PlannedCull) {
        let (Some(culler), Some(occlusion)) = (&self.culler, cull.occlusion) else {
            return;
        };
        let request = cull.request(culler, Some(VisibilityTest::OcclusionEarly));
        let encoder = ctx.command_encoder();
        let history = occlusion.history.lock().unwrap_or_else(|e| e.into_inner());
        let culled = culler
            .culler()
            .cull(encoder, &self.queue, request.occlusion_early(&history));
        // The late phase culls by cells where the early phase did.
        let by_cells = culled
            .as_ref()
            .ok()
            .and_then(|o| o.cell_pick)
            .is_some_and(|p| p.by_cells);
        occlusion.by_cells.store(by_cells, Ordering::Relaxed);
        // Without early lists the late phase must draw all it finds
        // visible: forget the history.
        if culled.is_err() {
            history.clear(encoder);
        }
        drop(history);
        self.after_cull(ctx, cull, culled);
    }

    /// What follows a recorded cull: its cells' statistics, its counts'
    /// copy for the CPU, or, where it failed, an empty draw.
    fn after_cull(
        &self,
        ctx: &mut RenderContext,
        cull: &PlannedCull,
        culled: Result<cull_core::CullOutcome, cull_core::CullError>,
    ) {
        if let (Ok(outcome), Some(cells)) = (&culled, &cull.batch.cells)
            && let Some(pick) = outcome.cell_pick
        {
            self.send_cell_stats(cull.members[0], cull.batch_entity, cells, pick);
        }
        if let Err(e) = culled {
            // E.g. GpuCullBounds with a negative radius: draw nothing rather
            // than the survivors of an earlier frame.
            error_once!("GPU culling: {e}; the batch is not drawn");
            self.clear_counts(ctx, cull.target);
            return;
        }
        self.culled.0.store(true, Ordering::Relaxed);
        // Each view's count for the CPU, tagged with this frame; skipped
        // while the previous one is still being mapped.
        let encoder = ctx.command_encoder();
        for &view in cull.members {
            let key = (view, cull.batch_entity);
            let view_target = self.targets.map.get(&key);
            // Only the views whose lists are in this target.
            if let Some(view_target) = view_target.filter(|t| std::ptr::eq(t.target.as_ref(), cull.target)) {
                self.copy_counts(encoder, (key, false), cull.target, view_target);
            }
        }
    }

    /// Records the copy of a view's counts in `lists` (its early or, where
    /// `late`, its late lists) for the CPU, and for a combined batch its
    /// survivors, which hold its members' counts.
    fn copy_counts(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        (key, late): ((Entity, Entity), bool),
        lists: &cull_core::CullTarget,
        view_target: &ViewTarget,
    ) {
        let counts = lists.draw_args_offset(view_target.slot) + INSTANCE_COUNT_OFFSET;
        let source = (lists.draw_args(), counts, view_target.counts_len());
        self.counts
            .copy(encoder, (key, late, false), source, self.frame.0);
        let member_counts = match (&view_target.late, late) {
            (_, false) => view_target.member_counts.as_ref(),
            (Some(lists), true) => lists.member_counts.as_ref(),
            (None, true) => None,
        };
        let pass = self.member_pass.as_ref();
        let pipeline = pass.and_then(|p| self.pipeline_cache.get_compute_pipeline(p.pipeline));
        if let (Some(member_counts), Some(pipeline)) = (member_counts, pipeline) {
            member_counts.record(encoder, pipeline);
            let source = (&member_counts.buffer, 0, view_target.member_counts_len());
            self.counts.copy(encoder, (key, late, true), source, self.frame.0);
        }
    }
}

/// One batch's cull into one target for a view group, planned before any
/// is recorded: the group's plain culls are recorded together.
struct PlannedCull<'a> {
    target: &'a cull_core::CullTarget,
    /// The views' frusta (times the levels'), in the batch's frame.
    frusta: Vec<Frustum>,
    /// The views whose lists are in the target, in their slots' order.
    members: &'a [Entity],
    local_bounds: cull_core::Sphere,
    batch: &'a GpuBatch,
    batch_entity: Entity,
    /// An occluded camera's group: occlusion culling's early phase.
    occlusion: Option<&'a GroupOcclusion>,
}

impl PlannedCull<'_> {
    /// The cull's request, by cells where the batch is sorted into cells,
    /// the kernel that culls them for `test` is compiled and enough is left
    /// unread.
    fn request(&self, culler: &RenderCuller, test: Option<VisibilityTest>) -> CullRequest<'_> {
        let request = CullRequest::new(
            &self.batch.input,
            self.target,
            &self.frusta,
            self.local_bounds,
            self.batch.cull_count(),
        );
        match &self.batch.cells {
            Some(cells) if cells_ready(culler.culler(), self.target, &self.frusta, test) => {
                request.by_cells_if_faster(&cells.layout, &cells.index)
            }
            _ => request,
        }
    }
}

/// Drops the pyramids of views that are gone or no longer occlusion-culled.
pub(crate) fn prune_pyramids(
    pyramids: Res<Pyramids>,
    views: Query<Entity, With<crate::components::GpuCullOcclusion>>,
) {
    if let Ok(mut by_view) = pyramids.by_view.lock() {
        by_view.retain(|view, _| views.contains(*view));
    }
}

/// Occlusion culling's late phase for an occluded camera, after Bevy's early
/// prepass drew the early phase's survivors (and their depth) and before
/// its late prepass: builds the camera's depth pyramid from that depth, then
/// culls each batch's instances in the frustum that pass it and were not
/// drawn early into the late lists. Where that cannot run, the late lists
/// get a plain frustum cull: drawing some instances twice beats losing
/// visible ones.
pub(crate) fn cull_view_late(
    view: ViewQuery<
        (
            Entity,
            &ExtractedView,
            &ViewDepthTexture,
            Option<&GpuCullFrustumOverride>,
            OcclusionQueryData,
        ),
        Without<LightEntity>,
    >,
    resources: CullResources,
    pyramids: Res<Pyramids>,
    device: Res<RenderDevice>,
    mut ctx: RenderContext,
) {
    let (camera, extracted, depth, frozen, occlusion) = view.into_inner();
    // The camera's TemporalJitter, for the late phase's screen rectangles.
    let jitter = occlusion_jitter(occlusion.4.0);
    if !occlusion_culled(occlusion, &pyramids) || resources.culler.is_none() {
        return;
    }
    // No batch of this camera has a late phase (none is queued for it):
    // no pyramid to build. A camera that asks for occlusion culling costs
    // nothing until it has batches to cull.
    let has_late = resources.batches.iter().any(|(batch_entity, _, _)| {
        resources
            .targets
            .map
            .get(&(camera, batch_entity))
            .is_some_and(|t| t.late.is_some())
    });
    if !has_late {
        return;
    }
    let late_camera = LateCamera {
        extracted,
        volume: camera_volume(extracted, frozen),
        matrices: CameraMatrices::of(extracted),
        jitter,
    };
    let mut by_view = pyramids.by_view.lock().unwrap_or_else(|e| e.into_inner());
    fit_pyramid(&mut by_view, camera, depth, &device);
    // The depth pyramid and the late phase, as one span of Bevy's render
    // diagnostics (RenderDiagnosticsPlugin: render/gpu_cull_late/elapsed_gpu).
    let diagnostics = ctx.diagnostic_recorder();
    let diagnostics = diagnostics.as_deref();
    let span = diagnostics.time_span(ctx.command_encoder(), "gpu_cull_late");
    // The pyramid of the depth the early prepass left, built.
    let pyramid = by_view.get(&camera).filter(|pyramid| {
        let world_camera = late_camera.occlusion_in(&LocalFrame::IDENTITY);
        match (&pyramids.builder, world_camera) {
            (Some(builder), Ok(_)) => builder
                .build(
                    device.wgpu_device(),
                    ctx.command_encoder(),
                    &depth.texture,
                    pyramid,
                )
                .map_err(|e| error_once!("bevy-gpu-cull: {e}; the camera is frustum-culled only"))
                .is_ok(),
            _ => false,
        }
    });
    for (batch_entity, data, batch) in &resources.batches {
        resources.cull_batch_late(
            &mut ctx,
            &late_camera,
            (camera, batch_entity),
            data,
            batch,
            pyramid,
        );
    }
    resources.sort_blended(&mut ctx, (camera, extracted), true);
    span.end(ctx.command_encoder());
}

/// What the late phase takes of its camera.
struct LateCamera<'a> {
    extracted: &'a ExtractedView,
    volume: ViewVolume,
    matrices: CameraMatrices,
    /// The camera's TemporalJitter, for the late phase's screen rectangles.
    jitter: f32,
}

impl LateCamera<'_> {
    /// The occlusion camera in a batch's `frame`.
    fn occlusion_in(&self, frame: &LocalFrame) -> Result<cull_core::OcclusionCamera, cull_core::CullError> {
        occlusion_camera(self.extracted, frame).and_then(|c| c.with_jitter(self.jitter))
    }
}

/// Makes `camera`'s depth pyramid fit its depth texture.
fn fit_pyramid(
    by_view: &mut bevy::platform::collections::HashMap<Entity, cull_core::DepthPyramid>,
    camera: Entity,
    depth: &ViewDepthTexture,
    device: &RenderDevice,
) {
    let (width, height) = (depth.texture.width(), depth.texture.height());
    if by_view
        .get(&camera)
        .is_some_and(|p| (p.width(), p.height()) == (width, height))
    {
        return;
    }
    match cull_core::DepthPyramid::new(
        device.wgpu_device(),
        width,
        height,
        cull_core::DepthOrder::ReverseZ,
    ) {
        Ok(p) => {
            by_view.insert(camera, p);
        }
        Err(e) => error_once!("bevy-gpu-cull: {e}"),
    }
}

impl CullResources<'_, '_> {
    /// The late phase of one batch of an occluded camera (`view` is the
    /// camera and the batch): past `pyramid` where it was built, else
    /// everything in the frustum (and the history forgotten).
    fn cull_batch_late(
        &self,
        ctx: &mut RenderContext,
        camera: &LateCamera,
        view: (Entity, Entity),
        data: &BatchData,
        batch: &GpuBatch,
        pyramid: Option<&cull_core::DepthPyramid>,
    ) {
        let Some(culler) = &self.culler else {
            return;
        };
        let (Some(view_target), Some(group)) = (
            self.targets.map.get(&view),
            self.targets.groups.get(&view).and_then(|g| g.occlusion.as_ref()),
        ) else {
            return;
        };
        let Some(late) = &view_target.late else {
            return;
        };
        let frustum = frusta_in(std::slice::from_ref(&camera.volume), &data.frame);
        let metric = camera.matrices.metric(&data.frame);
        let Some(frusta) = level_frusta(&frustum, &view_target.lod, data.lod_cross_fade, Some(metric)) else {
            self.clear_counts(ctx, &late.target);
            return;
        };
        let local_bounds = data.cull_bounds(culler.culler().format());
        let request = || {
            CullRequest::new(
                &batch.input,
                &late.target,
                &frusta,
                local_bounds,
                batch.cull_count(),
            )
        };
        let encoder = ctx.command_encoder();
        let mut history = group.history.lock().unwrap_or_else(|e| e.into_inner());
        let culled = match (pyramid, camera.occlusion_in(&data.frame)) {
            (Some(pyramid), Ok(occlusion_camera)) => {
                let request = request().occlusion_late(&mut history, pyramid, &occlusion_camera);
                // By cells when the early phase was (its pick holds for the
                // same views) and the late phase's kernel is ready.
                let test = Some(VisibilityTest::OcclusionLate);
                let request = match &batch.cells {
                    Some(cells)
                        if group.by_cells.load(Ordering::Relaxed)
                            && cells_ready(culler.culler(), &late.target, &frusta, test) =>
                    {
                        request.by_cells(&cells.index)
                    }
                    _ => request,
                };
                culler.culler().cull(encoder, &self.queue, request)
            }
            _ => Err(cull_core::CullError::InvalidParameter("no depth pyramid")),
        };
        if culled.is_err() {
            // Draw everything in the frustum late (some twice), and forget
            // the history: the next early phase then draws nothing stale.
            history.clear(encoder);
            if let Err(e) = culler.culler().cull(encoder, &self.queue, request()) {
                error_once!("GPU culling: {e}; the batch is not drawn");
                self.clear_counts(ctx, &late.target);
                return;
            }
        }
        self.copy_counts(ctx.command_encoder(), (view, true), &late.target, view_target);
    }
}

/// Culls a camera's batches, before its prepass and main pass, together
/// with the cascades of its directional lights (drawn in the camera's shadow
/// pass): one pass per group of up to `MAX_VIEWS` views
/// ([`ViewGroups`]), each cascade down to the casters whose shadow can fall
/// on what the camera sees at its depths ([`cascade_volume`]), open toward
/// the light, since a caster between the light and the cascade shadows it.
pub(crate) fn cull_view(
    view: ViewQuery<(Entity, &ExtractedView, Option<&GpuCullFrustumOverride>), Without<LightEntity>>,
    light_views: Query<(&ExtractedView, &LightEntity)>,
    directional_lights: Query<&ExtractedDirectionalLight>,
    groups: Res<ViewGroups>,
    resources: CullResources,
    mut ctx: RenderContext,
) {
    let (camera, extracted, frozen) = view.into_inner();
    let camera_matrices = CameraMatrices::of(extracted);
    // The camera's and its cascades' culls, as one span of Bevy's render
    // diagnostics (RenderDiagnosticsPlugin: render/gpu_cull/elapsed_gpu).
    let diagnostics = ctx.diagnostic_recorder();
    let diagnostics = diagnostics.as_deref();
    let span = diagnostics.time_span(ctx.command_encoder(), "gpu_cull");
    for group in groups.culled_by.get(&camera).into_iter().flatten() {
        let volumes: Vec<_> = group
            .iter()
            .map(|&member| {
                if member == camera {
                    return camera_volume(extracted, frozen);
                }
                let Ok((light_view, light)) = light_views.get(member) else {
                    return ViewVolume::Missing("a cascade without a view");
                };
                let Some(m) = light_view.clip_from_world else {
                    return ViewVolume::Missing("a cascade without a matrix");
                };
                match light {
                    LightEntity::Directional {
                        light_entity,
                        cascade_index,
                    } => match directional_lights.get(*light_entity) {
                        Ok(light) => cascade_volume(m, (camera, extracted), light, *cascade_index),
                        Err(_) => ViewVolume::Cascade(m),
                    },
                    _ => ViewVolume::Cascade(m),
                }
            })
            .collect();
        resources.cull(group, &volumes, Some(camera_matrices), &mut ctx);
    }
    resources.sort_blended(&mut ctx, (camera, extracted), false);
    span.end(ctx.command_encoder());
}

/// Culls the batches of a point light's six cube faces together, in the run
/// of whichever face comes first in the frame (Bevy runs each face as a view
/// of its own, before the cameras), or a spot light's view alone: bounded by
/// the light's range, since nothing beyond it is lit or shadowed by the
/// light.
pub(crate) fn cull_light_view(
    view: ViewQuery<(Entity, &ExtractedView, &LightEntity)>,
    light_views: Query<&ExtractedView, With<LightEntity>>,
    groups: Res<ViewGroups>,
    lights: Query<&ExtractedPointLight>,
    cameras: Query<(&ExtractedView, &ExtractedCamera), (With<Camera3d>, Without<LightEntity>)>,
    groups_culled: Res<LightGroupsCulled>,
    resources: CullResources,
    mut ctx: RenderContext,
) {
    let (view_entity, _, light) = view.into_inner();
    let light_entity = match light {
        LightEntity::Point { light_entity, .. } | LightEntity::Spot { light_entity } => *light_entity,
        // Culled with its camera (cull_view).
        LightEntity::Directional { .. } => return,
    };
    let Some(group) = groups.culled_by.get(&view_entity).and_then(|g| g.first()) else {
        return;
    };
    // The faces after the first in this frame find their group culled.
    let first = group.first().copied().unwrap_or(view_entity);
    if !groups_culled
        .0
        .lock()
        .map(|mut culled| culled.insert(first))
        .unwrap_or(true)
    {
        return;
    }
    // A far plane at the range past the near plane: a point within the
    // range of the light lies nearer than that along any view direction.
    let range = lights
        .get(light_entity)
        .ok()
        .map(|l| l.range)
        .filter(|r| r.is_finite() && *r > 0.0);
    let spot = matches!(light, LightEntity::Spot { .. });
    let volumes: Vec<_> = group
        .iter()
        .map(|&member| match light_views.get(member) {
            Ok(extracted) => ViewVolume::View {
                clip_from_view: extracted.clip_from_view,
                world_from_view: extracted.world_from_view.to_matrix(),
                max_distance: range,
                // A spot light's view keeps only what touches its cone.
                cone: spot.then(|| spot_cone(extracted, range)).flatten(),
            },
            Err(_) => ViewVolume::Missing("a light view without matrices"),
        })
        .collect();
    // Levels of detail as the first 3D perspective camera (by order) sees
    // them: a light's views belong to no camera, and an orthographic or
    // render-to-texture helper camera would size them by other rules.
    let camera = cameras
        .iter()
        .filter(|(view, _)| {
            SizeMetric::from_view(view.clip_from_view, view.world_from_view.to_matrix()).perspective
        })
        .min_by_key(|(_, camera)| camera.order)
        .map(|(view, _)| CameraMatrices::of(view));
    // Bevy's render diagnostics: render/gpu_cull_light/elapsed_gpu.
    let diagnostics = ctx.diagnostic_recorder();
    let diagnostics = diagnostics.as_deref();
    let span = diagnostics.time_span(ctx.command_encoder(), "gpu_cull_light");
    resources.cull(group, &volumes, camera, &mut ctx);
    span.end(ctx.command_encoder());
}

/// The light view groups culled this frame (by first view): a point light's
/// faces are culled in the first face's run, and skipped in the others'.
/// Cleared once a frame by [`report_culled_frame`].
#[derive(Resource, Default)]
pub(crate) struct LightGroupsCulled(pub std::sync::Mutex<bevy::platform::collections::HashSet<Entity>>);

/// Whether `target`'s kernel that culls by cells is compiled, for an
/// occlusion phase's `test` or else for the test `frusta` vote with (or the
/// frustum test's, which keeps the same instances).
fn cells_ready(
    culler: &cull_core::Culler,
    target: &cull_core::CullTarget,
    frusta: &[Frustum],
    phase: Option<VisibilityTest>,
) -> bool {
    let ready = |test| culler.has_pipelines(KernelSpec::cells(target.windows(), target.views(), test));
    match phase {
        Some(test) => ready(test),
        None => ready(VisibilityTest::for_views(frusta)) || ready(VisibilityTest::Frustum),
    }
}
