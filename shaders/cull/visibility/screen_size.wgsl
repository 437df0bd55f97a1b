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

// Whether the sphere (center, radius) falls in `view`'s size band. The band
// is params.size_bands[view]: [0] the camera's position (xyz) and the scale
// (w); [1] the widened min and max size, 1.0 for a perspective view, and
// 1.0 when the view has a band at all (0.0: every size is kept).
fn in_size_band(view: u32, center: vec3<f32>, radius: f32) -> bool {
    let band = params.size_bands[view][1];
    // A view without a band: a branch on a uniform, taken alike by every
    // thread, so that plain culls pay nothing for the test below.
    if band.w == 0.0 {
        return true;
    }
    let origin_scale = params.size_bands[view][0];
    // size = numerator / distance: compare by multiplying, so that a camera
    // inside the sphere (distance 0) counts as infinitely large.
    let distance = select(1.0, length(center - origin_scale.xyz), band.z != 0.0);
    let numerator = radius * origin_scale.w;
    let above_min = numerator >= band.x * distance;
    // An infinite max (the nearest level) keeps everything above min.
    let below_max = (band.y > 3.0e38) | (numerator < band.y * distance);
    return above_min & below_max;
}
