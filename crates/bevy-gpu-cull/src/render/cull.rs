//! The cull pass, run for each view in `Core3d` before the main pass, and the
//! asynchronous readback of the visible counts.

use super::BatchData;
use super::prepare::{GpuBatch, RenderCuller, RenderFrame, ViewTargets};
use crate::components::CullingFrustumOverride;
use crate::plugin::{StatMessage, StatSender};
use bevy::prelude::*;
use bevy::render::renderer::{RenderContext, RenderDevice, RenderQueue, ViewQuery};
use bevy::render::view::ExtractedView;
use cull_core::{CullParams, Frustum, INSTANCE_COUNT_OFFSET};

pub(crate) fn cull_view(
    view: ViewQuery<(Entity, &ExtractedView, Option<&CullingFrustumOverride>)>,
    batches: Query<(Entity, &BatchData, &GpuBatch)>,
    targets: Res<ViewTargets>,
    culler: Option<Res<RenderCuller>>,
    queue: Res<RenderQueue>,
    sender: Res<StatSender>,
    frame: Res<RenderFrame>,
    mut ctx: RenderContext,
) {
    let Some(culler) = culler else {
        return;
    };
    let (view_entity, extracted, frozen) = view.into_inner();
    // From the view's two matrices where Bevy has them: the planes are then
    // moved into the world in f64, exact far from the origin.
    let frustum = match (frozen, extracted.clip_from_world) {
        (Some(frozen), _) => Frustum::from_clip_from_world(frozen.clip_from_world, None),
        (None, Some(clip_from_world)) => Frustum::from_clip_from_world(clip_from_world, None),
        (None, None) => Frustum::from_view(
            extracted.clip_from_view,
            extracted.world_from_view.to_matrix(),
            None,
        ),
    };
    // A view whose matrices give no frustum keeps everything: drawing too
    // much beats losing what may be visible, or drawing last frame's set.
    let frustum = frustum.unwrap_or_else(|e| {
        warn_once!("GPU culling: a view has no usable frustum ({e}); its batches are drawn unculled");
        Frustum::everything()
    });
    let mut culled = false;
    for (batch_entity, data, batch) in &batches {
        let Some(target) = targets.map.get(&(view_entity, batch_entity)) else {
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
            .cull(encoder, &queue, &batch.input, &target.target, &params)
        {
            // E.g. GpuCullBounds with a negative radius: draw nothing rather
            // than the survivors of an earlier frame.
            error_once!("GPU culling: {e}; the batch is not drawn");
            encoder.clear_buffer(target.target.draw_args(), INSTANCE_COUNT_OFFSET, Some(4));
            continue;
        }
        culled = true;
        // The count for the CPU, tagged with this frame; skipped while the
        // previous one is still being mapped.
        target.counts.copy(
            encoder,
            target.target.draw_args(),
            INSTANCE_COUNT_OFFSET,
            4,
            frame.0,
        );
    }
    if culled {
        let _ = sender.0.lock().map(|s| {
            s.send(StatMessage::Frame {
                variant: culler.culler().variant(),
                frame: frame.0,
            })
        });
    }
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
            let _ = sender.send(StatMessage::Visible {
                view: target.main_view,
                batch: target.main_batch,
                count,
                frame,
            });
        }
        if let Some(timings) = target.target.poll_timings() {
            let _ = sender.send(StatMessage::Timing {
                view: target.main_view,
                batch: target.main_batch,
                timings,
            });
        }
    }
    let _ = device.wgpu_device().poll(wgpu::PollType::Poll);
}
