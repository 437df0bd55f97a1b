//! Occlusion culling: two-phase Hi-Z against a depth pyramid.
//!
//! Each frame, for one camera:
//!
//! 1. **Early** ([`crate::CullRequest::occlusion_early`]): keep what is in the
//!    frustum and was visible after the last late phase (the
//!    [`OcclusionHistory`]). Draw it.
//! 2. **Pyramid** ([`PyramidBuilder::build`]): from that depth, build the
//!    [`DepthPyramid`]: level 0 is the depth buffer, each level above half
//!    the size (a texture's mip chain), each texel the farthest depth of the pixels it
//!    covers.
//! 3. **Late** ([`crate::CullRequest::occlusion_late`]): test every instance in
//!    the frustum against the pyramid, remember the result for the next
//!    frame, and keep those that pass and were not drawn early. Draw them.
//!
//! What becomes visible (disocclusion, a camera cut) is drawn in the frame
//! it does, never a frame late. The test is conservative: the sphere's
//! screen rectangle bounds its projection (from the range of the sphere's
//! clip coordinates, its depth split along `w`,
//! widened by [`OCCLUSION_PIXEL_MARGIN`]), the pyramid level read is
//! the one where that rectangle spans at most 2×2 texels, which cover every
//! pixel it touches, and the sphere's nearest depth is compared with the
//! farthest there with [`OCCLUSION_DEPTH_TOLERANCE`]. [`CpuPyramid`] and
//! [`OcclusionCamera::classify`] are the CPU mirror.
//!
//! Modules: `camera` (the projection the late phase tests with, and its CPU
//! mirror), `pyramid` (the depth pyramid on the GPU and the CPU), `history`
//! (which instances were visible last frame).

mod camera;
mod history;
mod pyramid;

pub use camera::OcclusionCamera;
#[cfg(test)]
pub(crate) use camera::{DEPTH_FIT_MIN, MIN_W};
pub use history::OcclusionHistory;
pub(crate) use history::history_words;
pub use pyramid::{CpuPyramid, DepthPyramid, PYRAMID_SHADER, PyramidBuilder};

/// How far, in pixels, the occlusion test widens a sphere's screen
/// rectangle on each side: it covers the rounding of the projection
/// (`PIXEL_MARGIN` in `shaders/cull/visibility/occlusion.wgsl`; a test holds
/// them equal).
pub const OCCLUSION_PIXEL_MARGIN: f32 = 1.0 / 128.0;

/// The relative slack of the occlusion test's depth comparison (2⁻¹⁶): a
/// sphere whose nearest depth is within this of the farthest occluder depth
/// is kept (`DEPTH_TOLERANCE` in the WGSL).
pub const OCCLUSION_DEPTH_TOLERANCE: f32 = 1.0 / 65536.0;

/// Which way depth grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DepthOrder {
    /// Nearer depths are greater (Bevy's, and the precise choice for `f32`
    /// depth): the farthest depth is the smallest.
    #[default]
    ReverseZ,
    /// Nearer depths are smaller: the farthest depth is the largest.
    Standard,
}

impl DepthOrder {
    /// The farther of two depths.
    pub fn farther(self, a: f32, b: f32) -> f32 {
        match self {
            Self::ReverseZ => a.min(b),
            Self::Standard => a.max(b),
        }
    }

    pub(crate) fn reverse(self) -> bool {
        self == Self::ReverseZ
    }
}

/// Levels of a pyramid whose level 0 is `width × height`: a texture's mip
/// chain, sizes halving and rounding down (at least 1) until the longer side
/// is 1.
pub fn pyramid_levels(width: u32, height: u32) -> u32 {
    u32::BITS - width.max(height).max(1).leading_zeros()
}

