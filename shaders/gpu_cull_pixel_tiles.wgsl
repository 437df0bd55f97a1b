// Where a camera's pixel levels lie (render/pixel_tiles.rs): after the
// splat, one workgroup per tile of 16x16 pixels reads the tile's ids and
// appends the tile to the list of each batch with a pixel there, and to the
// list of tiles holding any pixel (the last list, the pixels' depth's).
// Each list's instance count is the draw's: the depth pass and each batch's
// resolve draw a quad per listed tile (gpu_cull_pixel_tile_quad.wgsl)
// instead of the whole view.

const TILE: u32 = 16u;
// Batches a view's tiles tell apart: one bit each in the workgroup's words.
const MAX_BATCHES: u32 = 256u;
const WORDS: u32 = MAX_BATCHES / 32u;

struct Tiling {
    // The view's size in pixels, and in tiles across.
    width: u32,
    height: u32,
    tiles_x: u32,
    // The batches' lists come first, then the pixels' depth's.
    batches: u32,
    // Words from one list's start to the next's; a list holds its header
    // (4 words, gpu_cull_pixel_tile_quad.wgsl) then its tiles.
    list_stride: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Per pixel, row by row: the id the splat kept (0: none).
@group(0) @binding(0) var<storage, read> ids: array<u32>;
// Per batch, ascending and apart: its first and last id.
@group(0) @binding(1) var<storage, read> ranges: array<vec2<u32>>;
// Per list, an indirect draw's arguments: 6 vertices, a tile per instance.
@group(0) @binding(2) var<storage, read_write> draws: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> lists: array<u32>;
@group(0) @binding(4) var<uniform> tiling: Tiling;

// Bit b: batch b has a pixel in the tile; the last word's bit 0: any has
// (WORDS + 1 words).
var<workgroup> present: array<atomic<u32>, 9>;

// The batch holding `id`, or `tiling.batches` where none does.
fn batch_of(id: u32) -> u32 {
    var low = 0u;
    var high = tiling.batches;
    while low < high {
        let middle = (low + high) / 2u;
        let range = ranges[middle];
        if id < range.x {
            high = middle;
        } else if id > range.y {
            low = middle + 1u;
        } else {
            return middle;
        }
    }
    return tiling.batches;
}

fn append(list: u32, tile: u32) {
    let slot = atomicAdd(&draws[list * 4u + 1u], 1u);
    lists[list * tiling.list_stride + 4u + slot] = tile;
}

@compute @workgroup_size(16, 16)
fn list_tiles(
    @builtin(workgroup_id) tile: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if lid <= WORDS {
        atomicStore(&present[lid], 0u);
    }
    workgroupBarrier();
    let xy = tile.xy * TILE + local.xy;
    if xy.x < tiling.width && xy.y < tiling.height {
        let id = ids[xy.y * tiling.width + xy.x];
        if id != 0u {
            atomicOr(&present[WORDS], 1u);
            let b = batch_of(id);
            if b < tiling.batches {
                atomicOr(&present[b / 32u], 1u << (b % 32u));
            }
        }
    }
    workgroupBarrier();
    let index = tile.y * tiling.tiles_x + tile.x;
    if lid < tiling.batches && (atomicLoad(&present[lid / 32u]) & (1u << (lid % 32u))) != 0u {
        append(lid, index);
    }
    if lid == 0u && atomicLoad(&present[WORDS]) != 0u {
        append(tiling.batches, index);
    }
}
