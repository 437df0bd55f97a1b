// The conservative sphere-against-frustum test, mirrored on the CPU by
// cull_core::Frustum::classify in the same order of operations.
#define_import_path cull::visibility::sphere_frustum

#import cull::params::params
#import cull::math::{WorldSphere, finite}
#import cull::visibility::screen_size::in_size_band

// Must equal cull_core::frustum::PLANE_TOLERANCE (2^-18, a test holds them
// equal): a few ulps of slack so that mathematically tangent spheres survive
// any rounding.
const PLANE_TOLERANCE: f32 = 3.814697265625e-6;

// One plane of the test. The plane's offset arrives widened by the
// tolerance (widen_plane on the CPU).
fn plane_keeps(p: vec4<f32>, center: vec3<f32>, wide_radius: f32) -> bool {
    return p.x * center.x + p.y * center.y + p.z * center.z + p.w + wide_radius >= 0.0;
}

// All six planes of `view` with constant indices (unused ones are (0, 0, 0, 1), which
// keeps everything): no loop, and constant indices let the compiler read the
// uniforms directly instead of with indexed loads.
fn sphere_visible(view: u32, center: vec3<f32>, r: f32) -> bool {
    return plane_keeps(params.planes[view][0], center, r) & plane_keeps(params.planes[view][1], center, r)
        & plane_keeps(params.planes[view][2], center, r) & plane_keeps(params.planes[view][3], center, r)
        & plane_keeps(params.planes[view][4], center, r) & plane_keeps(params.planes[view][5], center, r);
}

// Whether an instance's world sphere is visible in `view` and in its
// level-of-detail band (in_size_band). The radius is widened by
// the tolerance once per instance (widen_radius on the CPU), which bounds
// the rounding of the world sphere and of every plane's sum since the
// normals are unit length. Non-finite input is culled; a sphere that
// overflows f32 from finite input is kept, in every band (it may cover
// anything). Both are decided on bits: a compiler may assume no NaN.
fn visible(s: WorldSphere, view: u32) -> bool {
    let c = s.center;
    let wide = s.radius + PLANE_TOLERANCE * (abs(c.x) + abs(c.y) + abs(c.z) + s.radius + s.terms);
    // Every center component reaches `wide` through abs(): an infinity or
    // NaN anywhere makes it non-finite, so one scalar test covers them all.
    let overflow = !finite(wide);
    return s.finite_input & (overflow | (sphere_visible(view, c, wide) & in_size_band(view, c, s.radius)));
}
