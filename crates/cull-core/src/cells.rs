//! Cell culling: read only the instances of the cells a view may see.
//!
//! A flat cull reads every instance of a batch every frame. Sorted into
//! **cells** of spatially close instances, each with a bounding sphere, a
//! batch can be culled in two passes ([`crate::CullRequest::by_cells`]):
//!
//! 1. The **cell pass** (`shaders/cull/cells.wgsl`) votes every cell's
//!    sphere against the views and lists the cells some view keeps.
//! 2. The **cull** reads only those cells' instances and votes them as the
//!    flat cull does. It is dispatched over every tile, as the flat cull
//!    is; a workgroup past the kept cells returns at once. (An indirect
//!    dispatch sized by the cell pass was measured slower: wgpu checks each
//!    indirect dispatch's arguments with a dispatch of its own unless
//!    `InstanceFlags::VALIDATION_INDIRECT_CALL` is off.)
//!
//! [`crate::CullRequest::by_cells_if_faster`] has the batch's
//! [`CellLayout`] on the CPU, and with the unordered variants
//! (`SubgroupBallot`, `SubgroupShuffle`, `BlockAtomic`) in a plain cull it
//! lists the kept cells there instead (`CellLayout::listed_tiles`): the
//! cell pass's test with twice its slack, so the list holds every cell the
//! cell pass could keep (and marks whole only cells it would). The list is
//! written with the cull's uniforms, and the cull is **one dispatch of a
//! workgroup per listed tile** (per chunk of the batch): no cell pass, no
//! pass boundary, and no workgroups that return at once but for a chunk
//! with nothing listed (one) and a dispatch past 65535 workgroups wrapped
//! into two dimensions. Each instance of a listed cell is still tested, so
//! the survivors are the same. [`CullOutcome::listed_cells`](crate::CullOutcome::listed_cells)
//! says how many cells it listed.
//!
//! A cell is one tile of the cull ([`crate::Culler::tile_len`] consecutive
//! instances, what one workgroup reads), so the second pass is the variant's
//! own kernel with its workgroups mapped to the kept tiles. A cell's sphere
//! covers its instances' spheres widened by more than the frustum test's
//! tolerance, and the cell pass widens it again by [`CELL_TOLERANCE`], so a
//! cell that no view keeps holds no instance that any view keeps: **the
//! survivors are exactly the flat cull's**, in every view and level.
//!
//! The CPU side is [`CellLayout`]: [`CellLayout::sort`] orders a batch along
//! a Morton curve over its instances' centers (so each tile is compact) and
//! computes the cells' bounds ([`CellBounds`]: a sphere and the largest
//! instance radius); [`CellLayout::bounds_of`] recomputes them
//! after edits (bounds only grow or shrink with what the instances hold,
//! so refitting the edited cells keeps them conservative). The GPU side is
//! [`CellIndex`]: the bounds and, per chunk, the kept cells.
//!
//! Survivors are indices into the **sorted** batch ([`CellLayout::order`]
//! maps them back to the input's): in no particular order from the
//! unordered variants; `Ordered` keeps the sorted batch's order (its chain
//! walks the kept cells' tiles in ascending order, listed by a pass of
//! its own after the cell pass), and so does `OrderedTwoPass` (its vote
//! pass takes the kept tiles in any order and its gather writes every
//! tile in ascending order, a culled cell's tile counting zero).
//!
//! A kept cell that lies inside every view with room to spare is
//! **whole** ([`CellLayout::whole_cells`]): the single-pass variants keep
//! its instances without testing them, which saves their transform and
//! plane tests (not their bytes). The frustum test alone takes whole
//! cells, in views without a size band.
//!
//! A view with a level-of-detail band ([`crate::SizeBand`]) also culls
//! the cells whose instances are all below its cut-off: none can look
//! larger than the largest radius at the nearest point of the cell's
//! sphere (see `cell_in_band`).

use crate::error::CullError;
use crate::frustum::Frustum;
use crate::instance::InstanceFormat;
use crate::kernel::{PassLayout, ShaderModule, Slot, bindings, shader_module};
use crate::sphere::{Sphere, widen_radius};
use crate::timing::PassKind;

/// Words of a chunk's record of kept cells before their tiles: their
/// number (`CELL_RECORD_WORDS` in the shaders).
pub const CELL_RECORD_WORDS: u32 = 1;

/// Relative widening of a cell's sphere in the cell pass:
/// `r + CELL_TOLERANCE·(|c|₁ + r + |d|)` per plane. Four times the frustum
/// test's [`crate::sphere::PLANE_TOLERANCE`]: it covers the cell pass's own
/// rounding and the instance test's, which may round the other way.
pub const CELL_TOLERANCE: f32 = 1.0 / (1 << 16) as f32;

/// A cull by cells pays for its cell pass and the pass boundary (measured
/// in `docs/benchmarks.md#culling-by-cells`) with the instances it
/// does not read: below this many bytes left unread,
/// [`CellLayout::pays_off`] says the flat cull is faster or about as fast.
pub const CELLS_MIN_SKIPPED_BYTES: u64 = 64 << 20;

/// [`CELLS_MIN_SKIPPED_BYTES`] for a cull whose kept cells the CPU lists
/// (the unordered variants' plain culls, one dispatch over the listed
/// tiles): such a cull of a batch sorted into cells was measured no slower
/// than the flat cull even with every cell kept, and faster from a few
/// MiB left unread (`docs/benchmarks.md#culling-by-cells`).
pub const LISTED_CELLS_MIN_SKIPPED_BYTES: u64 = 4 << 20;

/// The bit of a listed tile that marks its cell whole (`WHOLE_TILE` in
/// `params.wgsl`): its instances are kept without their test.
pub(crate) const WHOLE_TILE: u32 = 1 << 31;

