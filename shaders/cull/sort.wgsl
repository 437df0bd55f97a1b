// Back-to-front order of a view's survivors (cull_core::DepthSorter): a
// stable least-significant-digit radix sort, 4 bits a pass, of (key, index)
// pairs, where the key is the view-space depth of the instance's
// transformed mesh center as Bevy's `ViewRangefinder3d` measures it
// (ascending: farthest first), mapped to bits that order as the floats do.
// The instance index is sorted first (its own passes), so ties come out in
// index order whatever order the cull wrote its survivors in. Each pass is
// three dispatches: per-tile digit counts, one workgroup's scan of them,
// and a scatter that ranks each tile's elements stably. A tile is
// BLOCKS blocks of PER_THREAD elements a thread, taken one after the
// other, so that the counts one workgroup scans stay few. CPU mirror:
// cull_core::cpu::back_to_front.

#import cull::points::transformed_point

// Threads of the per-element passes (keys, store) and of the counts' scan.
const GROUP: u32 = 256u;
// The counting and scattering passes: THREADS threads take PER_THREAD
// consecutive elements each, a block; a tile is BLOCKS blocks.
const THREADS: u32 = 128u;
const PER_THREAD: u32 = 4u;
const BLOCK: u32 = THREADS * PER_THREAD;
const BLOCKS: u32 = 8u;
const TILE_LEN: u32 = BLOCK * BLOCKS;
const BINS: u32 = 16u;

