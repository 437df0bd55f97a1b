//! Recording a checked [`CullRequest`]: the kernel it takes, its uniforms
//! (one entry per chunk, view slot and scan step), the clears of counters,
//! kept cells and history, then the variant's dispatches.

use super::request::{Cells, CullRequest};
use super::setup::Culler;
use super::shared::SharedCulls;
use super::spec::{Kernel, KernelSpec};
use crate::CullError;
use crate::cells::{CellIndex, CellLayout};
use crate::kernel::{Chunk, GpuParams, MAX_VIEWS, PARAMS_STRIDE};
use crate::passes::{EncodeContext, ListedCells};
use crate::visibility::TestInputs;
use crate::visibility::VisibilityTest;
use crate::visibility::occlusion::{LateInputs, OcclusionInputs};
use bytemuck::Zeroable;

/// How the uniforms of one cull are laid out: per chunk, `param_views`
/// slots (one per view for a kernel that dispatches per view), each with
/// `per_chunk` entries (its entry, then Hillis-Steele's scan steps).
#[derive(Clone, Copy)]
struct UniformLayout {
    views: u32,
    param_views: u32,
    per_chunk: u32,
}

impl Culler {
    /// Records `request`, checked by `check`; the cells it listed on the
    /// CPU, if it did. With `shared`, a cull whose kernel can
    /// ([`crate::variants::ScanKernel::shared_dispatches`]) and whose
    /// target records no timestamps leaves its dispatches and its uniforms
    /// there, for a pass shared with other culls, after recording its
    /// clears; whether it did is the second value. Any other cull writes
    /// its uniforms through `queue`.
    pub(super) fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        request: &CullRequest,
        shared: Option<&mut SharedCulls>,
    ) -> Result<(Option<u32>, bool), CullError> {
        let cells = match request.cells {
            Cells::Always(cells) | Cells::Listed(_, cells) => Some(cells),
            _ => None,
        };
        let (test, kernel) = self.kernel_of(request, cells.is_some())?;
        request.target.bind_groups().next_cull();
        let listed = match request.cells {
            Cells::Listed(layout, cells) => Some(self.list_cells(queue, request, layout, cells, test)),
            _ => None,
        };
        let chunks = self.chunks(request.count);
        let views = request.frusta.len() as u32;
        let layout = UniformLayout {
            views,
            param_views: if self.kernel.dispatches_per_view() {
                views
            } else {
                1
            },
            per_chunk: self.kernel.params_per_chunk(self.window_len),
        };
        let uniforms = self.uniform_bytes(request, cells, &chunks, layout);
        // The test's own uniforms, from what the request carries.
        let test_uniforms = test
            .kernel()
            .uniforms
            .map(|write| write(&Self::test_inputs(request)));
        let listed_cells = listed.as_ref().map(|l| l.tiles.iter().sum());
        // A list the CPU wrote needs no clearing.
        self.clear(encoder, request, cells.filter(|_| listed.is_none()), &chunks);
        let visibility_entries = visibility_entries(request);
        let mut recorder = request.target.timing_recorder();
        let mut shared = shared.filter(|_| recorder.is_none());
        // A shared cull takes its uniform entries from the call's buffer
        // where it has room, else from its target's.
        let reserved = (shared.as_mut()).and_then(|shared| shared.reserve(uniforms.len() as u64));
        let target = request.target;
        let mut cx = EncodeContext {
            cells,
            listed,
            visibility_entries: &visibility_entries,
            device: &self.device,
            encoder,
            input: request.input,
            target,
            params: reserved
                .as_ref()
                .map_or((target.params_buffer(), 0), |(buffer, at)| (buffer, *at)),
            chunks: &chunks,
            dispatch: self.dispatch,
            views,
            params_per_chunk: layout.per_chunk,
            param_views: layout.param_views,
            recorder: &mut recorder,
        };
        let test_uniforms = test_uniforms.as_deref().unwrap_or_default();
        if let Some(shared) = shared {
            if let Some(dispatches) = self.kernel.shared_dispatches(&cx, &kernel) {
                let taken: &[u8] = if reserved.is_some() { &uniforms } else { &[] };
                shared.add_dispatches(dispatches, taken);
                if reserved.is_none() {
                    shared.upload(target.params_buffer(), &uniforms);
                }
                shared.upload(target.test_uniforms(), test_uniforms);
                return Ok((listed_cells, true));
            }
            // Its kernel records passes of its own.
            shared.unreserve(uniforms.len() as u64, reserved.is_some());
            cx.params = (target.params_buffer(), 0);
        }
        let uploads = [
            (target.params_buffer(), uniforms.as_slice()),
            (target.test_uniforms(), test_uniforms),
        ];
        for (buffer, bytes) in uploads.iter().filter(|(_, bytes)| !bytes.is_empty()) {
            queue.write_buffer(buffer, 0, bytes);
        }
        self.kernel.encode(cx, &kernel);
        if let Some(recorder) = recorder {
            recorder.finish(encoder);
        }
        Ok((listed_cells, false))
    }

    /// The kernel `request` takes: its test (an occlusion phase's, or for
    /// one camera's levels of detail the test that measures the frustum and
    /// the size once, where that kernel is at hand, else the frustum test,
    /// which keeps the same instances) in the fastest form at hand, or the
    /// general kernel, which `kernel_for` compiles or reports as not ready.
    fn kernel_of(
        &self,
        request: &CullRequest,
        by_cells: bool,
    ) -> Result<(VisibilityTest, Kernel), CullError> {
        // A mesh centred on its origin, in a format whose vote rotates the
        // center: it may take the kernel that leaves the rotation out.
        let centred_mesh = request.local_bounds.center == glam::Vec3::ZERO && self.format.has_centred_form();
        let spec = |test| KernelSpec {
            cells: by_cells,
            ..KernelSpec::flat(request.target.windows(), request.target.views(), test)
        };
        let test = request.phase_test().unwrap_or_else(|| {
            let levels = spec(VisibilityTest::for_views(request.frusta));
            // Any of its forms (a renderer may have provided only the
            // centred or the plain one; the choice between the forms
            // follows).
            match self.ready_form(levels, centred_mesh, request.frusta) {
                Some(_) => levels.test,
                None => VisibilityTest::Frustum,
            }
        });
        let key = spec(test);
        let key = self.ready_form(key, centred_mesh, request.frusta).unwrap_or(key);
        Ok((test, self.kernel_for(key)?))
    }

    /// Lists the kept cells of `request`'s chunks on the CPU
    /// ([`CellLayout::listed_tiles`]) into its target's list buffer, at
    /// each chunk's region, as the cell pass would write them (whole cells
    /// marked under the frustum test, the only one that takes them). The
    /// counts go to `cells`' own regions too, for [`CellIndex::read_kept`].
    fn list_cells(
        &self,
        queue: &wgpu::Queue,
        request: &CullRequest,
        layout: &CellLayout,
        cells: &CellIndex,
        test: VisibilityTest,
    ) -> ListedCells {
        let whole = test == VisibilityTest::Frustum;
        let lists = layout.listed_tiles(request.frusta, request.count, cells.cells_per_chunk, whole);
        let buffer = request
            .target
            .cell_list_buffer(&self.device, lists.len() as u64 * cells.region_bytes);
        let mut tiles = Vec::with_capacity(lists.len());
        for (chunk, list) in lists.iter().enumerate() {
            let at = chunk as u64 * cells.region_bytes;
            let mut words = Vec::with_capacity(list.len() + 1);
            words.push(list.len() as u32);
            words.extend_from_slice(list);
            queue.write_buffer(&buffer, at, bytemuck::cast_slice(&words));
            queue.write_buffer(&cells.kept, at, bytemuck::bytes_of(&words[0]));
            tiles.push(list.len() as u32);
        }
        ListedCells { buffer, tiles }
    }

    /// The chunks of a cull of `count` instances: one per `window_len`.
    fn chunks(&self, count: u32) -> Vec<Chunk> {
        (0..count.div_ceil(self.window_len))
            .map(|index| {
                let start = index * self.window_len;
                Chunk {
                    index,
                    start,
                    len: (count - start).min(self.window_len),
                }
            })
            .collect()
    }

    /// What every uniform entry of `request` shares: the views' planes and
    /// size bands, the mesh's sphere, the cells (the visibility test's own
    /// parameters go to its own uniforms, `test_inputs`).
    fn shared_params(&self, request: &CullRequest, cells: Option<&CellIndex>, views: u32) -> GpuParams {
        let mut base = GpuParams::zeroed();
        // Unused planes keep everything; the shader skips an unused sixth.
        base.planes = [[[0.0, 0.0, 0.0, 1.0]; 6]; MAX_VIEWS as usize];
        for (view, frustum) in base.planes.iter_mut().zip(request.frusta) {
            for (dst, p) in view.iter_mut().zip(frustum.planes()) {
                *dst = crate::frustum::widen_plane(*p).to_array();
            }
        }
        // A view without a band keeps every size (zeros: no band).
        for (dst, frustum) in base.size_bands.iter_mut().zip(request.frusta) {
            if let Some(band) = frustum.size_band {
                *dst = band.gpu();
            }
        }
        let bounds = request.local_bounds;
        base.local_sphere = bounds.center.extend(bounds.radius).to_array();
        base.local_terms = crate::formats::local_terms(bounds.center);
        base.window_len = self.window_len;
        if let Some(cells) = cells {
            base.cell_count = request.count.div_ceil(cells.cell_len);
            base.cells_per_chunk = cells.cells_per_chunk;
            base.cell_region_words = (cells.region_bytes / 4) as u32;
            base.cell_views = views;
        }
        let target = request.target;
        base.view_stride = target.view_stride();
        // The scratch's tiles per view, as the target sized them (with_views).
        let (x, y) = self
            .dispatch
            .dims(self.dispatch.groups_for(target.capacity().min(self.window_len)));
        base.tile_capacity = crate::kernel::ordered_tile_capacity(x as u64 * y as u64);
        base
    }

    /// What the test's own uniforms are written from: the views, and an
    /// occlusion phase's history halves, camera and pyramid.
    fn test_inputs<'a>(request: &CullRequest<'a>) -> TestInputs<'a> {
        let occlusion = request.history().map(|history| OcclusionInputs {
            history: history.halves(),
            late: request.late().map(|(pyramid, camera)| LateInputs {
                clip: camera.clip_from_relative.to_cols_array_2d(),
                origin: camera.origin.extend(camera.origin_slack()).to_array(),
                jitter: camera.jitter,
                pyramid_size: [pyramid.width(), pyramid.height()],
                pyramid_levels: pyramid.levels(),
                reverse_z: pyramid.order() == crate::occlusion::DepthOrder::ReverseZ,
            }),
        });
        TestInputs {
            frusta: request.frusta,
            occlusion,
        }
    }

    /// Every uniform entry of `request`, as its target's params buffer
    /// takes them.
    fn uniform_bytes(
        &self,
        request: &CullRequest,
        cells: Option<&CellIndex>,
        chunks: &[Chunk],
        layout: UniformLayout,
    ) -> Vec<u8> {
        let base = self.shared_params(request, cells, layout.views);
        let UniformLayout {
            views,
            param_views,
            per_chunk,
        } = layout;
        let entries = chunks.len() as u32 * param_views * per_chunk;
        let mut uniforms = vec![0u8; entries as usize * PARAMS_STRIDE as usize];
        for chunk in chunks {
            let groups = self.dispatch.groups_for(chunk.len);
            for slot in 0..param_views {
                for step in 0..per_chunk {
                    let entry = GpuParams {
                        chunk_start: chunk.start,
                        chunk_len: chunk.len,
                        groups_x: self.dispatch.dims(groups).0,
                        scan_offset: if step == 0 { 0 } else { 1 << (step - 1) },
                        first_view: if param_views > 1 { slot } else { 0 },
                        view_count: if param_views > 1 { 1 } else { views },
                        ..base
                    };
                    let index = (chunk.index * param_views + slot) * per_chunk + step;
                    let at = (index as u64 * PARAMS_STRIDE) as usize;
                    uniforms[at..at + size_of::<GpuParams>()].copy_from_slice(bytemuck::bytes_of(&entry));
                }
            }
        }
        uniforms
    }

    /// Clears what the cull counts into: the draws' instance counts, the
    /// kept cells of each chunk, and the history half the late phase
    /// writes.
    fn clear(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        request: &CullRequest,
        cells: Option<&CellIndex>,
        chunks: &[Chunk],
    ) {
        // The atomic counters are the draws' instance counts: zero them.
        let target = request.target;
        for view in 0..request.frusta.len() as u32 {
            let at = target.draw_args_offset(view) + crate::kernel::INSTANCE_COUNT_OFFSET;
            encoder.clear_buffer(target.draw_args(), at, Some(4));
        }
        if let Some(cells) = cells {
            // Nothing kept yet in any chunk: the count, and the ordered
            // variant's flags (a list needs only its count cleared, but the
            // region is small: a word per cell).
            for chunk in chunks {
                let at = chunk.index as u64 * cells.region_bytes;
                encoder.clear_buffer(&cells.kept, at, Some(cells.region_bytes));
            }
        }
        // The late phase sets the history bits of the instances that pass
        // (by cells, of the kept cells' instances: the others are outside
        // the frustum or hidden) in the half it writes, cleared here.
        if let (Some(history), Some(_)) = (request.history(), request.late()) {
            let (_, write) = history.halves();
            let words = crate::occlusion::history_words(request.count) as u64;
            encoder.clear_buffer(history.buffer(), write as u64 * 4, Some(words * 4));
        }
    }
}

/// The visibility tests' bindings: their own uniforms (bound to the passes
/// of the tests that declare them), the occlusion phase's history, and the
/// late phase's pyramid.
fn visibility_entries<'a>(request: &'a CullRequest) -> Vec<wgpu::BindGroupEntry<'a>> {
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: crate::kernel::bindings::TEST_UNIFORMS,
        resource: request.target.test_uniforms().as_entire_binding(),
    }];
    if let Some(history) = request.history() {
        entries.push(wgpu::BindGroupEntry {
            binding: crate::kernel::bindings::VISIBILITY_HISTORY,
            resource: history.buffer().as_entire_binding(),
        });
    }
    if let Some((pyramid, _)) = request.late() {
        entries.push(wgpu::BindGroupEntry {
            binding: crate::kernel::bindings::DEPTH_PYRAMID,
            resource: wgpu::BindingResource::TextureView(pyramid.view()),
        });
    }
    entries
}