/// How much wider a cell's CPU listing tests it than the cell pass does
/// ([`CellLayout::listed_tiles`]): twice the slack, so that the listing
/// keeps every cell the cell pass could keep and marks whole only cells
/// the cell pass would, whatever either side's rounding (a few ulps of the
/// magnitudes, against a slack of 2⁻¹⁶ of them).
const LISTING_SLACK: f32 = 2.0;

/// Threads per workgroup of the cell pass.
pub(crate) const CELL_PASS_WORKGROUP: u32 = 64;

pub(crate) const MODULE: ShaderModule = shader_module!("cells.wgsl");

/// The cell pass's entry module (entry `cull_cells`), composed with the
/// cull's shader defs: one for every variant.
pub(crate) const PASS_MODULE: ShaderModule = shader_module!("cell_pass.wgsl");

/// The cell pass, first of a cull by cells: uniforms, the cells' bounds,
/// and every chunk's kept cells.
pub(crate) fn cell_pass() -> PassLayout {
    PassLayout {
        module: Some(PASS_MODULE),
        entry_point: "cull_cells",
        kind: PassKind::Cells,
        zeroed_workgroup_memory: true,
        bindings: vec![
            (bindings::PARAMS, Slot::Params),
            (bindings::CELL_BOUNDS, Slot::Read),
            (bindings::CELL_LISTS, Slot::ReadWrite),
        ],
    }
}

/// What the cell pass knows of one cell: a sphere covering its instances
/// and the largest of their radii.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellBounds {
    /// `[x, y, z, radius]` in world space, covering every instance's
    /// sphere. A radius of `+∞` marks a cell with an instance whose sphere
    /// overflows `f32` (kept in every view, as the flat cull keeps that
    /// instance); `−∞` a cell of instances that are all culled (not finite).
    pub sphere: [f32; 4],
    /// The largest world-space radius of its instances (rounded up): with
    /// the sphere, it bounds how large on screen any of them can look,
    /// which lets a level-of-detail cut-off cull the whole cell.
    pub largest_radius: f32,
    /// Whether one of its instances is not finite (culled by every view
    /// whatever the sphere): such a cell is never taken whole (see
    /// [`CellLayout::whole_cells`]), since its instances must be tested.
    pub holds_culled: bool,
}

impl CellBounds {
    /// The layout the cell pass reads (`CellBounds` in `cells.wgsl`).
    fn gpu(&self) -> [f32; 8] {
        let [x, y, z, r] = self.sphere;
        let holds_culled = f32::from_bits(u32::from(self.holds_culled));
        [x, y, z, r, self.largest_radius, holds_culled, 0.0, 0.0]
    }
}

/// What [`crate::CullRequest::by_cells_if_faster`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellPick {
    /// Cells the cell pass keeps, by its CPU mirror
    /// ([`CellLayout::kept_cells`]; the GPU may differ by a cell within
    /// rounding of a plane).
    pub kept: u32,
    /// Whether it culled by cells (else flat: too little left unread).
    pub by_cells: bool,
}

/// Bytes of one cell's bounds on the GPU (what the cell pass reads per cell).
pub const CELL_BOUNDS_BYTES: u64 = 32;

/// A batch sorted into cells: the order and each cell's bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct CellLayout {
    /// Instance `k` of the sorted batch is instance `order[k]` of the input.
    pub order: Vec<u32>,
    /// One per cell: cell `c` holds sorted instances `c · cell_len ..`.
    pub bounds: Vec<CellBounds>,
    /// Instances per cell: the culler's tile ([`crate::Culler::tile_len`]).
    pub cell_len: u32,
}

impl CellLayout {
    /// Sorts `bytes` (instances of `format`; `bounds` is their mesh's
    /// local bounding sphere) into cells of `cell_len` instances along a
    /// Morton curve over their world-space centers, and computes each
    /// cell's bounds. Returns the sorted bytes, to upload in place of the
    /// input, and the layout. Instances that are not finite go last.
    pub fn sort(
        format: InstanceFormat,
        bytes: &[u8],
        bounds: Sphere,
        cell_len: u32,
    ) -> Result<(Vec<u8>, Self), CullError> {
        let stride = format.stride() as usize;
        if cell_len == 0 || !bytes.len().is_multiple_of(stride) {
            return Err(CullError::InvalidParameter(
                "cells need a cell length and whole instances",
            ));
        }
        let n = bytes.len() / stride;
        let centers: Vec<Option<glam::Vec3>> = (0..n)
            .map(|i| {
                format
                    .world_sphere(bytes, i, bounds)
                    .filter(|s| s.center.is_finite() && s.radius.is_finite())
                    .map(|s| s.center)
            })
            .collect();
        let (lo, hi) = centers.iter().flatten().fold(
            (
                glam::Vec3::splat(f32::INFINITY),
                glam::Vec3::splat(f32::NEG_INFINITY),
            ),
            |(lo, hi), c| (lo.min(*c), hi.max(*c)),
        );
        // One scale on every axis (a cube around the centers), so that a
        // flat batch's cells are compact in its plane, not slabs.
        let extent = (hi - lo).max_element().max(f32::MIN_POSITIVE);
        let key = |c: &Option<glam::Vec3>| -> u64 {
            match c {
                // 21 bits per axis: 63-bit codes.
                Some(c) => {
                    let q = ((*c - lo) / extent * ((1 << 21) - 1) as f32)
                        .clamp(glam::Vec3::ZERO, glam::Vec3::splat(((1 << 21) - 1) as f32));
                    morton3(q.x as u64, q.y as u64, q.z as u64)
                }
                None => u64::MAX,
            }
        };
        let mut keyed: Vec<(u64, u32)> = centers
            .iter()
            .zip(0..n as u32)
            .map(|(c, i)| (key(c), i))
            .collect();
        keyed.sort_unstable();
        let order: Vec<u32> = keyed.into_iter().map(|(_, i)| i).collect();
        let mut sorted = Vec::with_capacity(bytes.len());
        for &i in &order {
            let i = i as usize;
            sorted.extend_from_slice(&bytes[i * stride..(i + 1) * stride]);
        }
        let cells = Self::bounds_of(format, &sorted, bounds, cell_len)?;
        Ok((
            sorted,
            Self {
                order,
                bounds: cells,
                cell_len,
            },
        ))
    }

