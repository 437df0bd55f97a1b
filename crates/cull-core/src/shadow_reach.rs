//! The casters a directional light's cascade needs ([`ShadowReceivers`]).
//!
//! A cascade's shadow map is read by the surfaces its camera sees between
//! two view depths (the cascade's slice of the camera's frustum), and by
//! shadow filters a little around them, so a caster whose shadow, cast along the light, cannot fall into that
//! slice need not be drawn into the map, though it lies in the map's box.
//! The box (Bevy's: a square as wide as the slice's longest diagonal, open
//! toward the light) covers several times the slice's own outline as seen
//! from the light, and the casters there cost the shadow pass as much as
//! the ones that matter.
//!
//! The volume kept is the slice swept toward the light: the points from
//! which a ray along the light reaches the slice. It is bounded by up to
//! six of its planes: those through the slice's outline as seen along the
//! light (each parallel to the light), then the slice's faces that look
//! away from it (a caster beyond one of them, further along the light,
//! casts its shadow further away still). Each such plane holds the whole
//! swept volume, so a sphere outside any of them casts no shadow into the
//! slice: any subset culls conservatively. Each is widened by a margin,
//! for what a receiver's shadow lookups read around it (shadow filtering,
//! normal bias).

use crate::CullError;
use crate::frame::LocalFrame;
use crate::frustum::Frustum;
use glam::{DMat4, DVec3, DVec4, Mat4, Vec3, Vec4};

/// What a directional light's cascade is read for: the part of a camera's
/// view between two view depths, and how the light falls on it. Culled with
/// [`Frustum::from_shadow_receivers`] (or [`LocalFrame::shadow_receivers`]
/// in a batch's frame), a cascade keeps only the casters whose shadow can
/// fall there: for a camera looking across a scene, a fraction of those in
/// the cascade's box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShadowReceivers {
    /// The camera's projection (wgpu clip space; perspective or
    /// orthographic, with either depth convention).
    pub clip_from_view: Mat4,
    /// The camera's transform (it may mirror or scale).
    pub world_from_view: Mat4,
    /// The nearest view depth the cascade is read at: the distance along
    /// the camera's forward axis (Bevy's cascade bounds, the overlap with
    /// the previous cascade included). The slice starts at the camera's near
    /// plane where that lies farther: `f32::NEG_INFINITY` reads it from
    /// there (Bevy's first cascade, read by everything nearer than its far
    /// bound).
    pub near: f32,
    /// The farthest view depth the cascade is read at.
    pub far: f32,
    /// The direction the light travels (a directional light's forward
    /// axis); any length but zero.
    pub light_direction: Vec3,
    /// How far beyond the slice, in world units, a receiver's shadow
    /// lookups reach: the shadow filter's footprint and the normal bias.
    pub margin: f32,
}

/// The planes a frustum holds, and so the swept volume's planes kept.
const MAX_PLANES: usize = 6;

/// Corners of the slice as `[near; 4]` then `[far; 4]`, each ring in order
/// around the view axis; its faces (a ring each, then the sides) and edges.
const FACES: [[usize; 4]; 6] = [
    [0, 1, 2, 3],
    [4, 5, 6, 7],
    [0, 1, 5, 4],
    [1, 2, 6, 5],
    [2, 3, 7, 6],
    [3, 0, 4, 7],
];
const EDGES: [[usize; 2]; 12] = [
    [0, 1],
    [1, 2],
    [2, 3],
    [3, 0],
    [4, 5],
    [5, 6],
    [6, 7],
    [7, 4],
    [0, 4],
    [1, 5],
    [2, 6],
    [3, 7],
];

/// Relative rounding allowed when a plane is checked against the corners
/// (`f64` products of `f32` inputs); a plane is widened by as much.
const ROUNDING: f64 = 1.0e-9;

