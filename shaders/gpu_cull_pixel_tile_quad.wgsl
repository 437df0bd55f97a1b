// The vertex stage of the pixels' depth pass and of each batch's resolve
// (render/pixel_tiles.rs): instance i covers the i-th tile of its list, two
// triangles over 16x16 pixels of the view, cut at its edges; the fragment
// stage runs on those pixels only. A list is its header (the view's tiles
// across, its width and height in pixels), then its tiles.

#ifdef PIXEL_RESOLVE
// A batch's resolve: in the batch's group, where its draws bind their
// list's arguments (a vertex stage's binding).
@group(2) @binding(21) var<storage, read> tiles: array<u32>;
#else
@group(0) @binding(2) var<storage, read> tiles: array<u32>;
#endif

const TILE: u32 = 16u;

@vertex
fn tile_quad(@builtin(vertex_index) vertex: u32, @builtin(instance_index) instance: u32) -> @builtin(position) vec4<f32> {
    let tiles_x = tiles[0];
    let size = vec2<f32>(f32(tiles[1]), f32(tiles[2]));
    let tile = tiles[4u + instance];
    // (0, 0), (1, 0), (0, 1), (0, 1), (1, 0), (1, 1)
    let corner = vec2<u32>(
        select(0u, 1u, vertex == 1u || vertex == 4u || vertex == 5u),
        select(0u, 1u, vertex == 2u || vertex == 3u || vertex == 5u),
    );
    let pixel = min(vec2<f32>((vec2<u32>(tile % tiles_x, tile / tiles_x) + corner) * TILE), size);
    return vec4<f32>(pixel.x / size.x * 2.0 - 1.0, 1.0 - pixel.y / size.y * 2.0, 0.0, 1.0);
}