    /// The cell bounds of `bytes` as they are (sorted, or edited since):
    /// cell `c` covers instances `c · cell_len ..`. Recompute the cells an
    /// edit touched and write them with [`CellIndex::write_bounds`].
    pub fn bounds_of(
        format: InstanceFormat,
        bytes: &[u8],
        bounds: Sphere,
        cell_len: u32,
    ) -> Result<Vec<CellBounds>, CullError> {
        let stride = format.stride() as usize;
        if cell_len == 0 || !bytes.len().is_multiple_of(stride) {
            return Err(CullError::InvalidParameter(
                "cells need a cell length and whole instances",
            ));
        }
        let n = bytes.len() / stride;
        let cell_len = cell_len as usize;
        Ok((0..n.div_ceil(cell_len))
            .map(|c| cell_bounds(format, bytes, bounds, c * cell_len..((c + 1) * cell_len).min(n)))
            .collect())
    }

    /// Grows the bounds of the cell that holds sorted instance `index` to
    /// cover it as it is now: `instance` is its bytes (one instance of
    /// `format`), `bounds` its mesh's local sphere. Constant time per edit,
    /// and conservative: the cell's other instances stay covered. Bounds
    /// only grow this way (an instance that moved away leaves its old place
    /// covered), so recompute the grown cells with [`Self::bounds_of`] now
    /// and then to tighten them. Returns the cell, whose bounds to write
    /// with [`CellIndex::write_bounds`].
    pub fn grow(
        &mut self,
        format: InstanceFormat,
        index: u32,
        instance: &[u8],
        bounds: Sphere,
    ) -> Result<u32, CullError> {
        let cell = index / self.cell_len;
        if instance.len() as u64 != format.stride() || cell as usize >= self.bounds.len() {
            return Err(CullError::InvalidParameter(
                "grow takes one instance of a cell of the layout",
            ));
        }
        let reach = instance_reach(format, instance, 0, bounds);
        self.bounds[cell as usize] = grown(self.bounds[cell as usize], reach);
        Ok(cell)
    }

    /// Cells of the layout.
    pub fn cells(&self) -> u32 {
        self.bounds.len() as u32
    }

    /// How many of the cells covering the first `count` instances some
    /// view of `frusta` keeps, as the cell pass decides (its test in the
    /// same `f32` arithmetic; the GPU may decide otherwise for a cell within
    /// rounding of a plane).
    pub fn kept_cells(&self, frusta: &[Frustum], count: u32) -> u32 {
        let cells = (count.div_ceil(self.cell_len) as usize).min(self.bounds.len());
        self.bounds[..cells]
            .iter()
            .filter(|c| {
                frusta
                    .iter()
                    .any(|f| cell_in_view(f, &c.sphere) && cell_in_band(f, c))
            })
            .count() as u32
    }

    /// The tiles a cull by cells reads, listed on the CPU instead of by the
    /// cell pass (the unordered variants' [`crate::CullRequest::by_cells_if_faster`]):
    /// per chunk of `cells_per_chunk` cells, the tile of each cell of the
    /// first `count` instances that some view of `frusta` may keep, tested
    /// as the cell pass tests it with [`LISTING_SLACK`] times its slack (so
    /// every cell it could keep is listed; the cull tests each instance of
    /// a listed cell, so the survivors are the flat cull's). With `whole`,
    /// a cell inside every view with that much room to spare, in views
    /// without a size band, is marked [`WHOLE_TILE`].
    pub(crate) fn listed_tiles(
        &self,
        frusta: &[Frustum],
        count: u32,
        cells_per_chunk: u32,
        whole: bool,
    ) -> Vec<Vec<u32>> {
        let cells = count.div_ceil(self.cell_len) as usize;
        let mut lists = vec![Vec::new(); cells.div_ceil(cells_per_chunk as usize)];
        let whole = whole && frusta.iter().all(|f| f.size_band.is_none());
        for cell in 0..cells {
            // A cell past the layout's (a count it was not made for) is
            // read whole: listed, not marked.
            let Some(bounds) = self.bounds.get(cell) else {
                lists[cell / cells_per_chunk as usize].push(cell as u32 % cells_per_chunk);
                continue;
            };
            let keep = frusta.iter().any(|f| {
                cell_against_planes_by(f, &bounds.sphere, 1.0, LISTING_SLACK)
                    && cell_in_band_by(f, bounds, LISTING_SLACK)
            });
            if !keep {
                continue;
            }
            let is_whole = whole
                && !bounds.holds_culled
                && frusta
                    .iter()
                    .all(|f| cell_against_planes_by(f, &bounds.sphere, -1.0, LISTING_SLACK));
            let tile = (cell as u32 % cells_per_chunk) | if is_whole { WHOLE_TILE } else { 0 };
            lists[cell / cells_per_chunk as usize].push(tile);
        }
        lists
    }

