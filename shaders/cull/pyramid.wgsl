// Builds the depth pyramid that occlusion culling reads
// (cull::visibility::occlusion), mirrored on the CPU by
// cull_core::occlusion::CpuPyramid::build. Level 0 is a copy of the depth
// buffer, at its size; the levels above are the texture's mip chain (sizes
// halve, rounding down), each texel the farthest of the texels 2j and
// 2j + 1 of the level below along each axis, and the last texel of a row or
// column also of what remains (a third texel below an odd size). So texel j
// of level k covers exactly the pixels x with min(x >> k, last) == j, and
// holds their farthest depth: a test that maps pixels that way is
// conservative. One entry module on its own (it imports nothing); each
// entry point uses its own bindings.

struct PyramidParams {
    // 1 when nearer depths are greater (reverse-Z): the farthest is the
    // smallest. 0: the farthest is the largest.
    reverse_z: u32,
    pad_a: u32,
    pad_b: u32,
    pad_c: u32,
}

@group(0) @binding(0) var<uniform> pyramid: PyramidParams;
@group(0) @binding(1) var level_out: texture_storage_2d<r32float, write>;
// A multisampled depth buffer, as a depth texture.
@group(0) @binding(3) var source_multisampled: texture_depth_multisampled_2d;
// The depth buffer (a depth format or R32Float), or the level below in
// `reduce`.
@group(0) @binding(4) var source_float: texture_2d<f32>;

fn farther(a: f32, b: f32) -> f32 {
    return select(max(a, b), min(a, b), pyramid.reverse_z != 0u);
}

fn store(at: vec2<u32>, depth: f32) {
    textureStore(level_out, at, vec4<f32>(depth, 0.0, 0.0, 0.0));
}

// A multisampled depth buffer: the farthest of each pixel's samples.
@compute @workgroup_size(8, 8)
fn copy_multisampled(@builtin(global_invocation_id) id: vec3<u32>) {
    if any(id.xy >= textureDimensions(level_out)) {
        return;
    }
    var depth = textureLoad(source_multisampled, id.xy, 0);
    for (var s = 1u; s < textureNumSamples(source_multisampled); s++) {
        depth = farther(depth, textureLoad(source_multisampled, id.xy, i32(s)));
    }
    store(id.xy, depth);
}

@compute @workgroup_size(8, 8)
fn copy_float(@builtin(global_invocation_id) id: vec3<u32>) {
    if any(id.xy >= textureDimensions(level_out)) {
        return;
    }
    store(id.xy, textureLoad(source_float, id.xy, 0).x);
}

// The texels of the level below (`below` wide) that texel `x` of a level
// `size` wide reduces: [first, last] (reduced_span on the CPU).
fn span(x: u32, size: u32, below: u32) -> vec2<u32> {
    let last = select(2u * x + 1u, below - 1u, x + 1u == size);
    return vec2<u32>(min(2u * x, below - 1u), last);
}

// One level from the level below (bound as source_float, its one mip).
@compute @workgroup_size(8, 8)
fn reduce(@builtin(global_invocation_id) id: vec3<u32>) {
    let size = textureDimensions(level_out);
    if any(id.xy >= size) {
        return;
    }
    let below = textureDimensions(source_float);
    let xs = span(id.x, size.x, below.x);
    let ys = span(id.y, size.y, below.y);
    var far = textureLoad(source_float, vec2<u32>(xs.x, ys.x), 0).x;
    // At most 3 x 3 texels (the last texel below an odd size).
    for (var y = ys.x; y <= ys.y; y++) {
        for (var x = xs.x; x <= xs.y; x++) {
            far = farther(far, textureLoad(source_float, vec2<u32>(x, y), 0).x);
        }
    }
    store(id.xy, far);
}