/// The size of level `k` of a pyramid whose level 0 is `width × height`:
/// the texture's mip size.
pub fn pyramid_level_size(width: u32, height: u32, k: u32) -> (u32, u32) {
    ((width >> k).max(1), (height >> k).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CullError;
    use crate::sphere::{SphereClass, WorldSphere};
    use glam::{Mat4, Vec3};

    #[test]
    fn levels_are_the_mip_chain() {
        assert_eq!(pyramid_levels(1, 1), 1);
        assert_eq!(pyramid_levels(2, 1), 2);
        assert_eq!(pyramid_levels(3, 3), 2);
        assert_eq!(pyramid_levels(61, 37), 6);
        assert_eq!(pyramid_levels(1280, 720), 11);
        assert_eq!(pyramid_levels(1024, 1024), 11);
        assert_eq!(pyramid_level_size(1280, 720, 10), (1, 1));
    }

    /// Each texel of level k holds the farthest depth of exactly the pixels
    /// that map to it: `x >> k`, clamped to the level's last texel, odd
    /// sizes included.
    #[test]
    fn texels_cover_their_pixels() {
        for (w, h) in [(13u32, 7u32), (61, 37), (1, 9), (16, 3)] {
            let depth: Vec<f32> = (0..w * h).map(|i| ((i * 7919) % 101) as f32 / 101.0).collect();
            for order in [DepthOrder::ReverseZ, DepthOrder::Standard] {
                let p = CpuPyramid::build(w, h, &depth, order).unwrap();
                assert_eq!(p.levels.len() as u32, pyramid_levels(w, h));
                for k in 0..p.levels.len() as u32 {
                    let (lw, lh) = p.level_size(k);
                    let mut far: Vec<Option<f32>> = vec![None; (lw * lh) as usize];
                    for y in 0..h {
                        for x in 0..w {
                            let t = (((y >> k).min(lh - 1)) * lw + (x >> k).min(lw - 1)) as usize;
                            let d = depth[(y * w + x) as usize];
                            far[t] = Some(far[t].map_or(d, |f| order.farther(f, d)));
                        }
                    }
                    let far: Vec<f32> = far
                        .into_iter()
                        .map(|f| f.expect("every texel covers a pixel"))
                        .collect();
                    assert_eq!(p.levels[k as usize], far, "{w}x{h} level {k}");
                }
                let (tw, th) = p.level_size(p.levels.len() as u32 - 1);
                assert_eq!(tw.max(th), 1, "{w}x{h}: the top level is one texel");
            }
        }
    }

    fn camera() -> OcclusionCamera {
        let proj = Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1);
        OcclusionCamera::from_view(proj, Mat4::IDENTITY).unwrap()
    }

    #[test]
    fn a_wall_hides_what_is_behind_it() {
        // A wall at distance 5 covering the whole screen (reverse-Z: depth
        // near/distance).
        let (w, h) = (64, 64);
        let wall = 0.1 / 5.0;
        let p = CpuPyramid::build(w, h, &vec![wall; (w * h) as usize], DepthOrder::ReverseZ).unwrap();
        let cam = camera();
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::new(0.0, 0.0, -10.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::new(0.0, 0.0, -3.0), 1.0), &p)
                .unwrap(),
            SphereClass::Inside
        );
        // Reaching through the wall: kept.
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::new(0.0, 0.0, -6.0), 1.5), &p)
                .unwrap(),
            SphereClass::Inside
        );
        // Around the camera: kept.
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::ZERO, 0.5), &p).unwrap(),
            SphereClass::Inside
        );
        // Overflowed: kept.
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::new(0.0, 0.0, -10.0), f32::INFINITY), &p)
                .unwrap(),
            SphereClass::Inside
        );
    }

    #[test]
    fn a_camera_with_bad_fields_is_refused_not_classified() {
        let p = CpuPyramid::build(4, 4, &[0.5; 16], DepthOrder::ReverseZ).unwrap();
        let s = WorldSphere::exact(Vec3::new(0.0, 0.0, -10.0), 1.0);
        for jitter in [f32::NAN, -1.0, f32::INFINITY] {
            let cam = OcclusionCamera { jitter, ..camera() };
            assert!(
                matches!(cam.classify(&s, &p), Err(CullError::InvalidParameter(_))),
                "jitter {jitter}"
            );
        }
        let mut cam = camera();
        cam.clip_from_relative.x_axis.x = f32::NAN;
        assert!(matches!(
            cam.classify(&s, &p),
            Err(CullError::DegenerateFrustum(_))
        ));
        let cam = OcclusionCamera {
            origin: Vec3::new(f32::INFINITY, 0.0, 0.0),
            ..camera()
        };
        assert!(matches!(
            cam.classify(&s, &p),
            Err(CullError::DegenerateFrustum(_))
        ));
        // An origin so far that the matrix overflows is refused too.
        let far = OcclusionCamera::from_clip_from_world(camera().clip_from_relative, Vec3::splat(3.0e38));
        assert!(matches!(far, Err(CullError::DegenerateFrustum(_))), "{far:?}");
    }

    #[test]
    fn a_hole_in_the_wall_shows_what_is_behind_it() {
        let (w, h) = (64u32, 64u32);
        let wall = 0.1 / 5.0;
        let mut depth = vec![wall; (w * h) as usize];
        // One far pixel near the center (sky: depth 0).
        depth[(32 * w + 32) as usize] = 0.0;
        let p = CpuPyramid::build(w, h, &depth, DepthOrder::ReverseZ).unwrap();
        let cam = camera();
        // Far behind, but its rectangle covers the hole's pixel.
        assert_ne!(
            cam.classify(&WorldSphere::exact(Vec3::new(0.0, 0.0, -50.0), 2.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        // Off to the side, behind solid wall.
        assert_eq!(
            cam.classify(&WorldSphere::exact(Vec3::new(-20.0, -20.0, -50.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
    }

    #[test]
    fn camera_far_from_the_origin_and_standard_depth() {
        let origin = Vec3::new(1.0e7, -3.0e6, 2.0e6);
        let proj = Mat4::perspective_rh(1.0, 1.0, 0.1, 1000.0);
        let cam = OcclusionCamera::from_view(proj, Mat4::from_translation(origin)).unwrap();
        // A wall 5 units away in standard depth.
        let ndc_wall = {
            let c = proj * glam::Vec4::new(0.0, 0.0, -5.0, 1.0);
            c.z / c.w
        };
        let (w, h) = (32, 32);
        let p = CpuPyramid::build(w, h, &vec![ndc_wall; (w * h) as usize], DepthOrder::Standard).unwrap();
        // At 10^7 from the origin, f32 positions are a unit apart: the
        // slack makes the sphere about 60 units wide, still behind the wall.
        assert_eq!(
            cam.classify(&WorldSphere::exact(origin + Vec3::new(0.0, 0.0, -500.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        assert_eq!(
            cam.classify(&WorldSphere::exact(origin + Vec3::new(0.0, 0.0, -3.0), 1.0), &p)
                .unwrap(),
            SphereClass::Inside
        );
    }
}
