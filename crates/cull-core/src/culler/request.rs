//! What one cull asks for ([`CullRequest`]): the instances, where the
//! survivors go, the views, and how the instances vote (by cells or not,
//! in an occlusion phase or not). [`Culler::cull`] checks it, then records
//! it (`encode`).

use super::setup::Culler;
use crate::CullError;
use crate::buffers::{CullInput, CullTarget};
use crate::cells::{CellIndex, CellLayout, CellPick};
use crate::frustum::Frustum;
use crate::occlusion::{DepthPyramid, OcclusionCamera, OcclusionHistory};
use crate::sphere::Sphere;
use crate::visibility::VisibilityTest;

/// One cull: `count` instances of `input`, whose mesh's bounding sphere in
/// its local space is `local_bounds`, voted against every frustum of
/// `frusta`; view `v`'s survivors go densely to `target`'s view `v`
/// ([`CullTarget::view_output_offset`]) and their number to its draw
/// arguments ([`CullTarget::draw_args_offset`]). The target needs as many
/// views ([`CullTarget::with_views`]); its other views are left as they
/// were.
///
/// Built with [`CullRequest::new`], then optionally culled by cells
/// ([`Self::by_cells`], [`Self::by_cells_if_faster`]) or as a phase of
/// occlusion culling ([`Self::occlusion_early`], [`Self::occlusion_late`]).
/// Every form keeps exactly the instances its test keeps; the forms differ
/// in what they read.
///
/// ```no_run
/// # fn f(culler: &cull_core::Culler, encoder: &mut wgpu::CommandEncoder, queue: &wgpu::Queue,
/// #      input: &cull_core::CullInput, target: &cull_core::CullTarget,
/// #      camera: cull_core::Frustum, bounds: cull_core::Sphere) -> Result<(), cull_core::CullError> {
/// use cull_core::CullRequest;
/// culler.cull(encoder, queue, CullRequest::new(input, target, &[camera], bounds, 10_000))?;
/// # Ok(()) }
/// ```
pub struct CullRequest<'a> {
    pub(super) input: &'a CullInput,
    pub(super) target: &'a CullTarget,
    pub(super) frusta: &'a [Frustum],
    pub(super) local_bounds: Sphere,
    pub(super) count: u32,
    pub(super) cells: Cells<'a>,
    pub(super) phase: Phase<'a>,
}

/// Whether a cull reads the batch by cells.
#[derive(Clone, Copy)]
pub(super) enum Cells<'a> {
    Never,
    Always(&'a CellIndex),
    IfFaster(&'a CellLayout, &'a CellIndex),
    /// By cells, the kept cells listed on the CPU from the layout (what
    /// `IfFaster` becomes for the unordered variants' plain culls): no
    /// cell pass, and a dispatch of the listed tiles only.
    Listed(&'a CellLayout, &'a CellIndex),
}

/// Which phase of occlusion culling a cull is, if any.
pub(super) enum Phase<'a> {
    Plain,
    Early(&'a OcclusionHistory),
    Late {
        history: &'a mut OcclusionHistory,
        pyramid: &'a DepthPyramid,
        camera: &'a OcclusionCamera,
    },
}

/// What [`Culler::cull`] decided on its own.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CullOutcome {
    /// For [`CullRequest::by_cells_if_faster`]: whether it culled by cells,
    /// and how many cells the cell pass would keep (the CPU mirror's
    /// count).
    pub cell_pick: Option<CellPick>,
    /// For [`CullRequest::by_cells_if_faster`] culling by cells with the
    /// kept cells listed on the CPU (the unordered variants' plain culls):
    /// how many cells it listed, which is what it read. `None` for a cull
    /// with a cell pass, or flat.
    pub listed_cells: Option<u32>,
    /// For [`Culler::cull_all`]: whether its dispatches went into the pass
    /// it shares between culls (else it recorded passes of its own).
    pub shared_pass: bool,
}