impl ShadowReceivers {
    fn validate(&self) -> Result<(), CullError> {
        let finite = self.clip_from_view.is_finite()
            && self.world_from_view.is_finite()
            && self.light_direction.is_finite()
            && self.margin.is_finite();
        if !finite {
            return Err(CullError::DegenerateFrustum(
                "the shadow receivers are not finite",
            ));
        }
        if !(self.far.is_finite() && self.near < self.far) {
            return Err(CullError::InvalidParameter(
                "the shadow receivers' far depth must be finite, and beyond the near one",
            ));
        }
        if self.light_direction == Vec3::ZERO || self.margin < 0.0 {
            return Err(CullError::InvalidParameter(
                "the light direction must not be zero, nor the margin negative",
            ));
        }
        Ok(())
    }

    /// The slice's corners in the world: each corner ray of the projection
    /// (two points on it unprojected, at depths every convention keeps
    /// finite) met at the two view depths, the near one no nearer than the
    /// camera's near plane.
    fn corners(&self) -> Result<[DVec3; 8], CullError> {
        let clip_from_view = self.clip_from_view.as_dmat4();
        let world_from_view = self.world_from_view.as_dmat4();
        if clip_from_view.determinant() == 0.0 || world_from_view.determinant() == 0.0 {
            return Err(CullError::DegenerateFrustum(
                "a shadow receivers' matrix is singular",
            ));
        }
        let view_from_clip = clip_from_view.inverse();
        let unproject = |x: f64, y: f64, z: f64| {
            let h = view_from_clip * DVec4::new(x, y, z, 1.0);
            h.truncate() / h.w
        };
        const RAYS: [(f64, f64); 4] = [(1.0, -1.0), (1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0)];
        // The camera's near plane: the nearer of clip depths 0 and 1 (which
        // is which depends on the depth convention; an infinite far plane
        // unprojects to no finite point).
        let camera_near = RAYS
            .iter()
            .flat_map(|&(x, y)| [unproject(x, y, 0.0), unproject(x, y, 1.0)])
            .map(|p| -p.z)
            .filter(|depth| depth.is_finite())
            .fold(f64::INFINITY, f64::min);
        let near = (self.near as f64).max(camera_near);
        let far = self.far as f64;
        if near >= far || near.is_nan() {
            return Err(CullError::InvalidParameter(
                "the shadow receivers lie beyond the camera's view",
            ));
        }
        let mut corners = [DVec3::ZERO; 8];
        for (i, (x, y)) in RAYS.into_iter().enumerate() {
            let (a, b) = (unproject(x, y, 0.25), unproject(x, y, 0.75));
            for (ring, depth) in [near, far].into_iter().enumerate() {
                let t = (-depth - a.z) / (b.z - a.z);
                corners[4 * ring + i] = world_from_view.transform_point3(a + (b - a) * t);
            }
        }
        if corners.iter().all(|c| c.is_finite()) {
            Ok(corners)
        } else {
            Err(CullError::DegenerateFrustum(
                "the shadow receivers' slice is not finite",
            ))
        }
    }

    /// The swept volume's planes in the world (unit normals inward), each
    /// widened by the margin: the outline's first, then the faces that look
    /// away from the light most squarely, at most [`MAX_PLANES`].
    pub(crate) fn world_planes(&self) -> Result<Vec<DVec4>, CullError> {
        self.validate()?;
        let corners = self.corners()?;
        let light = self.light_direction.as_dvec3().normalize();
        let centroid = corners.iter().sum::<DVec3>() / 8.0;
        let extent = corners.iter().map(|c| c.distance(centroid)).fold(0.0, f64::max);
        let slack = ROUNDING * (extent + centroid.abs().max_element());
        // A plane through `point` with `normal` turned toward the slice,
        // kept only where every corner lies on its inner side.
        let supporting = |normal: DVec3, point: DVec3| -> Option<DVec4> {
            let length = normal.length();
            if length <= ROUNDING * extent || length.is_nan() {
                return None;
            }
            let mut n = normal / length;
            if n.dot(centroid - point) < 0.0 {
                n = -n;
            }
            let plane = n.extend(-n.dot(point));
            let holds = corners.iter().all(|c| plane.dot(c.extend(1.0)) >= -slack);
            holds.then_some(plane)
        };
        let outline = EDGES.iter().filter_map(|&[a, b]| {
            let (a, b) = (corners[a], corners[b]);
            supporting((b - a).cross(light), a)
        });
        let mut away: Vec<DVec4> = FACES
            .iter()
            .filter_map(|face| {
                let [p, q, r, s] = face.map(|i| corners[i]);
                supporting((r - p).cross(s - q), (p + q + r + s) / 4.0)
            })
            .filter(|plane| plane.truncate().dot(light) <= 0.0)
            .collect();
        away.sort_by(|a, b| a.truncate().dot(light).total_cmp(&b.truncate().dot(light)));
        let mut planes: Vec<DVec4> = Vec::with_capacity(MAX_PLANES);
        for plane in outline.chain(away) {
            let same = |p: &DVec4| {
                p.truncate().dot(plane.truncate()) > 1.0 - ROUNDING && (p.w - plane.w).abs() <= slack
            };
            if planes.len() < MAX_PLANES && !planes.iter().any(same) {
                planes.push(plane);
            }
        }
        let widen = self.margin as f64 + slack;
        Ok(planes
            .into_iter()
            .map(|p| p + DVec4::new(0.0, 0.0, 0.0, widen))
            .collect())
    }
}

