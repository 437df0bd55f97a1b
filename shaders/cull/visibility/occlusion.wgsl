// Two-phase occlusion culling against a depth pyramid (Hi-Z), mirrored on
// the CPU by cull_core::OcclusionCamera::classify in the same steps.
//
// Early phase (VISIBILITY_OCCLUSION_EARLY): keep what the frustum test
// keeps and the history says was visible after the last late phase. The
// renderer draws it, then builds the depth pyramid from that depth.
// Late phase (VISIBILITY_OCCLUSION_LATE): test every instance in the frustum
// against the pyramid, write the result to the history's other half for the
// next frame, and keep those that pass and were not drawn early. What
// becomes visible is drawn in the frame it does, never a frame late.
//
// The history is a bit per instance (cull_core::OcclusionHistory): a word
// holds 32 consecutive instances, so the phases read a 32nd of the bytes a
// word per instance would take. The late phase sets the bits of the
// instances that pass with an atomic or, in a half the culler cleared
// before it, and writes nothing for the others.
//
// The test is conservative: the sphere's screen rectangle bounds the
// sphere's projection (the extremes of x/w and y/w over the sphere's range
// of clip coordinates, and of z/w split along w, see hiz_visible), widened
// by PIXEL_MARGIN; it reads
// the level where the rectangle spans at most two texels each way, whose
// texels cover every pixel the rectangle touches; and it compares the
// sphere's nearest depth with the farthest there, with DEPTH_TOLERANCE.
#define_import_path cull::visibility::occlusion

#import cull::params::params
#import cull::math::{WorldSphere, all_finite, finite}
#import cull::visibility::sphere_frustum::{in_frustum, wide_radius}
#import cull::visibility::screen_size::{level_terms, rows_in_band}

// Must equal cull_core::occlusion::OCCLUSION_PIXEL_MARGIN (a test holds them
// equal): covers the rounding of the projection, in pixels.
const PIXEL_MARGIN: f32 = 0.0078125;
// Must equal cull_core::occlusion::OCCLUSION_DEPTH_TOLERANCE: the relative
// slack of the depth comparison.
const DEPTH_TOLERANCE: f32 = 1.52587890625e-5;
// Must equal cull_core::occlusion's MIN_W and DEPTH_FIT_MIN (see
// hiz_visible).
const MIN_W: f32 = 1.0e-30;
const FIT_MIN: f32 = 1.0e-6;

// The phases' own uniforms (cull_core's visibility::occlusion::Uniforms),
// the same for every chunk of a cull: the camera's clip_from_world with its
// translation taken about `origin`, so that the projection works on sphere
// centers relative to the camera and keeps its precision far from the
// origin; `origin.w`, the slack of that subtraction; the depth pyramid's
// level 0 (the depth buffer's size), its levels and 1 when nearer depths
// are greater (reverse-Z); where the history's halves start, in words (the
// late phase reads the last frame's half and writes the other); and how
// far, in pixels, what the pyramid was drawn from may lie from `clip`'s
// projection (a TAA jitter).
struct Occlusion {
    clip: mat4x4<f32>,
    origin: vec4<f32>,
    pyramid_size: vec2<u32>,
    pyramid_levels: u32,
    reverse_z: u32,
    history_read: u32,
    history_write: u32,
    jitter: f32,
}