// One sort of one view's list (DepthSorter::sort).
struct SortJob {
    // Row 2 of the view's view-from-world matrix: depth = dot(row, (p, 1)).
    view_row: vec4<f32>,
    // The mesh-space point whose transform is sorted by (Bevy sorts a mesh
    // by its transformed AABB center).
    local_center: vec4<f32>,
    // The word of `draw_args` holding the list's length.
    count_word: u32,
    // 16-byte parts per instance, and the format (InstanceFormat::encode_id).
    parts: u32,
    format: u32,
    // Workgroups along x of the per-element passes (a GROUP each) and of
    // the per-tile ones (a TILE_LEN each): more are two-dimensional.
    groups_x: u32,
    tile_groups_x: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// One radix pass: the digit is (value >> shift) & 15 of the key, or of
// the index where from_index is 1.
struct SortPass {
    shift: u32,
    from_index: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> job: SortJob;
@group(0) @binding(1) var<uniform> pass_params: SortPass;
@group(0) @binding(2) var<storage, read> instances: array<vec4<u32>>;
// The view's survivors: instance indices, rewritten in sorted order.
@group(0) @binding(3) var<storage, read_write> list: array<u32>;
@group(0) @binding(4) var<storage, read> draw_args: array<u32>;
@group(0) @binding(5) var<storage, read> pairs_in: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> pairs_out: array<vec2<u32>>;
// Digit counts, bin-major (bin * tiles + tile), scanned in place.
@group(0) @binding(7) var<storage, read_write> counts: array<u32>;

// Per thread, how many of its elements have each digit, as 16-bit fields
// (bins 0 to 7 in `low`, 8 to 15 in `high`, two a word), then the
// inclusive scan of those over the block.
var<workgroup> low: array<vec4<u32>, THREADS>;
var<workgroup> high: array<vec4<u32>, THREADS>;
var<workgroup> bin_totals: array<atomic<u32>, BINS>;
var<workgroup> sums: array<u32, GROUP>;
// Where each bin's next element goes, in the scatter's tile.
var<workgroup> next_slot: array<u32, BINS>;

fn list_len() -> u32 {
    return draw_args[job.count_word];
}

fn tiles_in_use() -> u32 {
    return (list_len() + TILE_LEN - 1u) / TILE_LEN;
}

// The first element of a per-element pass's workgroup.
fn first_element(group: vec3<u32>) -> u32 {
    return (group.x + group.y * job.groups_x) * GROUP;
}

fn tile_of(group: vec3<u32>) -> u32 {
    return group.x + group.y * job.tile_groups_x;
}

// Bits that order as the floats do (negative ones reversed), for every
// value but NaN.
fn ordered_bits(x: f32) -> u32 {
    let bits = bitcast<u32>(x);
    return bits ^ select(0x80000000u, 0xffffffffu, (bits >> 31u) == 1u);
}

// The instance's transformed local center.
fn sort_point(index: u32) -> vec3<f32> {
    var parts: array<vec4<u32>, 4>;
    for (var k = 0u; k < job.parts; k++) {
        parts[k] = instances[index * job.parts + k];
    }
    return transformed_point(job.format, parts, job.local_center.xyz);
}

fn digit(pair: vec2<u32>) -> u32 {
    return (select(pair.x, pair.y, pass_params.from_index == 1u) >> pass_params.shift) & (BINS - 1u);
}

// Each survivor's key and index, in list order.
@compute @workgroup_size(256)
fn make_keys(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = first_element(group) + lid;
    if i >= list_len() {
        return;
    }
    let index = list[i];
    let p = sort_point(index);
    let depth = dot(job.view_row.xyz, p) + job.view_row.w;
    pairs_out[i] = vec2<u32>(ordered_bits(depth), index);
}

// How many of each tile's elements have each digit.
@compute @workgroup_size(128)
fn count_digits(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(group);
    let tiles = tiles_in_use();
    if lid < BINS {
        atomicStore(&bin_totals[lid], 0u);
    }
    workgroupBarrier();
    let len = list_len();
    for (var k = 0u; k < TILE_LEN / THREADS; k++) {
        let i = tile * TILE_LEN + k * THREADS + lid;
        if i < len {
            atomicAdd(&bin_totals[digit(pairs_in[i])], 1u);
        }
    }
    workgroupBarrier();
    if lid < BINS && tile < tiles {
        counts[lid * tiles + tile] = atomicLoad(&bin_totals[lid]);
    }
}

// The inclusive scan of `sums` (one value per thread) over the workgroup.
fn scan_sums(lid: u32) {
    for (var offset = 1u; offset < GROUP; offset <<= 1u) {
        var add = 0u;
        if lid >= offset {
            add = sums[lid - offset];
        }
        workgroupBarrier();
        sums[lid] += add;
        workgroupBarrier();
    }
}

// The exclusive scan of `counts` in place: where each (bin, tile) starts
// in the output. One workgroup; each thread takes a run of counts.
@compute @workgroup_size(256)
fn scan_counts(@builtin(local_invocation_index) lid: u32) {
    let total = tiles_in_use() * BINS;
    let run = (total + GROUP - 1u) / GROUP;
    let first = min(lid * run, total);
    let end = min(first + run, total);
    var sum = 0u;
    for (var k = first; k < end; k++) {
        sum += counts[k];
    }
    sums[lid] = sum;
    workgroupBarrier();
    scan_sums(lid);
    var at = sums[lid] - sum;
    for (var k = first; k < end; k++) {
        let c = counts[k];
        counts[k] = at;
        at += c;
    }
}

// A digit's 16-bit field of a (low, high) pair of counters: which vector,
// which word, which half.
fn field(l: vec4<u32>, h: vec4<u32>, d: u32) -> u32 {
    let words = select(l, h, d >= 8u);
    return (words[(d & 7u) >> 1u] >> (16u * (d & 1u))) & 0xffffu;
}

// One more of digit `d` in the (low, high) counters; a digit of BINS (an
// element past the list) adds nothing.
fn count_one(counters: ptr<function, array<vec4<u32>, 2>>, d: u32) {
    let one = select(vec4<u32>(0u), vec4<u32>(1u << (16u * (d & 1u))), vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>((d & 7u) >> 1u));
    if d < 8u {
        (*counters)[0] += one;
    } else if d < BINS {
        (*counters)[1] += one;
    }
}

// The inclusive scan of `low` and `high` over the block.
fn block_scan(lid: u32) {
    for (var offset = 1u; offset < THREADS; offset <<= 1u) {
        var l = vec4<u32>(0u);
        var h = vec4<u32>(0u);
        if lid >= offset {
            l = low[lid - offset];
            h = high[lid - offset];
        }
        workgroupBarrier();
        low[lid] += l;
        high[lid] += h;
        workgroupBarrier();
    }
}

// Each element to its place: its bin's start for its tile, plus how many
// of the tile's earlier elements share its digit: those of earlier blocks
// (`next_slot`), of earlier threads of its block (a scan of 16-bit
// counters), of its thread's earlier elements; so equal digits keep their
// order.
@compute @workgroup_size(128)
fn scatter(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(group);
    let tiles = tiles_in_use();
    let len = list_len();
    if lid < BINS && tile < tiles {
        next_slot[lid] = counts[lid * tiles + tile];
    }
    for (var b = 0u; b < BLOCKS; b++) {
        let first = tile * TILE_LEN + b * BLOCK + lid * PER_THREAD;
        var pairs: array<vec2<u32>, PER_THREAD>;
        var digits: array<u32, PER_THREAD>;
        var before: array<u32, PER_THREAD>;
        var own = array<vec4<u32>, 2>(vec4<u32>(0u), vec4<u32>(0u));
        for (var k = 0u; k < PER_THREAD; k++) {
            digits[k] = BINS;
            if first + k < len {
                pairs[k] = pairs_in[first + k];
                digits[k] = digit(pairs[k]);
                before[k] = field(own[0], own[1], digits[k]);
            }
            count_one(&own, digits[k]);
        }
        low[lid] = own[0];
        high[lid] = own[1];
        workgroupBarrier();
        block_scan(lid);
        // Exclusive: the counts of the block's earlier threads.
        let l = low[lid] - own[0];
        let h = high[lid] - own[1];
        for (var k = 0u; k < PER_THREAD; k++) {
            let d = digits[k];
            if d < BINS {
                pairs_out[next_slot[d] + field(l, h, d) + before[k]] = pairs[k];
            }
        }
        workgroupBarrier();
        // The block's count of each bin: the last thread's inclusive scan.
        if lid < BINS {
            next_slot[lid] += field(low[THREADS - 1u], high[THREADS - 1u], lid);
        }
        workgroupBarrier();
    }
}

// The sorted indices back into the view's list.
@compute @workgroup_size(256)
fn store_list(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = first_element(group) + lid;
    if i < list_len() {
        list[i] = pairs_in[i].y;
    }
}
