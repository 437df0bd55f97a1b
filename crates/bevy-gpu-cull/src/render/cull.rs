//! The cull pass, run for each view in `Core3d` before the main pass, and the
//! asynchronous readback of the visible counts.

use super::BatchData;
use super::prepare::{GpuBatch, RenderCuller, RenderFrame, ViewTargets};
use crate::components::CullingFrustumOverride;
use crate::plugin::{StatMessage, StatSender};
use bevy::ecs::system::SystemParam;
use bevy::pbr::{ExtractedPointLight, LightEntity, ViewLightEntities};
use bevy::prelude::*;
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue, ViewQuery};
use bevy::render::view::ExtractedView;
use cull_core::{CullParams, Frustum, INSTANCE_COUNT_OFFSET};
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
}

/// Set when any view culled a batch this render frame; reported once per
/// frame by [`report_culled_frame`] (shadow views cull too, so a frame has
/// many culls).
#[derive(Resource, Default)]
pub(crate) struct CulledThisFrame(AtomicBool);

/// Sends [`crate::GpuCullStats::culled_frames`]'s message once per frame that culled.
pub(crate) fn report_culled_frame(
    culled: Res<CulledThisFrame>,
    culler: Option<Res<RenderCuller>>,
    frame: Res<RenderFrame>,
    sender: Res<StatSender>,
) {
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
    /// Culls every batch with a target for `view` against `frustum`.
    fn cull(&self, view: Entity, frustum: Result<Frustum, cull_core::CullError>, ctx: &mut RenderContext) {
        let Some(culler) = &self.culler else {
            return;
        };
        // A view whose matrices give no frustum keeps everything: drawing too
        // much beats losing what may be visible, or drawing last frame's set.
        let frustum = frustum.unwrap_or_else(|e| {
            warn_once!("GPU culling: a view has no usable frustum ({e}); its batches are drawn unculled");
            Frustum::everything()
        });
        for (batch_entity, data, batch) in &self.batches {
            let Some(target) = self.targets.map.get(&(view, batch_entity)) else {
                continue;
            };
            // A format without scale culls with bounds covering every scale
            // the draw applies, so it is never less conservative than the draw.
            let local_bounds = if culler.culler().format().carries_scale() {
                data.bounds
            } else {
                data.scales.cover(data.bounds)
            };
            let params = CullParams {
                frustum,
                local_bounds,
                count: batch.count,
            };
            let encoder = ctx.command_encoder();
            if let Err(e) = culler
                .culler()
                .cull(encoder, &self.queue, &batch.input, &target.target, &params)
            {
                // E.g. GpuCullBounds with a negative radius: draw nothing rather
                // than the survivors of an earlier frame.
                error_once!("GPU culling: {e}; the batch is not drawn");
                encoder.clear_buffer(target.target.draw_args(), INSTANCE_COUNT_OFFSET, Some(4));
                continue;
            }
            self.culled.0.store(true, Ordering::Relaxed);
            // The count for the CPU, tagged with this frame; skipped while the
            // previous one is still being mapped.
            target.counts.copy(
                encoder,
                target.target.draw_args(),
                INSTANCE_COUNT_OFFSET,
                4,
                self.frame.0,
            );
        }
    }
}

/// A camera's frustum, from its two matrices where Bevy has them: the planes
/// are then moved into the world in f64, exact far from the origin.
fn camera_frustum(
    view: &ExtractedView,
    frozen: Option<&CullingFrustumOverride>,
) -> Result<Frustum, cull_core::CullError> {
    match (frozen, view.clip_from_world) {
        (Some(frozen), _) => Frustum::from_clip_from_world(frozen.clip_from_world, None),
        (None, Some(clip_from_world)) => Frustum::from_clip_from_world(clip_from_world, None),
        (None, None) => Frustum::from_view(view.clip_from_view, view.world_from_view.to_matrix(), None),
    }
}

/// Culls a camera's batches, before its prepass and main pass.
pub(crate) fn cull_view(
    view: ViewQuery<(Entity, &ExtractedView, Option<&CullingFrustumOverride>), Without<LightEntity>>,
    resources: CullResources,
    mut ctx: RenderContext,
) {
    let (view_entity, extracted, frozen) = view.into_inner();
    resources.cull(view_entity, camera_frustum(extracted, frozen), &mut ctx);
}

/// Culls the batches of a camera's directional-light cascades (drawn in the
/// camera's shadow pass), each against its cascade opened toward the light:
/// a caster between the light and the cascade shadows it.
pub(crate) fn cull_cascades(
    view: ViewQuery<&ViewLightEntities>,
    light_views: Query<(&ExtractedView, &LightEntity)>,
    resources: CullResources,
    mut ctx: RenderContext,
) {
    for &light_view in &view.into_inner().lights {
        let Ok((extracted, LightEntity::Directional { .. })) = light_views.get(light_view) else {
            continue;
        };
        let frustum = match extracted.clip_from_world {
            Some(m) => Frustum::from_shadow_cascade(m),
            None => Err(cull_core::CullError::DegenerateFrustum(
                "a cascade without a matrix",
            )),
        };
        resources.cull(light_view, frustum, &mut ctx);
    }
}

/// Culls the batches of a point light's cube face or a spot light (views of
/// their own, run before the cameras), bounded by the light's range: nothing
/// beyond it is lit or shadowed by the light.
pub(crate) fn cull_light_view(
    view: ViewQuery<(Entity, &ExtractedView, &LightEntity)>,
    lights: Query<&ExtractedPointLight>,
    resources: CullResources,
    mut ctx: RenderContext,
) {
    let (view_entity, extracted, light) = view.into_inner();
    let light_entity = match light {
        LightEntity::Point { light_entity, .. } | LightEntity::Spot { light_entity } => *light_entity,
        // Culled with its camera (cull_cascades).
        LightEntity::Directional { .. } => return,
    };
    // A far plane at the range past the near plane: a point within the
    // range of the light lies nearer than that along any view direction.
    let range = lights
        .get(light_entity)
        .ok()
        .map(|l| l.range)
        .filter(|r| r.is_finite() && *r > 0.0);
    let frustum = Frustum::from_view(
        extracted.clip_from_view,
        extracted.world_from_view.to_matrix(),
        range,
    );
    resources.cull(view_entity, frustum, &mut ctx);
}

/// Starts mapping the counts copied this frame and forwards the ones that
/// arrived, never waiting for the GPU.
pub(crate) fn read_back_counts(
    targets: Res<ViewTargets>,
    device: Res<RenderDevice>,
    sender: Res<StatSender>,
) {
    let Ok(sender) = sender.0.lock() else {
        return;
    };
    for target in targets.map.values() {
        if let Some((bytes, frame)) = target.counts.poll() {
            let count = u32::from_le_bytes(bytes[..4].try_into().expect("four bytes"));
            target
                .last_count
                .store(count, std::sync::atomic::Ordering::Relaxed);
            let _ = sender.send(match target.shadow {
                Some(view) => StatMessage::ShadowVisible {
                    view,
                    batch: target.main_batch,
                    count,
                },
                None => StatMessage::Visible {
                    view: target.main_view,
                    batch: target.main_batch,
                    count,
                    frame,
                },
            });
        }
        if let Some(timings) = target.target.poll_timings() {
            let _ = sender.send(StatMessage::Timing {
                view: target.main_view,
                shadow: target.shadow,
                batch: target.main_batch,
                timings,
            });
        }
    }
    let _ = device.wgpu_device().poll(wgpu::PollType::Poll);
}
