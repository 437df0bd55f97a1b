// The level-of-detail band of a view: an instance is kept when its sphere's
// projected size lies in the view's band [min, max). Mirrored on the CPU by
// cull_core::frustum::SizeBand::classify in the same order of operations.
// The sizes are the fraction of the screen height the sphere's diameter
// covers: radius * scale / distance to the camera for a perspective view
// (scale is the projection's y scale), radius * scale for an orthographic
// one. The CPU widens each band by SIZE_BAND_TOLERANCE at both ends, so that
// neighbouring levels overlap by a few ulps rather than leave a gap: a
// sphere within rounding of a threshold may be kept at both levels, never
// at neither.
#define_import_path cull::visibility::screen_size

#import cull::params::params

// Whether `view` has a band at all: a uniform, so that branches on it are
// taken alike by every thread. A frustum test's kernel for plain views
// (PLAIN_VIEWS: cull_core's KernelSpec::plain_views) serves only views
// without one, and compiles the band out.
fn has_band(view: u32) -> bool {
#ifdef PLAIN_VIEWS
#ifdef VISIBILITY_SPHERE_FRUSTUM
    return false;
#else
    return params.size_bands[view][1].w != 0.0;
#endif
#else
    return params.size_bands[view][1].w != 0.0;
#endif
}

// The sphere's size under `view`'s metric as a fraction, (numerator,
// distance): size = numerator / distance. The band is
// params.size_bands[view]: [0] the camera's position (xyz) and the scale
// (w); [1] the widened min and max size, 1.0 for a perspective view, and
// 1.0 when the view has a band at all (0.0: every size is kept).
fn size_terms(view: u32, center: vec3<f32>, radius: f32) -> vec2<f32> {
    let origin_scale = params.size_bands[view][0];
    let distance = select(1.0, length(center - origin_scale.xyz), params.size_bands[view][1].z != 0.0);
    return vec2<f32>(radius * origin_scale.w, distance);
}

// Whether a size (size_terms) falls in `view`'s band, for a view that has
// one (callers test has_band first).
// Compared by multiplying, so that a camera inside the sphere (distance 0)
// counts as infinitely large.
fn terms_in_band(view: u32, terms: vec2<f32>) -> bool {
    let band = params.size_bands[view][1];
    let above_min = terms.x >= band.x * terms.y;
    // An infinite max (the nearest level) keeps everything above min.
    let below_max = (band.y > 3.0e38) | (terms.x < band.y * terms.y);
    return above_min & below_max;
}

// Which of a thread's four items are kept in `view`: those `kept` by the
// tests that came before whose size (size_terms: `a` to `d`) falls in the
// view's band, or that `overflow`ed (in every band). Whether the view has
// a band is looked up once, not per item.
fn rows_in_band(view: u32, kept: vec4<bool>, overflow: vec4<bool>, a: vec2<f32>, b: vec2<f32>, c: vec2<f32>, d: vec2<f32>) -> vec4<bool> {
    if !has_band(view) {
        return kept;
    }
    return kept & (overflow | vec4<bool>(terms_in_band(view, a), terms_in_band(view, b),
                                         terms_in_band(view, c), terms_in_band(view, d)));
}

// Whether the sphere (center, radius) falls in `view`'s size band; every
// size does in a view without one.
fn in_size_band(view: u32, center: vec3<f32>, radius: f32) -> bool {
    if !has_band(view) {
        return true;
    }
    return terms_in_band(view, size_terms(view, center, radius));
}

// The size terms of the levels of one camera (views that share view 0's
// metric), measured once: under view 0's metric, or unused (0, 1) when the
// views have no bands.
fn level_terms(center: vec3<f32>, radius: f32) -> vec2<f32> {
    if !has_band(0u) {
        return vec2<f32>(0.0, 1.0);
    }
    return size_terms(0u, center, radius);
}
