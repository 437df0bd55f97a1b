//! What each view is to the cull ([`ViewKind`]) and which views are culled
//! together in one pass, decided once per frame by [`prepare_view_groups`]
//! and read by every later stage: the targets (a group's lists in one
//! target, each view at its slot), the culls (one pass per group) and the
//! statistics (whose counts a view's are).

use super::pyramids::Pyramids;
use super::views::{OcclusionQueryData, occlusion_culled};
use crate::stats::GpuCullShadowView;
use bevy::pbr::{LightEntity, ViewLightEntities};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::sync_world::MainEntity;
use bevy::render::view::ExtractedView;
use cull_core::MAX_VIEWS;

/// What a view is to the cull.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ViewKind {
    /// A camera: culled with the cascades of the directional lights it
    /// draws shadows for, or, occlusion-culled, alone in two phases.
    Camera { occluded: bool },
    /// A directional light's cascade, culled with its camera (alone where
    /// no camera took it in).
    Cascade,
    /// One of a point light's cube faces, culled with the light's others.
    PointFace,
    /// A spot light's view, culled alone.
    Spot,
}

impl ViewKind {
    /// Whether it is culled in two phases (occlusion culling).
    pub(crate) fn occluded(self) -> bool {
        matches!(self, Self::Camera { occluded: true })
    }
}

/// A view's place among the views culled with it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ViewPlace {
    pub kind: ViewKind,
    /// The group's first view, which names the group.
    pub group: Entity,
    /// The view's place in the group, in views.
    pub slot: u32,
    /// Views in the group.
    pub group_views: u32,
    /// The main-world entity whose statistics the view's counts go under:
    /// the camera's, or the light's.
    pub main_view: Entity,
    /// The light view it is, for a shadow view.
    pub shadow: Option<GpuCullShadowView>,
}

/// Every view's kind and group this frame.
#[derive(Resource, Default)]
pub(crate) struct ViewGroups {
    /// Each culled view's place.
    pub places: HashMap<Entity, ViewPlace>,
    /// The groups each cull system culls, by the view it runs for: a
    /// camera's (the camera with its cascades, in order); a point light's
    /// faces, under every face (culled in whichever face's run comes first);
    /// a spot light's view alone.
    pub culled_by: HashMap<Entity, Vec<Vec<Entity>>>,
}

impl ViewGroups {
    /// The place of `view` in `group` (given in slot order).
    fn place_group(
        &mut self,
        group: &[Entity],
        kind_of: impl Fn(Entity) -> Option<(ViewKind, Entity, Option<GpuCullShadowView>)>,
    ) {
        for (slot, &member) in group.iter().enumerate() {
            let Some((kind, main_view, shadow)) = kind_of(member) else {
                continue;
            };
            self.places.insert(
                member,
                ViewPlace {
                    kind,
                    group: group[0],
                    slot: slot as u32,
                    group_views: group.len() as u32,
                    main_view,
                    shadow,
                },
            );
        }
    }
}

/// The views [`prepare_view_groups`] reads.
type GroupedViews<'a> = (
    Entity,
    &'a ExtractedView,
    Option<&'a MainEntity>,
    Option<&'a ViewLightEntities>,
    Option<&'a LightEntity>,
    OcclusionQueryData,
);

/// Decides each view's kind and group for this frame.
pub(crate) fn prepare_view_groups(
    views: Query<GroupedViews>,
    pyramids: Res<Pyramids>,
    mut groups: ResMut<ViewGroups>,
) {
    let groups = &mut *groups;
    groups.places.clear();
    groups.culled_by.clear();
    let kind_of = |view: Entity| {
        let (_, extracted, main_view, _, light, occlusion) = views.get(view).ok()?;
        view_kind(
            extracted,
            main_view,
            light,
            occlusion_culled(occlusion, &pyramids),
        )
    };
    let is_cascade = |e| matches!(kind_of(e), Some((ViewKind::Cascade, ..)));
    for (view, _, main_view, lights, light, occlusion) in &views {
        let culled = match light {
            None if main_view.is_some() => {
                camera_groups(view, lights, is_cascade, occlusion_culled(occlusion, &pyramids))
            }
            // A light's faces are found once, by its first face met, and
            // filed under every face.
            Some(LightEntity::Point { .. }) if groups.culled_by.contains_key(&view) => continue,
            Some(LightEntity::Point { light_entity, .. }) => {
                let light_views = views.iter().filter_map(|(e, _, _, _, l, _)| l.map(|l| (e, l)));
                let faces = point_light_faces(*light_entity, light_views);
                groups.place_group(&faces, kind_of);
                for &face in &faces {
                    groups.culled_by.insert(face, vec![faces.clone()]);
                }
                continue;
            }
            Some(LightEntity::Spot { .. }) => vec![vec![view]],
            _ => continue,
        };
        for group in &culled {
            groups.place_group(group, kind_of);
        }
        groups.culled_by.insert(view, culled);
    }
    // A cascade no camera took in is a group of its own.
    for (view, ..) in &views {
        if !groups.places.contains_key(&view) && is_cascade(view) {
            groups.place_group(&[view], kind_of);
        }
    }
}

