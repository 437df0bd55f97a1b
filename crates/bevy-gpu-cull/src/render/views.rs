//! Each view's volumes as the cull needs them: whether a camera is
//! occlusion-culled, and how its frustum, its level-of-detail metric and
//! its occlusion camera are built, in `f64` from the matrices
//! Bevy gives, so that each can be built in a batch's own frame
//! (`cull_core::LocalFrame`).

use crate::components::GpuCullFrustumOverride;
use bevy::pbr::ExtractedDirectionalLight;
use bevy::prelude::*;
use bevy::render::view::ExtractedView;
use cull_core::{Frustum, LocalFrame, ShadowReceivers, SizeMetric, SpotCone};

/// How a view's frustum is built, so that it can be built in each batch's
/// frame ([`LocalFrame`]): in `f64` from the matrices Bevy gives, never
/// from planes already rounded in the world.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ViewVolume {
    /// A camera's or a light's projection and transform, bounded by
    /// `max_distance` (a light's range) where given, and for a spot light
    /// by the cone it lights.
    View {
        clip_from_view: Mat4,
        world_from_view: Mat4,
        max_distance: Option<f32>,
        cone: Option<SpotCone>,
    },
    /// A `clip_from_world` matrix (Bevy's, or a frozen
    /// `GpuCullFrustumOverride`).
    ClipFromWorld(Mat4),
    /// A directional light's cascade, open toward the light.
    Cascade(Mat4),
    /// A directional light's cascade, down to the casters whose shadow can
    /// fall on what its camera sees at the cascade's depths (the cascade
    /// itself where the receivers give no volume).
    CascadeReach(Mat4, ShadowReceivers),
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
                cone,
            } => {
                let frustum = frame.frustum_from_view(clip_from_view, world_from_view, max_distance)?;
                // A frame that is no similarity has no cone: the frustum
                // alone, which keeps more.
                Ok(match cone.and_then(|cone| frame.spot_cone(cone)) {
                    Some(cone) => frustum.with_cone(cone),
                    None => frustum,
                })
            }
            Self::ClipFromWorld(m) => frame.frustum_from_clip_from_world(m),
            Self::Cascade(m) => frame.shadow_cascade(m),
            Self::CascadeReach(m, receivers) => frame
                .shadow_receivers(&receivers)
                .or_else(|_| frame.shadow_cascade(m)),
            Self::Missing(why) => Err(cull_core::CullError::DegenerateFrustum(why)),
        }
    }
}

/// Shadow-map texels beyond the normal bias that the receivers of a
/// directional light's cascade are widened by: what Bevy's shadow filters
/// read around a lookup (Gaussian: two and a half texels; hardware: one),
/// with room to spare.
const CASCADE_MARGIN_TEXELS: f32 = 8.0;

/// World units the receivers are widened by besides: Bevy's temporal
/// filter reads a spiral whose radius is a fudge factor in world units,
/// 0.015 plus about the texel size (`calculate_uv_offset_scale_jimenez_fourteen`),
/// which at small texels is more than [`CASCADE_MARGIN_TEXELS`].
const TEMPORAL_FILTER_REACH: f32 = 0.015;

