// The workgroup scan of a tile, shared by the block-atomic and ordered
// variants. A tile is ITEMS rows of WORKGROUP_SIZE instances: thread t
// holds index tile_start + k * WORKGROUP_SIZE + t of row k, so loads and
// stores coalesce, and ranks taken row after row are the instances' order
// within the tile. A thread's four row votes are packed as the bytes of one
// u32, so one scan yields every row's prefix at once (SWAR: an exclusive
// prefix over at most 256 threads is at most 255, so bytes never carry).
// The scan rakes: RAKES threads each scan RAKE_LEN counts serially, then one
// thread scans the rake totals: 3 barriers instead of 2 * log2(threads).
#define_import_path cull::scans::tile_scan

#import cull::params::{WORKGROUP_SIZE, VIEWS}
#import cull::items::unpack_bytes

const RAKE_LEN: u32 = 16u;
const RAKES: u32 = WORKGROUP_SIZE / RAKE_LEN;

var<workgroup> counts: array<u32, WORKGROUP_SIZE>;
var<workgroup> rake_prefix: array<u32, RAKES>;
var<workgroup> tile_totals: vec4<u32>;

// This thread's exclusive rank in each row, given its packed votes; the
// rows' totals are left in tile_totals. Every thread of the workgroup must
// call it.
fn scan_tile(lid: u32, votes: u32) -> vec4<u32> {
    counts[lid] = votes;
    workgroupBarrier();
    if lid < RAKES {
        var sum = 0u;
        for (var j = 0u; j < RAKE_LEN; j += 1u) {
            sum += counts[lid * RAKE_LEN + j];
            counts[lid * RAKE_LEN + j] = sum; // inclusive within the rake
        }
        rake_prefix[lid] = sum;
    }
    workgroupBarrier();
    if lid == 0u {
        var prefix = 0u;
        var totals = vec4<u32>(0u);
        for (var r = 0u; r < RAKES; r += 1u) {
            let t = rake_prefix[r];
            rake_prefix[r] = prefix; // exclusive
            prefix += t;
            totals += unpack_bytes(t);
        }
        tile_totals = totals;
    }
    workgroupBarrier();
    return unpack_bytes(rake_prefix[lid / RAKE_LEN] + counts[lid] - votes);
}

#if VIEWS > 1
// scan_tile for up to four views at once (the block-atomic variant's
// several views): one component per view, so a batch of views takes one
// scan and its three barriers instead of one each.
var<workgroup> view_counts: array<vec4<u32>, WORKGROUP_SIZE>;
var<workgroup> view_rake_prefix: array<vec4<u32>, RAKES>;
var<workgroup> view_tile_totals: array<vec4<u32>, 4>;

// Each component of `votes` is one view's packed row votes; returns each
// view's packed exclusive ranks (unpack_bytes gives the rows'), and leaves
// view v's row totals in view_tile_totals[v]. Every thread of the
// workgroup must call it.
fn scan_tile_views(lid: u32, votes: vec4<u32>) -> vec4<u32> {
    view_counts[lid] = votes;
    workgroupBarrier();
    if lid < RAKES {
        var sum = vec4<u32>(0u);
        for (var j = 0u; j < RAKE_LEN; j += 1u) {
            sum += view_counts[lid * RAKE_LEN + j];
            view_counts[lid * RAKE_LEN + j] = sum; // inclusive within the rake
        }
        view_rake_prefix[lid] = sum;
    }
    workgroupBarrier();
    if lid == 0u {
        var prefix = vec4<u32>(0u);
        var last = vec4<u32>(0u);
        for (var r = 0u; r < RAKES; r += 1u) {
            last = view_rake_prefix[r];
            view_rake_prefix[r] = prefix; // exclusive
            prefix += last;
        }
        // A row's total may be 256, which a byte cannot hold: add the
        // last rake's exclusive prefix (at most 240) and its own total (at
        // most 16) unpacked. (The packed sum of every rake is not used.)
        let before_last = view_rake_prefix[RAKES - 1u];
        view_tile_totals[0] = unpack_bytes(before_last.x) + unpack_bytes(last.x);
        view_tile_totals[1] = unpack_bytes(before_last.y) + unpack_bytes(last.y);
        view_tile_totals[2] = unpack_bytes(before_last.z) + unpack_bytes(last.z);
        view_tile_totals[3] = unpack_bytes(before_last.w) + unpack_bytes(last.w);
    }
    workgroupBarrier();
    return view_rake_prefix[lid / RAKE_LEN] + view_counts[lid] - votes;
}
#endif
