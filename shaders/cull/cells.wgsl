// Cell culling (cull_core::cells): the batch's instances are sorted so that
// each tile of the cull (TILE consecutive instances) is a cell, spatially
// compact, with a bounding sphere that covers its instances' widened world
// spheres. The cell pass votes every cell against the cull's views and
// lists, per chunk, the tiles of the cells some view keeps; the cull then
// reads only those tiles (cull::params::workgroup_tile): its workgroups
// past the kept cells return at once. A cell no view keeps holds no
// instance any view keeps, so the survivors are those of the flat cull.
//
// Hillis-Steele reads every tile's verdict in tile order instead of a list
// (KEPT_CELL_FLAGS): the pass then sets a flag per kept cell, at the cell's
// own place in the chunk's region. The ordered variant needs the kept tiles
// in ascending order (ORDERED_CELL_LIST): the pass sets a bit per kept cell
// instead (and one per whole cell in a second set), and each workgroup of
// the chain finds the tile at its position in those bits itself
// (cull::variants::ordered_chain::kept_tile_at).
#define_import_path cull::cells

#import cull::params::{params, CELL_RECORD_WORDS, WHOLE_TILE}
#ifdef ORDERED_CELL_LIST
#import cull::params::{kept_bits_word, whole_bits_word}
#endif
#ifdef VISIBILITY_SPHERE_FRUSTUM
#import cull::visibility::screen_size::has_band
#endif
#ifdef VISIBILITY_OCCLUSION_LATE
#import cull::math::WorldSphere
#import cull::visibility::occlusion::hiz_visible
#endif

// Must equal cull_core::cells::CELL_TOLERANCE (a test holds them equal).
const CELL_TOLERANCE: f32 = 1.52587890625e-5;

// One cell (cull_core::CellBounds): a sphere covering its instances, xyz
// center and w radius (+inf: a cell holding an overflowed instance, kept
// in every view; -inf: a cell of instances that are all culled), the
// largest of their radii, and 1 when one of its instances is culled by
// every view (not finite), which no whole cell may hold.
struct CellBounds {
    sphere: vec4<f32>,
    largest_radius: f32,
    holds_culled: u32,
}