    /// How many of the cells covering the first `count` instances the cell
    /// pass marks **whole**, as it decides (the same `f32` arithmetic): the
    /// single-pass variants keep their instances without testing them. A
    /// whole cell lies inside every view of `frusta` with room to spare,
    /// no view has a size band, and it holds no instance that is not
    /// finite. (Only the frustum test takes whole cells; the tests with
    /// levels of detail or occlusion test every instance of a kept cell.)
    pub fn whole_cells(&self, frusta: &[Frustum], count: u32) -> u32 {
        let cells = (count.div_ceil(self.cell_len) as usize).min(self.bounds.len());
        self.bounds[..cells]
            .iter()
            .filter(|c| {
                !c.holds_culled
                    && frusta
                        .iter()
                        .all(|f| f.size_band.is_none() && cell_within_view(f, &c.sphere))
            })
            .count() as u32
    }

    /// Whether culling the first `count` instances by cells with a cell pass
    /// should be faster than the flat cull for `frusta`: the cells no view
    /// keeps must hold at least [`CELLS_MIN_SKIPPED_BYTES`] of instances (a
    /// cull that lists its cells on the CPU pays off from
    /// [`LISTED_CELLS_MIN_SKIPPED_BYTES`]: [`Self::leaves_unread`]). A layout
    /// that is not spatially coherent (every cell as large as the batch)
    /// keeps every cell, and so picks the flat cull.
    pub fn pays_off(&self, format: InstanceFormat, frusta: &[Frustum], count: u32) -> bool {
        self.leaves_unread(format, frusta, count, CELLS_MIN_SKIPPED_BYTES)
    }

    /// Whether culling the first `count` instances by cells for `frusta`
    /// leaves at least `bytes` of instances unread ([`Self::pays_off`] with
    /// a threshold of your own).
    pub fn leaves_unread(&self, format: InstanceFormat, frusta: &[Frustum], count: u32, bytes: u64) -> bool {
        self.unread_bytes(format, self.kept_cells(frusta, count), count) >= bytes
    }

    /// Whether to cull the first `count` instances by cells for `frusta`:
    /// when at least `min_skipped_bytes` would be left unread. What
    /// [`crate::CullRequest::by_cells_if_faster`] decides (for any phase),
    /// for callers that pick before they build the request.
    pub fn pick(
        &self,
        format: InstanceFormat,
        frusta: &[Frustum],
        count: u32,
        min_skipped_bytes: u64,
    ) -> CellPick {
        let kept = self.kept_cells(frusta, count);
        CellPick {
            kept,
            by_cells: self.unread_bytes(format, kept, count) >= min_skipped_bytes,
        }
    }

    /// Bytes of the first `count` instances a cull by cells leaves unread
    /// when the cell pass keeps `kept` cells ([`Self::kept_cells`]).
    pub fn unread_bytes(&self, format: InstanceFormat, kept: u32, count: u32) -> u64 {
        let cells = count.div_ceil(self.cell_len).min(self.cells());
        let skipped = cells.saturating_sub(kept) as u64 * self.cell_len as u64;
        skipped.min(count as u64) * format.stride()
    }
}

/// The cell pass's test (`cell_in_view` in `shaders/cull/cells.wgsl`), in
/// the same order of operations: each plane widened as uploaded, the
/// sphere by [`CELL_TOLERANCE`] of the magnitudes summed.
fn cell_in_view(frustum: &Frustum, s: &[f32; 4]) -> bool {
    cell_against_planes(frustum, s, 1.0)
}

/// The cell pass's whole-cell test (`cell_within_view` in
/// `shaders/cull/cells.wgsl`), in the same order of operations: whether
/// the sphere lies inside every plane, narrowed by the slack
/// [`cell_in_view`] widens it by. Every instance's widened sphere lies in
/// the cell's, so each instance's center is inside every plane by at least
/// its own widened radius: the instance test keeps it, whatever its
/// rounding. An unused plane (`(0, 0, 0, 1)`) holds every sphere.
fn cell_within_view(frustum: &Frustum, s: &[f32; 4]) -> bool {
    cell_against_planes(frustum, s, -1.0)
}

/// Both tests (`cell_against_planes` in `shaders/cull/cells.wgsl`): the
/// radius and slack taken outward (`side` 1) or inward (`side` −1).
fn cell_against_planes(frustum: &Frustum, s: &[f32; 4], side: f32) -> bool {
    cell_against_planes_by(frustum, s, side, 1.0)
}

/// [`cell_against_planes`] with `times` its slack.
fn cell_against_planes_by(frustum: &Frustum, s: &[f32; 4], side: f32, times: f32) -> bool {
    let magnitude = s[0].abs() + s[1].abs() + s[2].abs() + s[3];
    frustum.planes().iter().all(|p| {
        let p = crate::frustum::widen_plane(*p);
        let slack = times * CELL_TOLERANCE * (magnitude + p.w.abs());
        let unused = side < 0.0 && p.x == 0.0 && p.y == 0.0 && p.z == 0.0 && p.w > 0.0;
        unused || p.x * s[0] + p.y * s[1] + p.z * s[2] + p.w + side * s[3] + side * slack >= 0.0
    })
}

/// The cell pass's size test (`cell_in_band` in `shaders/cull/cells.wgsl`),
/// in the same order of operations: whether some instance of the cell may
/// be as large as `frustum`'s band's cut-off. An instance of radius `r`
/// inside the cell's sphere (radius `R`, `D` from the camera) is at least
/// `D − R + r` away, so its size `r / (D − R + r)` is at most
/// `L / (D − R + L)` for the largest radius `L`.
fn cell_in_band(frustum: &Frustum, cell: &CellBounds) -> bool {
    cell_in_band_by(frustum, cell, 1.0)
}