/// The volume of cascade `index` of `light` for `camera` (`clip_from_world`
/// the cascade's): the casters whose shadow can fall on what the camera
/// sees at the depths Bevy reads the cascade at (the first from the
/// camera's near plane, each later one from its overlap with the previous
/// one), widened by the normal bias, [`CASCADE_MARGIN_TEXELS`],
/// [`TEMPORAL_FILTER_REACH`] and a negative depth bias (which moves the
/// lookup away from the light). The whole cascade where the light has soft
/// shadows, whose blocker search reads farther than any fixed margin, or
/// where Bevy has no such cascade.
pub(crate) fn cascade_volume(
    clip_from_world: Mat4,
    (camera_entity, camera): (Entity, &ExtractedView),
    light: &ExtractedDirectionalLight,
    index: usize,
) -> ViewVolume {
    let config = &light.cascade_shadow_config;
    let texel_size = light
        .cascades
        .get(&camera_entity)
        .and_then(|cascades| cascades.get(index))
        .map(|cascade| cascade.texel_size);
    let (Some(&far), Some(texel_size), None) = (config.bounds.get(index), texel_size, light.soft_shadow_size)
    else {
        return ViewVolume::Cascade(clip_from_world);
    };
    // Bevy reads the first cascade for everything nearer than its far
    // bound (`get_cascade_index`), and blends each later one in from its
    // overlap with the previous one.
    let near = match index {
        0 => f32::NEG_INFINITY,
        _ => config.bounds[index - 1] * (1.0 - config.overlap_proportion),
    };
    // The extracted normal bias is Bevy's, times √2 for a diagonal offset.
    let texels = CASCADE_MARGIN_TEXELS + light.shadow_normal_bias.abs();
    let margin = texel_size * texels + TEMPORAL_FILTER_REACH + (-light.shadow_depth_bias).max(0.0);
    ViewVolume::CascadeReach(
        clip_from_world,
        ShadowReceivers {
            clip_from_view: camera.clip_from_view,
            world_from_view: camera.world_from_view.to_matrix(),
            near,
            far,
            // As Bevy builds the cascades: from the light's rotation alone.
            light_direction: light.transform.rotation() * Vec3::NEG_Z,
            margin,
        },
    )
}

/// Shadow-map texels the cone of a spot light's view is widened by on each
/// side: what Bevy's shadow filters (at most a few texels around the
/// sample) and its normal bias (a texel or two) may read across the cone's
/// edge, where a caster just outside the cone shades a lit point just
/// inside.
const SPOT_CONE_MARGIN_TEXELS: f32 = 8.0;

