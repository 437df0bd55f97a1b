//! What each view is, as the cull needs it: how its frustum, its
//! level-of-detail metric and its occlusion camera are built, in `f64`
//! from the matrices Bevy gives, so that each can be built in a batch's
//! own frame (`cull_core::LocalFrame`).

use crate::components::CullingFrustumOverride;
use bevy::prelude::*;
use bevy::render::view::ExtractedView;
use cull_core::{Frustum, LocalFrame, SizeMetric};

/// How a view's frustum is built, so that it can be built in each batch's
/// frame ([`LocalFrame`]): in `f64` from the matrices Bevy gives, never
/// from planes already rounded in the world.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ViewVolume {
    /// A camera's or a light's projection and transform, bounded by
    /// `max_distance` (a light's range) where given.
    View {
        clip_from_view: Mat4,
        world_from_view: Mat4,
        max_distance: Option<f32>,
    },
    /// A `clip_from_world` matrix (Bevy's, or a frozen
    /// `CullingFrustumOverride`).
    ClipFromWorld(Mat4),
    /// A directional light's cascade, open toward the light.
    Cascade(Mat4),
    /// A view without matrices.
    Missing(&'static str),
}

impl ViewVolume {
    pub(crate) fn frustum(&self, frame: &LocalFrame) -> Result<Frustum, cull_core::CullError> {
        match *self {
            Self::View {
                clip_from_view,
                world_from_view,
                max_distance,
            } => frame.frustum_from_view(clip_from_view, world_from_view, max_distance),
            Self::ClipFromWorld(m) => frame.frustum_from_clip_from_world(m),
            Self::Cascade(m) => frame.shadow_cascade(m),
            Self::Missing(why) => Err(cull_core::CullError::DegenerateFrustum(why)),
        }
    }
}

/// The views' frusta in `frame`. A view whose matrices give no frustum
/// keeps everything: drawing too much beats losing what may be visible, or
/// drawing last frame's set.
pub(crate) fn frusta_in(volumes: &[ViewVolume], frame: &LocalFrame) -> Vec<Frustum> {
    volumes
        .iter()
        .map(|v| {
            v.frustum(frame).unwrap_or_else(|e| {
                warn_once!("GPU culling: a view has no usable frustum ({e}); its batches are drawn unculled");
                Frustum::everything()
            })
        })
        .collect()
}

/// The camera that sizes levels of detail: its projection and transform.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CameraMatrices {
    clip_from_view: Mat4,
    world_from_view: Mat4,
}

impl CameraMatrices {
    pub(crate) fn of(view: &ExtractedView) -> Self {
        Self {
            clip_from_view: view.clip_from_view,
            world_from_view: view.world_from_view.to_matrix(),
        }
    }

    /// Sizes as this camera sees them, measured in `frame`.
    pub(crate) fn metric(&self, frame: &LocalFrame) -> SizeMetric {
        frame.size_metric(self.clip_from_view, self.world_from_view)
    }
}

/// A camera's view volume: a frozen `CullingFrustumOverride`, else Bevy's
/// `clip_from_world` where it has one, else the camera's two matrices (the
/// planes then moved into the world, or a batch's frame, in f64: exact far
/// from the origin).
pub(crate) fn camera_volume(view: &ExtractedView, frozen: Option<&CullingFrustumOverride>) -> ViewVolume {
    match (frozen, view.clip_from_world) {
        (Some(frozen), _) => ViewVolume::ClipFromWorld(frozen.clip_from_world),
        (None, Some(clip_from_world)) => ViewVolume::ClipFromWorld(clip_from_world),
        (None, None) => ViewVolume::View {
            clip_from_view: view.clip_from_view,
            world_from_view: view.world_from_view.to_matrix(),
            max_distance: None,
        },
    }
}

/// The projection the frustum and Bevy's draws use, in `frame`: its
/// `clip_from_world` where Bevy has one, about the camera's position.
pub(crate) fn occlusion_camera(
    view: &ExtractedView,
    frame: &LocalFrame,
) -> Result<cull_core::OcclusionCamera, cull_core::CullError> {
    match view.clip_from_world {
        Some(clip_from_world) => {
            frame.occlusion_from_clip_from_world(clip_from_world, view.world_from_view.translation())
        }
        None => frame.occlusion_from_view(view.clip_from_view, view.world_from_view.to_matrix()),
    }
}

/// `frusta` with each view's levels of detail in its slots, in order, sized
/// by `metric`, each reaching `cross_fade` above the finer level's threshold
/// (`GpuCullLod::with_cross_fade`: an instance in a fade is in both lists);
/// `frusta` itself without levels. `None` when the batch must
/// draw nothing: levels without a camera to size them (rather than an
/// earlier frame's lists), or levels the frustum refuses.
pub(crate) fn level_frusta<'a>(
    frusta: &'a [Frustum],
    lod: &[f32],
    cross_fade: f32,
    metric: Option<SizeMetric>,
) -> Option<std::borrow::Cow<'a, [Frustum]>> {
    if lod.is_empty() {
        return Some(std::borrow::Cow::Borrowed(frusta));
    }
    let metric = metric?;
    match frusta
        .iter()
        .map(|f| f.detail_levels_overlapping(metric, lod, cross_fade))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(levels) => Some(std::borrow::Cow::Owned(levels.concat())),
        Err(e) => {
            error_once!("GPU culling: {e}; the batch is not drawn");
            None
        }
    }
}