/// [`cell_in_band`] with `times` its tolerance.
fn cell_in_band_by(frustum: &Frustum, cell: &CellBounds, times: f32) -> bool {
    let tolerance = times * CELL_TOLERANCE;
    let Some(band) = frustum.size_band else {
        return true;
    };
    let [[ox, oy, oz, scale], [min, _, perspective, _]] = band.gpu();
    if min <= 0.0 {
        return true;
    }
    let [x, y, z, r] = cell.sphere;
    let largest = cell.largest_radius;
    let mut distance = 1.0;
    if perspective != 0.0 {
        let to_camera = glam::Vec3::new(x - ox, y - oy, z - oz);
        let magnitude = x.abs() + y.abs() + z.abs() + ox.abs() + oy.abs() + oz.abs() + r;
        let nearest = to_camera.length() - tolerance * magnitude - r;
        if nearest <= 0.0 {
            return true;
        }
        distance = nearest + largest;
    }
    largest * scale * (1.0 + tolerance) >= min * distance
}

/// What a cell's bounds must cover of one instance: its center and the
/// radius its sphere reaches (widened as the frustum test widens it, plus
/// that tolerance again for the GPU's rounding of the sphere, in `f64`),
/// and its radius as the size test measures it. `Err(())` for an instance
/// whose sphere overflows (kept by every view, so must its cell be);
/// `Ok(None)` for one that is not finite (culled by every view).
type Reach = Result<Option<(glam::DVec3, f64, f32)>, ()>;

fn instance_reach(format: InstanceFormat, bytes: &[u8], index: usize, bounds: Sphere) -> Reach {
    let Some(s) = format.world_sphere(bytes, index, bounds) else {
        return Ok(None);
    };
    let wide = widen_radius(s.center, s.radius, s.terms);
    if !wide.is_finite() || !s.center.is_finite() {
        return Err(());
    }
    let slack = crate::sphere::PLANE_TOLERANCE as f64
        * (s.center.abs().element_sum() as f64 + s.radius as f64 + s.terms as f64);
    Ok(Some((s.center.as_dvec3(), wide as f64 + slack, s.radius.abs())))
}

/// A cell holding an instance whose sphere overflows: kept by every view.
const OVERFLOWED: CellBounds = CellBounds {
    sphere: [0.0, 0.0, 0.0, f32::INFINITY],
    largest_radius: f32::INFINITY,
    holds_culled: false,
};

/// A cell of instances that are all culled.
const EMPTY: CellBounds = CellBounds {
    sphere: [0.0, 0.0, 0.0, f32::NEG_INFINITY],
    largest_radius: 0.0,
    holds_culled: true,
};

/// The bounds of one cell: a sphere around the midpoint of its instances'
/// centers reaching past each one's [`instance_reach`], rounded up; and
/// the largest radius, rounded up.
fn cell_bounds(
    format: InstanceFormat,
    bytes: &[u8],
    bounds: Sphere,
    range: std::ops::Range<usize>,
) -> CellBounds {
    let mut spheres = Vec::with_capacity(range.len());
    let mut largest = 0.0f32;
    let mut holds_culled = false;
    for i in range {
        match instance_reach(format, bytes, i, bounds) {
            Err(()) => return OVERFLOWED,
            Ok(None) => holds_culled = true,
            Ok(Some((center, reach, radius))) => {
                spheres.push((center, reach));
                largest = largest.max(round_up(radius as f64));
            }
        }
    }
    if spheres.is_empty() {
        return EMPTY;
    }
    let (lo, hi) = spheres.iter().fold(
        (
            glam::DVec3::splat(f64::INFINITY),
            glam::DVec3::splat(f64::NEG_INFINITY),
        ),
        |(lo, hi), (c, _)| (lo.min(*c), hi.max(*c)),
    );
    let center = ((lo + hi) * 0.5).as_vec3();
    let reach = spheres
        .iter()
        .map(|(c, r)| c.distance(center.as_dvec3()) + r)
        .fold(0.0f64, f64::max);
    CellBounds {
        sphere: [center.x, center.y, center.z, round_up(reach)],
        largest_radius: largest,
        holds_culled,
    }
}

/// `cell` grown to cover also an instance of this reach: the smallest
/// sphere around both spheres, its center rounded to `f32` and its radius
/// then measured from that center and rounded up.
fn grown(cell: CellBounds, reach: Reach) -> CellBounds {
    let (center, reach, radius) = match reach {
        Err(()) => return OVERFLOWED,
        Ok(None) => {
            return CellBounds {
                holds_culled: true,
                ..cell
            };
        }
        Ok(Some(r)) => r,
    };
    let [x, y, z, r] = cell.sphere;
    if r == f32::INFINITY {
        return cell;
    }
    let largest = cell.largest_radius.max(round_up(radius as f64));
    if r == f32::NEG_INFINITY {
        let c = center.as_vec3();
        return CellBounds {
            sphere: [c.x, c.y, c.z, round_up(c.as_dvec3().distance(center) + reach)],
            largest_radius: largest,
            holds_culled: cell.holds_culled,
        };
    }
    let old = glam::DVec3::new(x as f64, y as f64, z as f64);
    let (r, d) = (r as f64, old.distance(center));
    if d + reach <= r {
        return CellBounds {
            largest_radius: largest,
            ..cell
        };
    }
    if r + d <= reach {
        // The instance's sphere holds the cell's.
        let c = center.as_vec3();
        let fit = (c.as_dvec3().distance(center) + reach).max(c.as_dvec3().distance(old) + r);
        return CellBounds {
            sphere: [c.x, c.y, c.z, round_up(fit)],
            largest_radius: largest,
            ..cell
        };
    }
    let radius = (r + d + reach) * 0.5;
    let c = (old + (center - old) * ((radius - r) / d)).as_vec3();
    let fit = (c.as_dvec3().distance(old) + r).max(c.as_dvec3().distance(center) + reach);
    CellBounds {
        sphere: [c.x, c.y, c.z, round_up(fit)],
        largest_radius: largest,
        ..cell
    }
}

