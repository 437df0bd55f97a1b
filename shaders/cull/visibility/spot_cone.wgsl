// A spot light's views: the frustum test (cull::visibility::sphere_frustum,
// with each view's level-of-detail band) and the sphere against the cone
// the light lights, bounded by its range. Mirrored on the CPU by
// cull_core::SpotCone::classify with the same terms.
#define_import_path cull::visibility::spot_cone

#import cull::params::MAX_VIEWS
#import cull::math::{WorldSphere, finite}
#import cull::visibility::sphere_frustum::{visible, wide_radius}

// Each view's cone, owned by this test (cull_core's spot_cone::write_uniforms):
// [0] apex, and the slack its magnitude adds; [1] unit axis, range;
// [2] sin and cos of the half angle, 1 where the range bounds the cone,
// and 1 where the view has a cone at all (0: the frustum alone).
struct SpotCones {
    cones: array<array<vec4<f32>, 3>, MAX_VIEWS>,
}

@group(0) @binding(#{BINDING_TEST_UNIFORMS}) var<uniform> spot_cones: SpotCones;

// Whether the sphere touches `view`'s cone. Relative to the apex: the
// center's distance to the cone's side in the plane through the axis
// (|v × axis| · cos - (v · axis) · sin, at most the true distance, so a
// sphere that touches is kept), in front of the apex's plane, and within
// the range. The radius is widened as for the planes (wide_radius) and by
// the apex's slack, which covers the rounding of v far from the origin. An
// overflowed sphere (wide not finite) is kept.
fn in_cone(s: WorldSphere, view: u32) -> bool {
    let cone = spot_cones.cones[view];
    if cone[2].w == 0.0 {
        return true;
    }
    let wide = wide_radius(s) + cone[0].w;
    let v = s.center - cone[0].xyz;
    let along = dot(v, cone[1].xyz);
    let across = length(cross(v, cone[1].xyz));
    let side = cone[2].y * across - cone[2].x * along;
    let in_range = cone[2].z == 0.0 || length(v) <= cone[1].w + wide;
    return !finite(wide) | ((side <= wide) & (along >= -wide) & in_range);
}

// The interface of every visibility test (see sphere_frustum.wgsl): each
// view tests the sphere against its frustum, band and cone.
struct Verdict {
    sphere: WorldSphere,
}

fn classify(s: WorldSphere, i: u32) -> Verdict {
    return Verdict(s);
}

fn keeps(v: Verdict, view: u32) -> bool {
    return visible(v.sphere, view) & in_cone(v.sphere, view);
}

fn keeps_rows(a: Verdict, b: Verdict, c: Verdict, d: Verdict, view: u32) -> vec4<bool> {
    return vec4<bool>(keeps(a, view), keeps(b, view), keeps(c, view), keeps(d, view));
}