/// What `view` is, whose statistics its counts go under and which light
/// view it is; `None` for a view the plugin does not cull (one with no
/// main-world entity that is no light's).
fn view_kind(
    extracted: &ExtractedView,
    main_view: Option<&MainEntity>,
    light: Option<&LightEntity>,
    occluded: bool,
) -> Option<(ViewKind, Entity, Option<GpuCullShadowView>)> {
    let Some(light) = light else {
        let camera = ViewKind::Camera { occluded };
        return main_view.map(|main| (camera, main.id(), None));
    };
    let rve = extracted.retained_view_entity;
    let camera = rve.auxiliary_entity.id();
    let id = GpuCullShadowView {
        light: rve.main_entity.id(),
        camera: (camera != Entity::PLACEHOLDER).then_some(camera),
        index: rve.subview_index,
    };
    let kind = match light {
        LightEntity::Directional { .. } => ViewKind::Cascade,
        LightEntity::Point { .. } => ViewKind::PointFace,
        LightEntity::Spot { .. } => ViewKind::Spot,
    };
    Some((kind, id.light, Some(id)))
}

/// The views culled together in one pass: a camera, then the cascades of
/// the directional lights it draws shadows for (culled in its run), cut
/// into groups of at most `MAX_VIEWS`. An occlusion-culled camera is a group
/// of its own (an occlusion cull's views are one camera's), its cascades
/// the next.
fn camera_groups(
    camera: Entity,
    lights: Option<&ViewLightEntities>,
    is_cascade: impl Fn(Entity) -> bool,
    occluded: bool,
) -> Vec<Vec<Entity>> {
    let cascades = lights
        .into_iter()
        .flat_map(|l| l.lights.iter().copied())
        .filter(|&light_view| is_cascade(light_view));
    if occluded {
        let cascades: Vec<Entity> = cascades.collect();
        return std::iter::once(vec![camera])
            .chain(cascades.chunks(MAX_VIEWS as usize).map(<[Entity]>::to_vec))
            .collect();
    }
    let views: Vec<Entity> = std::iter::once(camera).chain(cascades).collect();
    views.chunks(MAX_VIEWS as usize).map(<[Entity]>::to_vec).collect()
}

/// A point light's cube faces, culled together in one pass: the light's
/// face views among `views`, in face order.
fn point_light_faces<'a>(
    light: Entity,
    views: impl Iterator<Item = (Entity, &'a LightEntity)>,
) -> Vec<Entity> {
    let mut faces: Vec<(usize, Entity)> = views
        .filter_map(|(view, l)| match l {
            LightEntity::Point {
                light_entity,
                face_index,
            } if *light_entity == light => Some((*face_index, view)),
            _ => None,
        })
        .collect();
    faces.sort_unstable_by_key(|&(face, _)| face);
    faces
        .into_iter()
        .map(|(_, view)| view)
        .take(MAX_VIEWS as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A camera comes first in its group, then its cascades in order, cut
    /// into groups of at most `MAX_VIEWS`; other light views stay out.
    #[test]
    fn camera_groups_take_cascades_in_order_up_to_max_views() {
        let camera = Entity::from_raw_u32(1).unwrap();
        let lights: Vec<Entity> = (10..22).map(|i| Entity::from_raw_u32(i).unwrap()).collect();
        let view_lights = ViewLightEntities {
            lights: lights.clone(),
        };
        // Every other light view is a cascade: six of them.
        let is_cascade = |e: Entity| e.index_u32().is_multiple_of(2);
        let groups = camera_groups(camera, Some(&view_lights), is_cascade, false);
        let cascades: Vec<Entity> = lights.iter().copied().filter(|&e| is_cascade(e)).collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0][0], camera);
        assert_eq!(groups[0][1..], cascades[..]);
        // Twelve cascades: eight views, then five.
        let groups = camera_groups(camera, Some(&view_lights), |_| true, false);
        assert_eq!(
            groups.iter().map(Vec::len).collect::<Vec<_>>(),
            [MAX_VIEWS as usize, 5]
        );
        assert_eq!(groups.concat()[1..], lights[..]);
        assert_eq!(camera_groups(camera, None, |_| true, false), [vec![camera]]);
        // An occlusion-culled camera is a group of its own; its twelve
        // cascades follow in groups of eight and four.
        let groups = camera_groups(camera, Some(&view_lights), |_| true, true);
        assert_eq!(
            groups.iter().map(Vec::len).collect::<Vec<_>>(),
            [1, MAX_VIEWS as usize, 4]
        );
        assert_eq!(groups[0], [camera]);
        assert_eq!(groups.concat()[1..], lights[..]);
    }
}