/// `x` a little enlarged and rounded up to `f32`.
fn round_up(x: f64) -> f32 {
    let y = (x * (1.0 + 1e-6)) as f32;
    if (y as f64) < x { y.next_up() } else { y }
}

/// Interleaves the low 21 bits of three coordinates.
fn morton3(x: u64, y: u64, z: u64) -> u64 {
    fn spread(mut v: u64) -> u64 {
        v &= 0x1f_ffff;
        v = (v | v << 32) & 0x1f00000000ffff;
        v = (v | v << 16) & 0x1f0000ff0000ff;
        v = (v | v << 8) & 0x100f00f00f00f00f;
        v = (v | v << 4) & 0x10c30c30c30c30c3;
        (v | v << 2) & 0x1249249249249249
    }
    spread(x) | spread(y) << 1 | spread(z) << 2
}

/// A batch's cells on the GPU: one sphere per cell and, per chunk of the
/// cull, the number and tiles of the kept cells that the cell pass writes
/// and the cull reads. Made for one culler ([`CellIndex::new`]).
pub struct CellIndex {
    pub(crate) culler_id: u64,
    pub(crate) bounds: wgpu::Buffer,
    /// Every chunk's region: [`CELL_RECORD_WORDS`] then the kept tiles.
    pub(crate) kept: wgpu::Buffer,
    pub(crate) cells: u32,
    pub(crate) cell_len: u32,
    pub(crate) cells_per_chunk: u32,
    /// Bytes between two chunks' regions (a multiple of 256, so each can
    /// be bound on its own).
    pub(crate) region_bytes: u64,
    pub(crate) chunks: u32,
    /// [`crate::CullRequest::by_cells_if_faster`] culls by cells when
    /// at least this many bytes are left unread: with a cell pass, and
    /// with the kept cells listed on the CPU.
    pub(crate) min_skipped_bytes: u64,
    pub(crate) listed_min_skipped_bytes: u64,
}

impl CellIndex {
    /// Cells it holds: instances up to `cells · cell_len`.
    pub fn cells(&self) -> u32 {
        self.cells
    }

    /// Instances per cell (the culler's tile).
    pub fn cell_len(&self) -> u32 {
        self.cell_len
    }

    /// The bytes a cull by cells with a cell pass must leave unread for
    /// [`crate::CullRequest::by_cells_if_faster`] to take it.
    pub fn min_skipped_bytes(&self) -> u64 {
        self.min_skipped_bytes
    }

    /// The bytes a cull by cells listed on the CPU (the unordered
    /// variants' plain culls) must leave unread for
    /// [`crate::CullRequest::by_cells_if_faster`] to take it.
    pub fn listed_min_skipped_bytes(&self) -> u64 {
        self.listed_min_skipped_bytes
    }

    /// How many bytes of instances a cull by cells must leave unread for
    /// [`crate::CullRequest::by_cells_if_faster`] to take it, listed on the
    /// CPU or with a cell pass ([`LISTED_CELLS_MIN_SKIPPED_BYTES`] and
    /// [`CELLS_MIN_SKIPPED_BYTES`] by default; 0 always culls by cells).
    pub fn set_min_skipped_bytes(&mut self, bytes: u64) {
        self.min_skipped_bytes = bytes;
        self.listed_min_skipped_bytes = bytes;
    }

    /// Back to the default thresholds, one per way of culling by cells
    /// ([`CELLS_MIN_SKIPPED_BYTES`] with a cell pass,
    /// [`LISTED_CELLS_MIN_SKIPPED_BYTES`] listed on the CPU).
    pub fn reset_min_skipped_bytes(&mut self) {
        self.min_skipped_bytes = CELLS_MIN_SKIPPED_BYTES;
        self.listed_min_skipped_bytes = LISTED_CELLS_MIN_SKIPPED_BYTES;
    }

    /// Writes `cells` (from [`CellLayout`]) from cell `first` on.
    pub fn write_bounds(
        &self,
        queue: &wgpu::Queue,
        first: u32,
        cells: &[CellBounds],
    ) -> Result<(), CullError> {
        let end = first as u64 + cells.len() as u64;
        if end > self.cells as u64 {
            return Err(CullError::CountExceedsCapacity {
                count: end,
                capacity: self.cells as u64,
            });
        }
        if !cells.is_empty() {
            let words: Vec<[f32; 8]> = cells.iter().map(CellBounds::gpu).collect();
            queue.write_buffer(
                &self.bounds,
                first as u64 * CELL_BOUNDS_BYTES,
                bytemuck::cast_slice(&words),
            );
        }
        Ok(())
    }

