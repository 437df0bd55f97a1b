// The order in which a draw goes through its list of survivors. The cull
// writes a view's survivors in the batch's own order, and a batch's list is
// usually laid out in space (a grid, rows of trees, cells): drawn in that
// order, the triangles in flight at any moment fall on one patch of the
// screen, which one of the GPU's rasterizers serves while the others wait.
// Drawn in this order, consecutive instances come from `DRAW_ORDER_TRACKS`
// places spread evenly over the list, so they spread over the screen as
// the list does. Opaque draws only: the picture does not depend on the order
// (a blended draw keeps the list's order, which may be sorted back to front).
// No bindings, no imports.
#define_import_path bevy_gpu_cull::draw_order

// How many evenly spaced places of the list are drawn from in turn, and
// how many consecutive survivors are drawn from each: consecutive
// survivors' indices share the GPU's cache lines, which matters where
// instances are a triangle or two. Powers of two: the order costs a few
// bit operations a vertex.
const DRAW_ORDER_TRACKS: u32 = 64u;
const DRAW_ORDER_RUN: u32 = 4u;

// The place in a list of `count` survivors that draw `i` draws. The list's
// first runs of `DRAW_ORDER_RUN` survivors, as many as fill
// `DRAW_ORDER_TRACKS` rows of equal length, are read as those rows, column
// by column; the rest (fewer than `DRAW_ORDER_TRACKS` runs) in order. A
// permutation of 0..count, for every count.
fn spread_draw_order(i: u32, count: u32) -> u32 {
    let runs = (count / DRAW_ORDER_RUN) & ~(DRAW_ORDER_TRACKS - 1u);
    let run = i / DRAW_ORDER_RUN;
    if run >= runs {
        return i;
    }
    let row_length = runs / DRAW_ORDER_TRACKS;
    let spread_run = (run % DRAW_ORDER_TRACKS) * row_length + run / DRAW_ORDER_TRACKS;
    return spread_run * DRAW_ORDER_RUN + i % DRAW_ORDER_RUN;
}