@group(0) @binding(#{BINDING_TEST_UNIFORMS}) var<uniform> occlusion: Occlusion;

#ifdef VISIBILITY_OCCLUSION_LATE
@group(0) @binding(#{BINDING_VISIBILITY_HISTORY}) var<storage, read_write> history: array<atomic<u32>>;
// Level 0 is the depth buffer; each level above is a mip (sizes halve,
// rounding down), each texel the farthest depth of the pixels that map to
// it (built by pyramid.wgsl).
@group(0) @binding(#{BINDING_DEPTH_PYRAMID}) var depth_pyramid: texture_2d<f32>;
#else
@group(0) @binding(#{BINDING_VISIBILITY_HISTORY}) var<storage, read> history: array<u32>;
#endif

// Chunk-local instance `i`'s bit: its word in a half of the history
// (occlusion.history_read and history_write are word offsets) and its mask.
fn history_bit(i: u32) -> vec2<u32> {
    let bit = params.chunk_start + i;
    return vec2<u32>(bit >> 5u, 1u << (bit & 31u));
}

// Whether chunk-local instance `i` was visible after the last late phase.
fn was_visible(i: u32) -> bool {
    let b = history_bit(i);
#ifdef VISIBILITY_OCCLUSION_LATE
    let word = atomicLoad(&history[occlusion.history_read + b.x]);
#else
    let word = history[occlusion.history_read + b.x];
#endif
    return (word & b.y) != 0u;
}

// The farther of two depths.
fn farther(a: f32, b: f32) -> f32 {
    return select(max(a, b), min(a, b), occlusion.reverse_z != 0u);
}

#ifdef VISIBILITY_OCCLUSION_LATE
// Whether the sphere may be visible past the depth pyramid.
fn hiz_visible(s: WorldSphere) -> bool {
    // occlusion_origin.w widens the radius by the rounding of the center
    // relative to the camera (a tolerance of the origin's magnitude).
    let r = wide_radius(s) + occlusion.origin.w;
    let m = occlusion.clip;
    let relative = s.center - occlusion.origin.xyz;
    let base = m * vec4<f32>(relative, 1.0);
    // Every clip coordinate is affine in the point, so over the sphere it
    // lies within base ± r·|row|, the row's length over its xyz part (the
    // most a dot product with a vector of length r reaches): a rectangle of
    // (x, w) (and (y, w)) pairs that holds every point's. (The sphere's box,
    // base ± r(|m0| + |m1| + |m2|), is up to sqrt(3) wider in a rotated
    // view, and picked coarser pyramid levels.)
    let reach = r * sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
    let near_c = base - reach;
    let far_c = base + reach;
    // An overflowed sphere (kept by the frustum test) or range may cover
    // anything; a sphere that reaches the eye (w at or below 0 somewhere, or
    // so near 0 that 1 / w would overflow: MIN_W) projects without bound.
    // NaN fails both tests.
    if !(finite(r) & all_finite(near_c) & all_finite(far_c)) || !(near_c.w > MIN_W) {
        return true;
    }
    // Over that rectangle, with w > 0, x/w is monotone in x and in w: its
    // extremes are at the rectangle's corners, x at either end over w at
    // either end. Two reciprocals and four products bound x/w and y/w for
    // the whole sphere, where projecting the eight corners of its box took
    // eight divisions of three components each.
    let inv_lo = 1.0 / near_c.w;
    let inv_hi = 1.0 / far_c.w;
    let lo_xy = min(near_c.xy * inv_lo, near_c.xy * inv_hi);
    let hi_xy = max(far_c.xy * inv_lo, far_c.xy * inv_hi);
    // Not for the depth: z and w both follow the view depth, nearly in
    // proportion, and their ranges taken apart would pair the nearest z
    // with the farthest w. Write z = a w + b + e·p instead (any a: b and e
    // follow from it; a fitted so that e is 0 for a perspective or an
    // orthographic projection, whose depth rows are a w + b): then
    // z/w = a + b/w + (e·p)/w, each term bounded over the sphere's range of w
    // and of e·p, which is exact when e is 0.
    let row_z = vec4<f32>(m[0].z, m[1].z, m[2].z, m[3].z);
    let row_w = vec4<f32>(m[0].w, m[1].w, m[2].w, m[3].w);
    let ww = dot(row_w.xyz, row_w.xyz);
    // No fit where w barely depends on the point (an orthographic
    // projection, with rounding noise): `a` would be huge and a + b/w
    // would cancel. a = 0 bounds z/w as x/w is.
    let a = select(0.0, dot(row_z.xyz, row_w.xyz) / ww, ww > FIT_MIN * (ww + row_w.w * row_w.w));
    let e = row_z - a * row_w;
    let e_center = dot(e.xyz, relative);
    let e_reach = r * length(e.xyz);
    let b_lo = e.w * inv_lo;
    let b_hi = e.w * inv_hi;
    let z_lo = a + min(b_lo, b_hi) + min((e_center - e_reach) * inv_lo, (e_center - e_reach) * inv_hi);
    let z_hi = a + max(b_lo, b_hi) + max((e_center + e_reach) * inv_lo, (e_center + e_reach) * inv_hi);
    let lo = vec3<f32>(lo_xy, z_lo);
    let hi = vec3<f32>(hi_xy, z_hi);
    let size = vec2<f32>(occlusion.pyramid_size);
    // Pixels: x right, y down from the top row.
    // Widened by the rounding's margin and by the camera's jitter: what was
    // drawn may lie that far from this projection.
    let margin = PIXEL_MARGIN + occlusion.jitter;
    let px_lo = vec2<f32>(lo.x * 0.5 + 0.5, 0.5 - hi.y * 0.5) * size - margin;
    let px_hi = vec2<f32>(hi.x * 0.5 + 0.5, 0.5 - lo.y * 0.5) * size + margin;
    let last = size - 1.0;
    let p0 = vec2<u32>(clamp(floor(px_lo), vec2<f32>(0.0), last));
    let p1 = vec2<u32>(clamp(floor(px_hi), vec2<f32>(0.0), last));
    // The level where a span of `extent` pixels touches at most two texels:
    // 2^level >= extent.
    let extent = max(p1.x - p0.x, p1.y - p0.y) + 1u;
    let level = min(select(0u, 32u - countLeadingZeros(extent - 1u), extent > 1u), occlusion.pyramid_levels - 1u);
    // Pixels map to texels clamped to the level's last, which covers the
    // rest of an odd size (see pyramid.wgsl).
    // (The level's size from the uniforms, as the texture's mips are
    // sized: lavapipe answered textureDimensions of a level with 1x1.)
    let top = max(occlusion.pyramid_size >> vec2<u32>(level), vec2<u32>(1u)) - 1u;
    let t0 = min(p0 >> vec2<u32>(level), top);
    let t1 = min(p1 >> vec2<u32>(level), top);
    let lv = i32(level);
    let far = farther(
        farther(textureLoad(depth_pyramid, vec2<i32>(t0), lv).x, textureLoad(depth_pyramid, vec2<i32>(i32(t1.x), i32(t0.y)), lv).x),
        farther(textureLoad(depth_pyramid, vec2<i32>(i32(t0.x), i32(t1.y)), lv).x, textureLoad(depth_pyramid, vec2<i32>(t1), lv).x));
    if occlusion.reverse_z != 0u {
        return hi.z >= far - DEPTH_TOLERANCE * abs(far);
    }
    return lo.z <= far + DEPTH_TOLERANCE * abs(far);
}
#endif

// The vote in two steps (see sphere_frustum.wgsl): every view of an
// occlusion cull is a level of the camera the pyramid was drawn from, with
// its planes and size metric, so the frustum, the history and the pyramid
// are consulted once per instance, and each level compares the size with
// its band.
struct Verdict {
    // In the frustum, and: (early) visible after the last late phase;
    // (late) past the pyramid and not drawn early.
    kept: bool,
    // Overflowed: in every band.
    overflow: bool,
    // The size (level_terms).
    terms: vec2<f32>,
}

// Chunk-local instance `i`'s verdict; the late phase also writes whether it
// is in the frustum and past the pyramid, whatever its level, to the
// history.
fn classify(s: WorldSphere, i: u32) -> Verdict {
    if i >= params.chunk_len {
        return Verdict(false, false, vec2<f32>(0.0, 1.0));
    }
    let terms = level_terms(s.center, s.radius);
    let overflow = !finite(wide_radius(s));
#ifdef VISIBILITY_OCCLUSION_LATE
    let was = was_visible(i);
    var seen = in_frustum(s, 0u);
    if seen {
        seen = hiz_visible(s);
    }
    if seen {
        let b = history_bit(i);
        atomicOr(&history[occlusion.history_write + b.x], b.y);
    }
    return Verdict(seen & !was, overflow, terms);
#else
    return Verdict(in_frustum(s, 0u) & was_visible(i), overflow, terms);
#endif
}

fn keeps(v: Verdict, view: u32) -> bool {
    return keeps_rows(v, v, v, v, view).x;
}

// keeps() for a thread's four items (the band looked up once per level).
fn keeps_rows(a: Verdict, b: Verdict, c: Verdict, d: Verdict, view: u32) -> vec4<bool> {
    return rows_in_band(view, vec4<bool>(a.kept, b.kept, c.kept, d.kept),
                        vec4<bool>(a.overflow, b.overflow, c.overflow, d.overflow), a.terms, b.terms, c.terms, d.terms);
}