    /// How many cells the last cull kept, read back (blocking; for tests
    /// and statistics).
    pub fn read_kept(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<u32, CullError> {
        let mut kept = 0;
        for chunk in 0..self.chunks {
            let at = chunk as u64 * self.region_bytes;
            let bytes = crate::buffers::read_back(device, queue, &self.kept, at, 4)?;
            kept += bytemuck::pod_read_unaligned::<u32>(&bytes);
        }
        Ok(kept)
    }

    /// Bytes of its buffers.
    pub fn buffer_bytes(&self) -> u64 {
        self.bounds.size() + self.kept.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Instance;
    use glam::{Quat, Vec3};

    fn scene(n: usize) -> Vec<Instance> {
        (0..n)
            .map(|i| {
                let f = i as f32;
                Instance {
                    position: Vec3::new(
                        (f * 7.31).sin() * 100.0,
                        (f * 3.7).cos() * 5.0,
                        (f * 1.3).sin() * 100.0,
                    ),
                    rotation: Quat::from_rotation_y(f),
                    scale: 1.0,
                }
            })
            .collect()
    }

    /// Every instance's widened sphere lies inside its cell's sphere, the
    /// order is a permutation, and the sorted bytes are the input's in
    /// that order.
    #[test]
    fn cells_cover_their_instances() {
        let bounds = Sphere::new(Vec3::new(0.1, 0.2, 0.0), 0.7);
        for format in InstanceFormat::ALL {
            let instances = scene(5000);
            let bytes = format.encode(&instances).unwrap();
            let (sorted, layout) = CellLayout::sort(format, &bytes, bounds, 256).unwrap();
            let stride = format.stride() as usize;
            let mut seen = vec![false; instances.len()];
            for (k, &i) in layout.order.iter().enumerate() {
                assert!(!seen[i as usize]);
                seen[i as usize] = true;
                let i = i as usize;
                assert_eq!(
                    sorted[k * stride..(k + 1) * stride],
                    bytes[i * stride..(i + 1) * stride]
                );
            }
            assert_eq!(layout.cells(), 5000u32.div_ceil(256));
            for k in 0..instances.len() {
                let s = format.world_sphere(&sorted, k, bounds).unwrap();
                let cell = layout.bounds[k / 256].sphere;
                assert!(s.radius <= layout.bounds[k / 256].largest_radius);
                let wide = widen_radius(s.center, s.radius, s.terms) as f64;
                let reach = s
                    .center
                    .as_dvec3()
                    .distance(Vec3::from_slice(&cell[..3]).as_dvec3())
                    + wide;
                assert!(
                    reach <= cell[3] as f64,
                    "{format:?} instance {k} reaches past its cell"
                );
            }
        }
    }

    /// Growing a cell for edited instances keeps every instance covered,
    /// whatever the edit (moved far, inside, overflowed, not finite), and
    /// leaves a cell that already covers the instance as it was.
    #[test]
    fn grown_cells_cover_their_instances() {
        let bounds = Sphere::new(Vec3::new(0.1, 0.2, 0.0), 0.7);
        for format in InstanceFormat::ALL {
            let stride = format.stride() as usize;
            let (mut sorted, mut layout) =
                CellLayout::sort(format, &format.encode(&scene(2000)).unwrap(), bounds, 64).unwrap();
            let before = layout.bounds.clone();
            let before_bytes = sorted.clone();
            // An instance edited in place: its cell does not change.
            let same = sorted[5 * stride..6 * stride].to_vec();
            assert_eq!(layout.grow(format, 5, &same, bounds).unwrap(), 0);
            assert_eq!(layout.bounds[0], before[0]);
            let edits = [
                (7, Vec3::new(400.0, -30.0, 2.0), 1.0),
                (70, Vec3::new(-1.0e4, 5.0, 3.0), 20.0),
                (71, Vec3::new(-1.0e4, 5.0, 3.0), 0.001),
                (700, Vec3::new(1.0e6, 1.0e6, -1.0e6), 1.0),
                (1500, Vec3::new(3.0, 3.0, 3.0), 1.0e-3),
            ];
            let mut applied = 0;
            for (k, position, scale) in edits {
                let moved = Instance {
                    position,
                    rotation: Quat::from_rotation_x(k as f32),
                    scale,
                };
                // (The packed format carries a narrower range of scales.)
                let Ok(bytes) = format.encode(&[moved]) else {
                    continue;
                };
                applied += 1;
                let cell = layout.grow(format, k, &bytes, bounds).unwrap();
                assert_eq!(cell, k / 64);
                sorted[k as usize * stride..(k as usize + 1) * stride].copy_from_slice(&bytes);
            }
            assert!(applied >= 2, "{format:?}: only {applied} edits");
            assert!(layout.bounds[7 / 64].sphere[3] > before[7 / 64].sphere[3]);
            for k in 0..2000 {
                let Some(s) = format.world_sphere(&sorted, k, bounds) else {
                    continue;
                };
                let cell = layout.bounds[k / 64];
                let wide = widen_radius(s.center, s.radius, s.terms) as f64;
                let reach = s
                    .center
                    .as_dvec3()
                    .distance(Vec3::from_slice(&cell.sphere[..3]).as_dvec3())
                    + wide;
                assert!(
                    reach <= cell.sphere[3] as f64 && s.radius <= cell.largest_radius,
                    "{format:?} instance {k} reaches past its grown cell"
                );
            }
            // Refitting tightens what growing left loose: instance 7 back
            // where it was, its cell refit is the sorted one again.
            sorted[7 * stride..8 * stride].copy_from_slice(&before_bytes[7 * stride..8 * stride]);
            let refit = CellLayout::bounds_of(format, &sorted[..64 * stride], bounds, 64).unwrap();
            assert_eq!(refit[0], before[0]);
            assert!(refit[0].sphere[3] < layout.bounds[0].sphere[3]);
            // An overflowed instance makes its cell infinite; a wrong
            // length or a cell past the layout is refused.
            let overflowed = Instance {
                scale: 3.0e38,
                ..Instance::default()
            };
            if let Ok(bytes) = format.encode(&[overflowed]) {
                let cell = layout.grow(format, 3, &bytes, bounds).unwrap();
                if format
                    .world_sphere(&bytes, 0, bounds)
                    .is_some_and(|s| !widen_radius(s.center, s.radius, s.terms).is_finite())
                {
                    assert_eq!(layout.bounds[cell as usize].sphere[3], f32::INFINITY);
                }
            }
            assert!(layout.grow(format, 3, &sorted[..stride - 1], bounds).is_err());
            assert!(layout.grow(format, 64 * 40, &sorted[..stride], bounds).is_err());
        }
    }

    /// Sorted cells are compact: along a Morton curve, a cell's sphere is
    /// much smaller than the batch's.
    #[test]
    fn sorted_cells_are_compact() {
        let format = InstanceFormat::PosQuat;
        let bytes = format.encode(&scene(20_000)).unwrap();
        let bounds = Sphere::new(Vec3::ZERO, 0.5);
        let (_, layout) = CellLayout::sort(format, &bytes, bounds, 256).unwrap();
        let unsorted = CellLayout::bounds_of(format, &bytes, bounds, 256).unwrap();
        let mean = |s: &[CellBounds]| s.iter().map(|c| c.sphere[3] as f64).sum::<f64>() / s.len() as f64;
        assert!(
            mean(&layout.bounds) * 3.0 < mean(&unsorted),
            "sorted {} unsorted {}",
            mean(&layout.bounds),
            mean(&unsorted)
        );
    }

    /// The CPU mirror keeps the cells in view, and the flat cull is picked
    /// when too little would be left unread.
    #[test]
    fn kept_cells_and_the_pick() {
        let format = InstanceFormat::PosQuat;
        let frustum = Frustum::from_clip_from_world(
            glam::Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1)
                * glam::Mat4::look_at_rh(Vec3::ZERO, Vec3::NEG_Z, Vec3::Y),
            None,
        )
        .unwrap();
        // 100 cells along -z (in view) and 900 along +z (behind).
        let cells: Vec<CellBounds> = (0..1000)
            .map(|c| {
                let z = if c < 100 {
                    -10.0 - c as f32
                } else {
                    10.0 + c as f32
                };
                CellBounds {
                    sphere: [0.0, 0.0, z, 1.0],
                    largest_radius: 0.1,
                    holds_culled: false,
                }
            })
            .collect();
        let layout = CellLayout {
            order: Vec::new(),
            bounds: cells,
            cell_len: 1024,
        };
        assert_eq!(layout.kept_cells(&[frustum], 1000 * 1024), 100);
        assert_eq!(layout.kept_cells(&[frustum], 50 * 1024), 50);
        // 900 cells of 1024 instances of 32 bytes unread: 28 MiB.
        assert!(!layout.pays_off(format, &[frustum], 1000 * 1024));
        let big = CellLayout {
            cell_len: 4096,
            ..layout.clone()
        };
        assert!(big.pays_off(format, &[frustum], 1000 * 4096));
        let mut infinite = layout.clone();
        infinite.bounds[500].sphere[3] = f32::INFINITY;
        assert_eq!(infinite.kept_cells(&[frustum], 1000 * 1024), 101);
        // The 100 in view lie inside it with room to spare: whole.
        assert_eq!(layout.whole_cells(&[frustum], 1000 * 1024), 100);
        let mut whole = layout.clone();
        // Within its radius of the side plane (kept, not whole), holding
        // an instance that is not finite, infinite: none of them whole.
        whole.bounds[3].sphere[0] = 13.0 * 0.5f32.tan() - 0.5;
        whole.bounds[4].holds_culled = true;
        whole.bounds[6].sphere[3] = f32::INFINITY;
        assert_eq!(whole.kept_cells(&[frustum], 1000 * 1024), 100);
        assert_eq!(whole.whole_cells(&[frustum], 1000 * 1024), 97);
        // A second view that sees none of them, or a view with a size band.
        let behind = Frustum::from_clip_from_world(
            glam::Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1)
                * glam::Mat4::look_at_rh(Vec3::ZERO, Vec3::Z, Vec3::Y),
            None,
        )
        .unwrap();
        assert_eq!(layout.whole_cells(&[frustum, behind], 1000 * 1024), 0);
        let metric = crate::SizeMetric {
            origin: Vec3::ZERO,
            scale: 1.0,
            perspective: true,
        };
        let levels = frustum.detail_levels(metric, &[1.0e-4]).unwrap();
        assert_eq!(layout.kept_cells(&levels, 1000 * 1024), 100);
        assert_eq!(layout.whole_cells(&levels, 1000 * 1024), 0);
        let mut empty = layout;
        empty.bounds[5].sphere[3] = f32::NEG_INFINITY;
        assert_eq!(empty.kept_cells(&[frustum], 1000 * 1024), 99);
    }