/// The cone a spot light's shadow view (`view`) lights, bounded by its
/// `range`: the light's position and direction, and the half angle of the
/// view's square projection (Bevy's `spot_light_clip_from_view` of the
/// outer angle, whose `1 / y_axis.y` is the angle's tangent), widened by
/// [`SPOT_CONE_MARGIN_TEXELS`] of its shadow map. Outside it nothing is
/// lit by the light, so no caster there shadows anything; only the corners
/// of the square map lie outside it. `None` (the frustum alone) for a view
/// whose projection is not such a square.
pub(crate) fn spot_cone(view: &ExtractedView, range: Option<f32>) -> Option<SpotCone> {
    let projection = view.clip_from_view;
    let tan = 1.0 / projection.y_axis.y;
    let square = projection.x_axis.x == projection.y_axis.y && projection.w_axis.w == 0.0;
    if !(square && tan.is_finite() && tan > 0.0) {
        return None;
    }
    let texels = view.viewport.z.max(1) as f32;
    let half_angle = (tan * (1.0 + 2.0 * SPOT_CONE_MARGIN_TEXELS / texels))
        .atan()
        .min(std::f32::consts::FRAC_PI_2);
    let apex = view.world_from_view.translation();
    let axis = view.world_from_view.forward().as_vec3();
    SpotCone::new(apex, axis, half_angle, range.unwrap_or(f32::INFINITY)).ok()
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

/// A camera's view volume: a frozen `GpuCullFrustumOverride`, else Bevy's
/// `clip_from_world` where it has one, else the camera's two matrices (the
/// planes then moved into the world, or a batch's frame, in f64: exact far
/// from the origin).
pub(crate) fn camera_volume(view: &ExtractedView, frozen: Option<&GpuCullFrustumOverride>) -> ViewVolume {
    match (frozen, view.clip_from_world) {
        (Some(frozen), _) => ViewVolume::ClipFromWorld(frozen.clip_from_world),
        (None, Some(clip_from_world)) => ViewVolume::ClipFromWorld(clip_from_world),
        (None, None) => ViewVolume::View {
            clip_from_view: view.clip_from_view,
            world_from_view: view.world_from_view.to_matrix(),
            max_distance: None,
            cone: None,
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

/// What decides whether a camera view is occlusion-culled, as the render
/// world has it.
pub(crate) type OcclusionQueryData = (
    Has<crate::components::GpuCullOcclusion>,
    Has<bevy::core_pipeline::prepass::DepthPrepass>,
    Has<bevy::render::occlusion_culling::OcclusionCulling>,
    Option<&'static bevy::render::camera::ExtractedCamera>,
    (
        Option<&'static bevy::render::camera::TemporalJitter>,
        Has<bevy::render::view::NoIndirectDrawing>,
        Has<bevy::camera::MainPassResolutionOverride>,
        Option<&'static ExtractedView>,
    ),
);

/// Whether a camera with these components is occlusion-culled: it asks for
/// it ([`crate::GpuCullOcclusion`]) and has what it needs, Bevy's early and
/// late prepasses (`DepthPrepass` and `OcclusionCulling`, without
/// `NoIndirectDrawing`), no custom viewport or resolution override, and
/// temporal jitter (TAA) only on a perspective projection, where it moves
/// everything drawn by the same offset ([`occlusion_jitter`]). A camera
/// that asks without them is warned about once. MSAA needs nothing: the
/// pyramid takes each pixel's farthest sample (`cull_core::PyramidBuilder`).
/// On a device that cannot build depth pyramids (wgpu's GL backend) no
/// camera is: [`crate::GpuCullStats::occlusion_unavailable`] says why, and
/// a warning was logged when the plugin started.
pub(crate) fn occlusion_culled(
    (asks, depth_prepass, occlusion_culling, camera, (jitter, no_indirect, resolution_override, view)): bevy::ecs::query::QueryItem<
        '_,
        '_,
        OcclusionQueryData,
    >,
    pyramids: &super::pyramids::Pyramids,
) -> bool {
    if !asks || !pyramids.available() {
        return false;
    }
    if !(depth_prepass && occlusion_culling) || no_indirect {
        warn_once!(
            "bevy-gpu-cull: GpuCullOcclusion needs Bevy's DepthPrepass and OcclusionCulling on the camera \
             (and no NoIndirectDrawing); its batches are frustum-culled only"
        );
        return false;
    }
    // Bevy's jitter (TemporalJitter::jitter_projection) moves what a
    // projection whose w is the view depth (every perspective one) draws by
    // the offset, in pixels, at every depth: the late phase widens its
    // rectangles by that. Another projection's shift scales with its w row,
    // an orthographic one's with the view depth: no margin bounds them.
    if let Some(jitter) = jitter {
        let w_is_depth = view.is_some_and(|v| v.clip_from_view.row(3) == Vec4::new(0.0, 0.0, -1.0, 0.0));
        if !(w_is_depth && jitter.offset.is_finite()) {
            warn_once!(
                "bevy-gpu-cull: occlusion culling with TemporalJitter (TAA) needs a perspective projection \
                 and a finite offset; the camera's batches are frustum-culled only"
            );
            return false;
        }
    }
    if camera.is_some_and(|c| c.viewport.is_some()) || resolution_override {
        warn_once!(
            "bevy-gpu-cull: occlusion culling of a camera with a custom viewport or resolution override \
             is not supported; its batches are frustum-culled only"
        );
        return false;
    }
    true
}

/// How far, in pixels, a camera's temporal jitter moves what it draws from
/// its unjittered projection (the one the late phase tests with): the
/// offset's larger component, which Bevy adds to a perspective projection
/// as the same shift at every depth (`TemporalJitter::jitter_projection`).
pub(crate) fn occlusion_jitter(jitter: Option<&bevy::render::camera::TemporalJitter>) -> f32 {
    jitter.map_or(0.0, |j| j.offset.abs().max_element())
}