impl<'a> CullRequest<'a> {
    /// A plain cull of `count` instances of `input` into `target` against
    /// `frusta` (one frustum per view of the target, from the first).
    /// Views that are one camera's levels of detail
    /// ([`crate::Frustum::detail_levels`]) vote with
    /// [`VisibilityTest::DetailLevels`]'s kernel where it is at hand, which
    /// tests the frustum once per instance.
    pub fn new(
        input: &'a CullInput,
        target: &'a CullTarget,
        frusta: &'a [Frustum],
        local_bounds: Sphere,
        count: u32,
    ) -> Self {
        Self {
            input,
            target,
            frusta,
            local_bounds,
            count,
            cells: Cells::Never,
            phase: Phase::Plain,
        }
    }

    /// Culls a batch sorted into cells ([`crate::CellLayout`], [`crate::CellIndex`]) by them: first
    /// the cell pass votes `cells`' spheres, then the cull reads only the
    /// kept cells' instances. The survivors are the plain cull's, as
    /// indices into the sorted batch: in no particular order, or with the
    /// order-preserving variants in the sorted batch's order. Every variant
    /// culls by cells, in every phase.
    pub fn by_cells(self, cells: &'a CellIndex) -> Self {
        Self {
            cells: Cells::Always(cells),
            ..self
        }
    }

    /// [`Self::by_cells`] where `layout` says it pays off for these views
    /// (enough instances left unread: [`CellIndex::listed_min_skipped_bytes`]
    /// or [`CellIndex::min_skipped_bytes`], see below), else the flat cull.
    /// [`CullOutcome::cell_pick`] says which, and how many cells the cell
    /// pass would keep. The survivors are the same either way. `layout`
    /// must be the one whose bounds `cells` holds.
    ///
    /// With the unordered variants (`SubgroupBallot`, `SubgroupShuffle`,
    /// `BlockAtomic`) a plain cull lists the kept cells on the CPU from
    /// `layout` and culls in one dispatch over
    /// them, with no cell pass ([`CullOutcome::listed_cells`]); the other
    /// variants and the occlusion phases run the cell pass.
    pub fn by_cells_if_faster(self, layout: &'a CellLayout, cells: &'a CellIndex) -> Self {
        Self {
            cells: Cells::IfFaster(layout, cells),
            ..self
        }
    }

    /// Occlusion culling's early phase ([`crate::OcclusionHistory`]): keeps only
    /// the instances that `history` says were visible after the last late
    /// phase. Draw its survivors, build the depth pyramid from their depth,
    /// then record the late phase into another target. The views must be
    /// one camera's: the same frustum, with levels of detail or not. By
    /// cells, only the kept cells' instances and history are read.
    pub fn occlusion_early(self, history: &'a OcclusionHistory) -> Self {
        Self {
            phase: Phase::Early(history),
            ..self
        }
    }

    /// Occlusion culling's late phase ([`crate::DepthPyramid`]): keeps the
    /// instances in the frustum that may be visible past `pyramid` (built
    /// from the depth the early phase's survivors drew, seen by `camera`)
    /// and that the early phase did not keep; records for the next frame
    /// which instances passed, and swaps `history`'s halves. The views must
    /// be the early phase's, the target another than its target. By cells,
    /// the cell pass also tests the cells against the pyramid, and the
    /// history of the cells it drops is cleared (they are outside the
    /// frustum or hidden). The survivors and the history are the same.
    pub fn occlusion_late(
        self,
        history: &'a mut OcclusionHistory,
        pyramid: &'a DepthPyramid,
        camera: &'a OcclusionCamera,
    ) -> Self {
        Self {
            phase: Phase::Late {
                history,
                pyramid,
                camera,
            },
            ..self
        }
    }