    /// Overflowed instances make their cell infinite (always kept); cells
    /// of non-finite instances are empty (never kept); bad lengths are
    /// refused.
    #[test]
    fn edge_cells() {
        let format = InstanceFormat::Matrix;
        let bounds = Sphere::new(Vec3::ZERO, 1.0);
        let mut instances = scene(8);
        instances[1].scale = 3.0e38;
        instances[5].position.x = f32::NAN;
        instances[6].position.x = f32::INFINITY;
        let bytes = format.encode(&instances).unwrap_or_else(|_| {
            // Formats may refuse some values: encode the others and patch.
            unreachable!()
        });
        let cells = CellLayout::bounds_of(format, &bytes, bounds, 4).unwrap();
        assert_eq!(cells[0].sphere[3], f32::INFINITY);
        let only_bad = CellLayout::bounds_of(format, &bytes[5 * 64..7 * 64], bounds, 4).unwrap();
        assert_eq!(only_bad[0].sphere[3], f32::NEG_INFINITY);
        assert!(CellLayout::bounds_of(format, &bytes[..10], bounds, 4).is_err());
        assert!(CellLayout::sort(format, &bytes, bounds, 0).is_err());
        assert_eq!(morton3(1, 0, 0), 1);
        assert_eq!(morton3(0, 1, 0), 2);
        assert_eq!(morton3(0, 0, 1), 4);
        assert_eq!(morton3(3, 0, 0), 0b1001);
    }
}