impl LocalFrame {
    /// [`Frustum::from_shadow_receivers`] in this frame: the planes found
    /// in the world in `f64`, then taken into the frame (exact under any
    /// affine frame: a plane's side of a point does not change).
    pub fn shadow_receivers(&self, receivers: &ShadowReceivers) -> Result<Frustum, CullError> {
        let world_from_local: DMat4 = self.world_from_local();
        let mut planes = [Vec4::ZERO; MAX_PLANES];
        let mut len = 0;
        for world in receivers.world_planes()? {
            let local = world_from_local.transpose() * world;
            let length = local.truncate().length();
            let plane = (local / length).as_vec4();
            // A plane the frame cannot hold is dropped: that keeps more.
            if length > 0.0 && plane.is_finite() {
                planes[len] = plane;
                len += 1;
            }
        }
        Ok(Frustum {
            planes,
            len,
            size_band: None,
            cone: None,
        })
    }
}

impl Frustum {
    /// The casters whose shadow along the light can fall on `receivers`
    /// (see [`ShadowReceivers`]), as a frustum of up to six planes, each
    /// widened by the receivers' margin. Where the slice's outline seen
    /// from the light takes all six, casters beyond the slice along the
    /// light are kept too (they cast no shadow where it is read). For a directional light's cascade
    /// it replaces [`Self::from_shadow_cascade`], which keeps everything in
    /// the cascade's box: the receivers lie in the box, so what they need
    /// does too.
    ///
    /// ```
    /// use cull_core::{Frustum, ShadowReceivers};
    /// use glam::{Mat4, Vec3};
    /// // A camera at head height looking down -Z; the sun straight above.
    /// let receivers = ShadowReceivers {
    ///     clip_from_view: Mat4::perspective_infinite_reverse_rh(0.8, 16.0 / 9.0, 0.1),
    ///     world_from_view: Mat4::from_translation(Vec3::new(0.0, 2.0, 0.0)),
    ///     near: 0.1,
    ///     far: 20.0,
    ///     light_direction: Vec3::NEG_Y,
    ///     margin: 0.1,
    /// };
    /// let cascade = Frustum::from_shadow_receivers(&receivers)?;
    /// assert!(cascade.intersects_sphere(Vec3::new(0.0, 50.0, -10.0), 1.0)); // above what is seen
    /// assert!(!cascade.intersects_sphere(Vec3::new(0.0, 50.0, 10.0), 1.0)); // above, behind the camera
    /// assert!(!cascade.intersects_sphere(Vec3::new(40.0, 0.0, -10.0), 1.0)); // off to the side
    /// # Ok::<(), cull_core::CullError>(())
    /// ```
    pub fn from_shadow_receivers(receivers: &ShadowReceivers) -> Result<Self, CullError> {
        LocalFrame::IDENTITY.shadow_receivers(receivers)
    }
}

#[cfg(test)]
mod tests;