    /// The occlusion phase's test, if any.
    pub(super) fn phase_test(&self) -> Option<VisibilityTest> {
        match self.phase {
            Phase::Plain => None,
            Phase::Early(_) => Some(VisibilityTest::OcclusionEarly),
            Phase::Late { .. } => Some(VisibilityTest::OcclusionLate),
        }
    }

    /// The visibility history the phase reads and writes.
    pub(super) fn history(&self) -> Option<&OcclusionHistory> {
        match &self.phase {
            Phase::Plain => None,
            Phase::Early(history) => Some(history),
            Phase::Late { history, .. } => Some(history),
        }
    }

    /// The late phase's pyramid and camera.
    pub(super) fn late(&self) -> Option<(&DepthPyramid, &OcclusionCamera)> {
        match &self.phase {
            Phase::Late { pyramid, camera, .. } => Some((pyramid, camera)),
            _ => None,
        }
    }
}

impl Culler {
    /// Records `request` into `encoder`: survivors written densely to the
    /// target's views, their number to the instance counts of its draw
    /// arguments. Writes the cull's uniforms through `queue` (applied at
    /// the next submit), so each target should be culled once per
    /// submission. The unordered variants vote every view in one pass, and
    /// [`crate::ScanVariant::OrderedTwoPass`] in one vote pass: each
    /// instance is read and its world sphere computed once.
    /// [`crate::ScanVariant::Ordered`] and
    /// [`crate::ScanVariant::HillisSteele`] run their passes once per view.
    pub fn cull(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        request: CullRequest,
    ) -> Result<CullOutcome, CullError> {
        self.cull_into(encoder, queue, request, None)
    }

