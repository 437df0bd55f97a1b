// The conservative sphere-against-frustum test, mirrored on the CPU by
// cull_core::Frustum::classify with the same terms (see plane_distance).
#define_import_path cull::visibility::sphere_frustum

#import cull::params::params
#import cull::math::{WorldSphere, finite}
#import cull::visibility::screen_size::{in_size_band, level_terms, rows_in_band}

// Must equal cull_core::PLANE_TOLERANCE (2^-18, a test holds them
// equal): a few ulps of slack so that mathematically tangent spheres survive
// any rounding.
const PLANE_TOLERANCE: f32 = 3.814697265625e-6;

// The center's signed distance to one plane, its offset arriving widened
// by the tolerance (widen_plane on the CPU): three fused multiply-adds, the
// offset taken first. Written as products and sums, the shader would cost
// five (the compiler may fuse a product into the next sum, but may not move
// the offset's sum to the front). The rounding differs from the CPU's
// unfused sum by a few ulps of the magnitudes, which the tolerance covers
// and the tests' borderline band allows (cull_core::Frustum::classify).
fn plane_distance(p: vec4<f32>, center: vec3<f32>) -> f32 {
    return fma(p.x, center.x, fma(p.y, center.y, fma(p.z, center.z, p.w)));
}

// Whether `view` uses its sixth plane. Infinite reverse-Z projections
// (Bevy's perspective cameras, a point light's faces) and a directional
// light's cascades (no near plane toward the light) have five, and the
// unused slot holds (0, 0, 0, 1), which keeps everything. A kernel for
// plain views (PLAIN_VIEWS, cull_core's KernelSpec::plain_views) serves
// only views of five: the test is compiled out rather than branched on per
// instance, which costs each view's vote instructions even where the
// branch is never taken.
fn has_sixth_plane(view: u32) -> bool {
#ifdef PLAIN_VIEWS
    return false;
#else
    return any(params.planes[view][5] != vec4<f32>(0.0, 0.0, 0.0, 1.0));
#endif
}

// The planes of `view` with constant indices (unused ones are (0, 0, 0, 1),
// which keeps everything): no loop, and constant indices let the compiler
// read the uniforms directly instead of with indexed loads. The sixth is
// tested only where the view has one: a branch on a uniform, taken alike by
// every thread, that skips three multiply-adds and a minimum per instance
// for five-plane views. The sphere touches every plane's inner side when
// the least of the distances is at least -r: a minimum per plane and one
// comparison, instead of a comparison and a logical and per plane.
fn sphere_visible(view: u32, center: vec3<f32>, r: f32) -> bool {
    let near = min(min(plane_distance(params.planes[view][0], center), plane_distance(params.planes[view][1], center)),
                   min(plane_distance(params.planes[view][2], center), plane_distance(params.planes[view][3], center)));
    var nearest = min(near, plane_distance(params.planes[view][4], center));
    if has_sixth_plane(view) {
        nearest = min(nearest, plane_distance(params.planes[view][5], center));
    }
    return nearest >= -r;
}

// The sphere's radius widened by the tolerance once per instance
// (widen_radius on the CPU), which bounds the rounding of the world sphere
// and of every plane's sum since the normals are unit length. Every center
// component reaches it through abs(): an infinity or NaN anywhere makes it
// non-finite, so one scalar test covers them all: an overflowed sphere is
// kept, in every view and band (it may cover anything).
fn wide_radius(s: WorldSphere) -> f32 {
    let c = s.center;
    return s.radius + PLANE_TOLERANCE * (abs(c.x) + abs(c.y) + abs(c.z) + s.radius + s.terms);
}

// Whether an instance's world sphere touches `view`'s frustum, whatever its
// size. Non-finite input is culled; an overflowed sphere is kept.
fn in_frustum(s: WorldSphere, view: u32) -> bool {
    let wide = wide_radius(s);
    return s.finite_input & (!finite(wide) | sphere_visible(view, s.center, wide));
}

// Whether an instance's world sphere is visible in `view` and in its
// level-of-detail band.
fn visible(s: WorldSphere, view: u32) -> bool {
    let wide = wide_radius(s);
    let overflow = !finite(wide);
    return s.finite_input & (overflow | (sphere_visible(view, s.center, wide) & in_size_band(view, s.center, s.radius)));
}

// A test's vote comes in two steps (the interface of every visibility
// test, imported by cull::items): classify() does once per instance what no
// view changes, keeps() what each view adds, and keeps_rows() the same for
// a thread's four items (where a test can look up what a view needs once).
// `i` is the chunk-local index, for tests that keep per-instance state
// (occlusion); this one keeps none.
#ifdef VISIBILITY_DETAIL_LEVELS
// The views are one camera's levels of detail (the same planes and size
// metric, cull_core's VisibilityTest::DetailLevels): the frustum test and the
// size are computed once, and each level compares the size with its band.
struct Verdict {
    // Visible in the frustum (or overflowed).
    in_frustum: bool,
    // Overflowed: in every band.
    overflow: bool,
    // The size (level_terms).
    terms: vec2<f32>,
}

fn classify(s: WorldSphere, i: u32) -> Verdict {
    let wide = wide_radius(s);
    let overflow = !finite(wide);
    let inside = s.finite_input & (overflow | sphere_visible(0u, s.center, wide));
    return Verdict(inside, overflow, level_terms(s.center, s.radius));
}

fn keeps(v: Verdict, view: u32) -> bool {
    return keeps_rows(v, v, v, v, view).x;
}

// keeps() for a thread's four items (the band looked up once per level).
fn keeps_rows(a: Verdict, b: Verdict, c: Verdict, d: Verdict, view: u32) -> vec4<bool> {
    return rows_in_band(view, vec4<bool>(a.in_frustum, b.in_frustum, c.in_frustum, d.in_frustum),
                        vec4<bool>(a.overflow, b.overflow, c.overflow, d.overflow), a.terms, b.terms, c.terms, d.terms);
}
#else
// Views with frusta of their own: each view tests the sphere.
struct Verdict {
    sphere: WorldSphere,
}

fn classify(s: WorldSphere, i: u32) -> Verdict {
    return Verdict(s);
}

fn keeps(v: Verdict, view: u32) -> bool {
    return visible(v.sphere, view);
}

// keeps() for a thread's four items: each item tests the view's sixth plane
// and band under uniform branches of its own. Tried and slower on an H100:
// one branch per view around the four items' tests, and the widened radius
// computed once per item rather than per view. Views that have neither take the form that compiles both out
// (PLAIN_VIEWS).
fn keeps_rows(a: Verdict, b: Verdict, c: Verdict, d: Verdict, view: u32) -> vec4<bool> {
    return vec4<bool>(keeps(a, view), keeps(b, view), keeps(c, view), keeps(d, view));
}
#endif
