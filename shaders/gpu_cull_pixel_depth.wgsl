// The depth of a camera's pixel levels (GpuCullLodLevel::as_pixels): a
// pass over the tiles holding them (gpu_cull_pixel_tile_quad.wgsl), first
// in the batches' opaque pass, writes each pixel a
// splat claimed at the splat's depth (cull_core::PixelSplatter's key: the
// depth's bits, reverse-Z), so that what is drawn after it is tested
// against those pixels as against a mesh's.

struct PixelDepth {
    // The view's viewport origin in the target, and its width in pixels.
    origin: vec2<u32>,
    width: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> keys: array<u32>;
@group(0) @binding(1) var<uniform> pixels: PixelDepth;

@fragment
fn write_depth(@builtin(position) position: vec4<f32>) -> @builtin(frag_depth) f32 {
    let xy = vec2<u32>(position.xy) - pixels.origin;
    let key = keys[xy.y * pixels.width + xy.x];
    if key == 0u {
        discard;
    }
    return bitcast<f32>(key);
}