    /// Records several culls, each as [`Self::cull`] would, each request's
    /// target its own (a target named again gets
    /// [`CullError::InvalidParameter`]: a cull that records its own passes
    /// writes its uniforms through `queue`, which reach the GPU at the next
    /// submit, one cull's per target). The flat culls (not by cells) of
    /// the unordered single-pass variants
    /// ([`crate::ScanVariant::SubgroupBallot`],
    /// [`crate::ScanVariant::SubgroupShuffle`],
    /// [`crate::ScanVariant::BlockAtomic`]) into targets that record no
    /// timestamps go into one compute pass after every clear
    /// ([`CullOutcome::shared_pass`]): many small culls then cost the GPU
    /// one pass rather than one each, and the CPU one upload of their
    /// uniforms (copied in `encoder` before that pass) rather than a
    /// `queue.write_buffer` each. Culls by cells, timed targets and the
    /// other variants record their own passes, in the order given, before
    /// that pass: no request may read what another writes.
    pub fn cull_all<'r>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        requests: impl IntoIterator<Item = CullRequest<'r>>,
    ) -> Vec<Result<CullOutcome, CullError>> {
        let mut requests = requests.into_iter().peekable();
        let first = requests.peek().map(|request| request.target);
        let mut shared = super::shared::SharedCulls::new(&self.shared_uniforms, first);
        let mut targets: std::collections::HashSet<*const CullTarget> = Default::default();
        let outcomes = requests
            .map(|request| {
                let target: *const CullTarget = request.target;
                if !targets.insert(target) {
                    return Err(CullError::InvalidParameter(
                        "each request of one cull_all culls a target of its own",
                    ));
                }
                self.cull_into(encoder, queue, request, Some(&mut shared))
            })
            .collect();
        shared.record(&self.device, encoder);
        outcomes
    }

    /// [`Self::cull`], or with `shared` one cull of [`Self::cull_all`].
    fn cull_into(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        mut request: CullRequest,
        shared: Option<&mut super::shared::SharedCulls>,
    ) -> Result<CullOutcome, CullError> {
        let mut outcome = CullOutcome::default();
        if let Cells::IfFaster(layout, cells) = request.cells {
            if layout.cell_len != cells.cell_len {
                return Err(CullError::InvalidParameter(
                    "a cell layout's cells are as long as its cell index's (the culler's tile)",
                ));
            }
            // The unordered variants' plain culls read a list the CPU
            // makes (a superset of the cell pass's: the survivors are the
            // same) in one dispatch over the listed tiles alone.
            let listed = self.kernel.takes_listed_cells() && matches!(request.phase, Phase::Plain);
            let threshold = if listed {
                cells.listed_min_skipped_bytes
            } else {
                cells.min_skipped_bytes
            };
            let pick = layout.pick(self.format, request.frusta, request.count, threshold);
            request.cells = if pick.by_cells && listed {
                Cells::Listed(layout, cells)
            } else if pick.by_cells {
                Cells::Always(cells)
            } else {
                Cells::Never
            };
            outcome.cell_pick = Some(pick);
        }
        self.check(&request)?;
        (outcome.listed_cells, outcome.shared_pass) = self.encode(encoder, queue, &request, shared)?;
        if let Phase::Late { history, .. } = &mut request.phase {
            history.advance();
        }
        Ok(outcome)
    }

    /// Refuses a request this culler cannot record as asked.
    fn check(&self, request: &CullRequest) -> Result<(), CullError> {
        let CullRequest {
            input,
            target,
            frusta,
            count,
            ..
        } = *request;
        if let Some((_, camera)) = request.late() {
            camera.validate()?;
        }
        if target.culler_id() != self.id {
            return Err(CullError::ForeignTarget);
        }
        if let Cells::Always(cells) | Cells::Listed(_, cells) = request.cells {
            check_cells(self, cells, count)?;
        }
        let views = frusta.len();
        if views == 0 || views > target.views() as usize {
            return Err(CullError::ViewCount {
                views,
                max: target.views(),
            });
        }
        request.local_bounds.validate()?;
        for band in frusta.iter().filter_map(|f| f.size_band.as_ref()) {
            band.validate()?;
        }
        if input.format() != self.format {
            return Err(CullError::FormatMismatch {
                input: input.format(),
                culler: self.format,
            });
        }
        for capacity in [input.capacity(), target.capacity()] {
            check_count(count, capacity)?;
        }
        if let Some(history) = request.history() {
            self.check_occlusion(request, history)?;
        }
        Ok(())
    }

    /// Refuses an occlusion phase this device or these views cannot run.
    fn check_occlusion(&self, request: &CullRequest, history: &OcclusionHistory) -> Result<(), CullError> {
        // On wgpu's GL backend (llvmpipe), the late phase lost visible
        // instances in the views after the first; refused until found.
        let backend = self.device.adapter_info().backend;
        if backend == wgpu::Backend::Gl {
            return Err(CullError::UnsupportedBackend {
                backend,
                what: "occlusion culling",
            });
        }
        check_count(request.count, history.capacity())?;
        if request.frusta.iter().any(|f| f.cone.is_some()) {
            return Err(CullError::InvalidParameter(
                "an occlusion cull's views are a camera's: a view with a spot cone is culled without occlusion",
            ));
        }
        if !crate::visibility::views_share_camera(request.frusta) {
            return Err(CullError::InvalidParameter(
                "an occlusion cull's views are one camera's: the same frustum and size metric (its levels of detail)",
            ));
        }
        Ok(())
    }
}

/// Refuses a cell index of another culler, or one that covers too few
/// instances.
fn check_cells(culler: &Culler, cells: &CellIndex, count: u32) -> Result<(), CullError> {
    if cells.culler_id != culler.id {
        return Err(CullError::InvalidParameter(
            "a cell index is culled by the culler that made it",
        ));
    }
    check_count(count, cells.cells as u64 * cells.cell_len as u64)
}

fn check_count(count: u32, capacity: impl Into<u64>) -> Result<(), CullError> {
    let capacity = capacity.into();
    if count as u64 > capacity {
        return Err(CullError::CountExceedsCapacity {
            count: count as u64,
            capacity,
        });
    }
    Ok(())
}