@group(0) @binding(#{BINDING_CELL_BOUNDS}) var<storage, read> cell_bounds: array<CellBounds>;
// Every chunk's region of kept cells (the cull binds its chunk's,
// read-only, as cull::params::kept_cells).
@group(0) @binding(#{BINDING_CELL_LISTS}) var<storage, read_write> cell_lists: array<atomic<u32>>;

// Whether the cell's sphere touches `view`'s frustum, widened per plane by
// CELL_TOLERANCE of the magnitudes summed (the plane's offset included):
// more than the instances' test widens, so that its rounding and this
// one's cannot keep an instance in a culled cell. An infinite radius is
// kept, a negative infinite one culled.
fn cell_in_view(view: u32, s: vec4<f32>) -> bool {
    return cell_against_planes(view, s, 1.0);
}

// Whether the cell's sphere lies inside `view`'s frustum with room to
// spare: narrowed per plane by the slack cell_in_view widens it by. Every
// instance's widened sphere lies inside the cell's, so every instance's
// center is then inside each plane by at least its own widened radius,
// and the instance test keeps it whatever its rounding: a whole cell's
// instances are kept without their test. An unused plane ((0, 0, 0, 1))
// holds every sphere; an infinite or NaN sphere is never inside.
fn cell_within_view(view: u32, s: vec4<f32>) -> bool {
    return cell_against_planes(view, s, -1.0);
}

// Both tests: every plane of `view` against the sphere's radius and slack
// taken outward (`side` 1) or inward (`side` -1). Mirrored by
// cull_core::cells::cell_against_planes.
fn cell_against_planes(view: u32, s: vec4<f32>, side: f32) -> bool {
    let magnitude = abs(s.x) + abs(s.y) + abs(s.z) + s.w;
    var holds = true;
    for (var k = 0u; k < 6u; k++) {
        let p = params.planes[view][k];
        let slack = CELL_TOLERANCE * (magnitude + abs(p.w));
        let unused = (side < 0.0) & (p.x == 0.0) & (p.y == 0.0) & (p.z == 0.0) & (p.w > 0.0);
        holds = holds & (unused | (p.x * s.x + p.y * s.y + p.z * s.z + p.w + side * s.w + side * slack >= 0.0));
    }
    return holds;
}

// Whether some instance of the cell may be large enough for `view`'s size
// band (cull::visibility::screen_size): beyond the farthest level's cut-off
// the whole cell is culled. An instance of radius r inside the cell's
// sphere (radius R, D from the camera) is at least D - R + r away, so its
// size r / (D - R + r) is at most L / (D - R + L) for the largest radius L.
// Widened by CELL_TOLERANCE for both tests' rounding; a camera that may be
// within the sphere keeps the cell. Mirrored by cull_core::cells::cell_in_band.
fn cell_in_band(view: u32, cell: CellBounds) -> bool {
    let band = params.size_bands[view];
    if band[1].w == 0.0 || band[1].x <= 0.0 {
        return true; // no band, or no cut-off
    }
    let s = cell.sphere;
    let largest = cell.largest_radius;
    var distance = 1.0;
    if band[1].z != 0.0 {
        let to_camera = s.xyz - band[0].xyz;
        let magnitude = abs(s.x) + abs(s.y) + abs(s.z) + abs(band[0].x) + abs(band[0].y) + abs(band[0].z) + s.w;
        let nearest = length(to_camera) - CELL_TOLERANCE * magnitude - s.w;
        if nearest <= 0.0 {
            return true;
        }
        distance = nearest + largest;
    }
    return largest * band[0].w * (1.0 + CELL_TOLERANCE) >= band[1].x * distance;
}

// Votes cell `cell`: a kept cell is counted, and appended to its chunk's
// tiles (or, with KEPT_CELL_FLAGS, flagged at its place). The frustum test
// marks a kept cell whole when it lies inside every view, none of which
// has a size band, and holds no instance that every view culls: WHOLE_TILE
// in the unordered variants' list, a bit of the second set for the
// ordered variant's chain. The cull keeps a whole cell's instances
// without testing them (cull::items::classify_items, vote_items).
fn vote_cell(cell: u32) {
    if cell >= params.cell_count {
        return;
    }
    let bounds = cell_bounds[cell];
    var keep = false;
#ifdef VISIBILITY_SPHERE_FRUSTUM
    var whole = bounds.holds_culled == 0u;
#endif
    for (var view = 0u; view < params.cell_views; view++) {
#ifdef VISIBILITY_SPHERE_FRUSTUM
        whole = whole & !has_band(view) & cell_within_view(view, bounds.sphere);
#endif
#ifdef VISIBILITY_OCCLUSION_LATE
        // The late phase writes each instance's history as in the frustum
        // and past the pyramid whatever its level: the cut-off culls none.
        keep = keep | cell_in_view(view, bounds.sphere);
#else
        keep = keep | (cell_in_view(view, bounds.sphere) & cell_in_band(view, bounds));
#endif
    }
#ifdef VISIBILITY_OCCLUSION_LATE
    // Occlusion culling's late phase: a cell whose sphere the depth pyramid
    // hides holds only hidden instances (a sphere inside it projects inside
    // its rectangle, at most as near, where the pyramid is at least as
    // near), so their history stays cleared. Widened by CELL_TOLERANCE.
    if keep {
        let s = bounds.sphere;
        keep = hiz_visible(WorldSphere(s.xyz, s.w * (1.0 + CELL_TOLERANCE), 0.0, true));
    }
#endif
    if !keep {
        return;
    }
    let chunk = cell / params.cells_per_chunk;
    let base = chunk * params.cell_region_words;
    let slot = atomicAdd(&cell_lists[base], 1u);
    let tile = cell - chunk * params.cells_per_chunk;
#ifdef ORDERED_CELL_LIST
    atomicOr(&cell_lists[base + kept_bits_word() + tile / 32u], 1u << (tile % 32u));
#ifdef VISIBILITY_SPHERE_FRUSTUM
    if whole {
        atomicOr(&cell_lists[base + whole_bits_word() + tile / 32u], 1u << (tile % 32u));
    }
#endif
#else ifdef KEPT_CELL_FLAGS
    atomicStore(&cell_lists[base + CELL_RECORD_WORDS + tile], 1u);
#else ifdef VISIBILITY_SPHERE_FRUSTUM
    atomicStore(&cell_lists[base + CELL_RECORD_WORDS + slot], select(tile, tile | WHOLE_TILE, whole));
#else
    atomicStore(&cell_lists[base + CELL_RECORD_WORDS + slot], tile);
#endif
}
