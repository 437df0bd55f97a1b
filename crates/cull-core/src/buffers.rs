//! GPU buffers: the instances to cull ([`CullInput`]) and, per view, where
//! the survivors and draw arguments go ([`CullTarget`]).

pub use crate::kernel::INSTANCE_COUNT_OFFSET;
use crate::kernel::{DRAW_ARGS_WORDS, PARAMS_STRIDE, ScratchBuffer, TEST_UNIFORM_BYTES};
pub use crate::readback::read_back;
use crate::timing::{Recorder, TimingQueries};
use crate::{CullError, CullTimings, Instance, InstanceFormat};

/// Instances in a GPU buffer, in one [`InstanceFormat`].
///
/// ```no_run
/// use cull_core::prelude::*;
/// # fn f(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<(), CullError> {
/// let input = CullInput::new(device, InstanceFormat::PosQuat, 1_000)?;
/// let trees: Vec<Instance> = (0..1_000)
///     .map(|i| Instance::from_position(glam::Vec3::new(i as f32, 0.0, -20.0)))
///     .collect();
/// input.write_instances(queue, 0, &trees)?;
/// // Later, only what moved: instance 7 onwards.
/// input.write_instances(queue, 7, &[Instance::from_position(glam::Vec3::ZERO)])?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CullInput {
    buffer: wgpu::Buffer,
    format: InstanceFormat,
    capacity: u32,
}

impl CullInput {
    /// Allocates room for `capacity` instances.
    pub fn new(device: &wgpu::Device, format: InstanceFormat, capacity: u32) -> Result<Self, CullError> {
        let size = checked_size(device, capacity, format.stride())?;
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cull-input"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::VERTEX,
            mapped_at_creation: false,
        });
        Ok(Self {
            buffer,
            format,
            capacity,
        })
    }

    /// Wraps an existing buffer: it must have `STORAGE` usage and hold a whole
    /// number of instances.
    pub fn from_buffer(buffer: wgpu::Buffer, format: InstanceFormat) -> Result<Self, CullError> {
        if !buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
            return Err(CullError::BufferUsage(wgpu::BufferUsages::STORAGE));
        }
        let stride = format.stride();
        if !buffer.size().is_multiple_of(stride) {
            return Err(CullError::BufferSize {
                size: buffer.size(),
                stride,
            });
        }
        let capacity = buffer.size() / stride;
        if capacity == 0 {
            return Err(CullError::ZeroCapacity);
        }
        let capacity = u32::try_from(capacity)
            .map_err(|_| CullError::InvalidParameter("more than u32::MAX instances in one buffer"))?;
        Ok(Self {
            buffer,
            format,
            capacity,
        })
    }

    /// Writes encoded instances (`format().stride()` bytes each) starting at
    /// instance `first`, through the queue.
    pub fn write(&self, queue: &wgpu::Queue, first: u32, bytes: &[u8]) -> Result<(), CullError> {
        let stride = self.format.stride();
        let len = bytes.len() as u64;
        let end = first as u64 * stride + len;
        if !len.is_multiple_of(stride) || end > self.capacity as u64 * stride {
            return Err(CullError::WriteOutOfRange {
                offset: first as u64,
                len,
                stride,
                capacity: self.capacity as u64,
            });
        }
        if len > 0 {
            queue.write_buffer(&self.buffer, first as u64 * stride, bytes);
        }
        Ok(())
    }

    /// Encodes and writes instances starting at instance `first`.
    pub fn write_instances(
        &self,
        queue: &wgpu::Queue,
        first: u32,
        instances: &[Instance],
    ) -> Result<(), CullError> {
        self.write(queue, first, &self.format.encode(instances)?)
    }

    /// Bytes of GPU buffer memory it holds, for accounting.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer.size()
    }

    /// The buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// The instance format.
    pub fn format(&self) -> InstanceFormat {
        self.format
    }

    /// Instances the buffer holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
}

pub(crate) fn checked_size(device: &wgpu::Device, capacity: u32, stride: u64) -> Result<u64, CullError> {
    if capacity == 0 {
        return Err(CullError::ZeroCapacity);
    }
    let size = capacity as u64 * stride;
    let max = device.limits().max_buffer_size;
    if size > max {
        return Err(CullError::CountExceedsCapacity {
            count: capacity as u64,
            capacity: max / stride,
        });
    }
    Ok(size)
}

/// Where a cull writes: per view, the compacted survivors and the indirect
/// draw arguments (whose `instance_count` the GPU fills); uniforms, scratch
/// and timestamp queries. Make one per view (camera) and batch with
/// [`CullTarget::new`], or one per group of views culled together (a
/// light's cascades or cube faces) with [`CullTarget::with_views`], from
/// the culler that culls into it.
///
/// ```no_run
/// # use cull_core::{Culler, CullError, CullTarget};
/// # fn f(device: &wgpu::Device, queue: &wgpu::Queue, culler: &Culler) -> Result<(), CullError> {
/// // One camera's survivors of a batch of up to 100,000 instances, each drawn
/// // as a 36-index cube; the cull writes the instance count.
/// let target = CullTarget::new(device, culler, 100_000)?;
/// target.set_indexed_draw(
///     queue,
///     wgpu::util::DrawIndexedIndirectArgs { index_count: 36, ..Default::default() },
/// );
/// # Ok(()) }
/// ```
pub struct CullTarget {
    culler_id: u64,
    format: crate::InstanceFormat,
    output_kind: crate::OutputKind,
    capacity: u32,
    views: u32,
    /// Output elements from one view's survivors to the next view's.
    view_stride: u32,
    output_stride: u64,
    window_len: u32,
    windows: u32,
    output: wgpu::Buffer,
    draw_args: wgpu::Buffer,
    params: wgpu::Buffer,
    /// The visibility test's own uniforms (a spot cone per view).
    test_uniforms: wgpu::Buffer,
    scratch: Vec<wgpu::Buffer>,
    timing: Option<TimingQueries>,
    timestamp_period: f32,
    /// Where the CPU lists the kept cells of a cull by cells into this
    /// target ([`crate::CullRequest::by_cells_if_faster`]), made at the
    /// first: the target's own, since a target is culled once per
    /// submission and a batch may be culled into several in one.
    cell_lists: std::sync::Mutex<Option<wgpu::Buffer>>,
    /// The bind groups of its latest culls, kept for the next.
    bind_groups: crate::bind_cache::BindGroupCache,
    /// Which of the culler's shared uniform buffers a `cull_all` that
    /// starts with this target takes ([`crate::Culler::cull_all`]):
    /// the same each time, so that its culls' bind groups are kept.
    pub(crate) shared_slot: std::sync::OnceLock<usize>,
}

/// Bytes of `DrawIndexedIndirectArgs` (five `u32`); `DrawIndirectArgs` uses
/// the first four. A target's views' arguments follow each other at this
/// stride.
pub const DRAW_ARGS_SIZE: u64 = DRAW_ARGS_WORDS as u64 * 4;

/// What a culler asks of a target's buffers.
pub(crate) struct TargetSpec {
    pub culler_id: u64,
    /// The instances' format and what the cull writes of each survivor.
    pub format: crate::InstanceFormat,
    pub output: crate::OutputKind,
    pub capacity: u32,
    /// Views culled into it, each with its survivors and draw arguments.
    pub views: u32,
    pub output_stride: u64,
    /// Elements per output window (and instances per chunk).
    pub window_len: u32,
    pub windows: u32,
    /// Uniform entries, each `PARAMS_STRIDE` bytes.
    pub params_entries: u64,
    pub scratch: Vec<ScratchBuffer>,
    /// Timestamped passes per cull; `None` records no timestamps.
    pub timed_passes: Option<u32>,
    pub timestamp_period: f32,
}

impl CullTarget {
    /// Allocates the buffers `spec` asks for.
    pub(crate) fn allocate(device: &wgpu::Device, spec: TargetSpec) -> Result<Self, CullError> {
        let view_stride = view_stride(spec.capacity, spec.views, spec.output_stride);
        let elements = u32::try_from(spec.views as u64 * view_stride as u64)
            .map_err(|_| CullError::InvalidParameter("views * capacity must fit in u32"))?;
        let size = checked_size(device, elements, spec.output_stride)?;
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::VERTEX;
        let output = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cull-output"),
            size,
            usage,
            mapped_at_creation: false,
        });
        let draw_args = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cull-draw-args"),
            size: DRAW_ARGS_SIZE * spec.views as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::INDIRECT
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cull-params"),
            size: spec.params_entries * PARAMS_STRIDE,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let test_uniforms = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cull-test-uniforms"),
            size: TEST_UNIFORM_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let scratch = spec
            .scratch
            .iter()
            .map(|s| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(s.label),
                    size: s.size,
                    usage: s.usage,
                    mapped_at_creation: false,
                })
            })
            .collect();
        let timing = spec.timed_passes.map(|passes| TimingQueries::new(device, passes));
        Ok(Self {
            culler_id: spec.culler_id,
            format: spec.format,
            output_kind: spec.output,
            capacity: spec.capacity,
            views: spec.views,
            view_stride,
            output_stride: spec.output_stride,
            window_len: spec.window_len,
            windows: spec.windows,
            output,
            draw_args,
            params,
            test_uniforms,
            scratch,
            timing,
            timestamp_period: spec.timestamp_period,
            cell_lists: Default::default(),
            bind_groups: Default::default(),
            shared_slot: Default::default(),
        })
    }

    /// The bind groups of its culls ([`crate::bind_cache`]).
    pub(crate) fn bind_groups(&self) -> &crate::bind_cache::BindGroupCache {
        &self.bind_groups
    }

    /// The buffer of the CPU's lists of kept cells, of at least `bytes`
    /// (made, or made larger, here).
    pub(crate) fn cell_list_buffer(&self, device: &wgpu::Device, bytes: u64) -> wgpu::Buffer {
        let mut lists = self.cell_lists.lock().unwrap_or_else(|e| e.into_inner());
        match lists.as_ref() {
            Some(buffer) if buffer.size() >= bytes => buffer.clone(),
            _ => {
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("cull-listed-cells"),
                    size: bytes.max(4),
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                *lists = Some(buffer.clone());
                buffer
            }
        }
    }

    /// Bytes of GPU buffer memory it holds (survivors, draw arguments,
    /// uniforms, scratch, look-back state, timestamp readback), for
    /// accounting: a renderer can check that what it frees returns.
    pub fn buffer_bytes(&self) -> u64 {
        let scratch: u64 = self.scratch.iter().map(wgpu::Buffer::size).sum();
        self.output.size()
            + self.draw_args.size()
            + self.params.size()
            + self.test_uniforms.size()
            + scratch
            + self.timing.as_ref().map_or(0, TimingQueries::buffer_bytes)
            + self
                .cell_lists
                .lock()
                .map_or(0, |l| l.as_ref().map_or(0, wgpu::Buffer::size))
    }

    /// Sets every view's indexed draw arguments, wgpu's own
    /// ([`wgpu::util::DrawIndexedIndirectArgs`]), but `instance_count`, which
    /// every cull writes (the value given is ignored).
    ///
    /// ```
    /// # fn f(target: &cull_core::CullTarget, queue: &wgpu::Queue) {
    /// target.set_indexed_draw(
    ///     queue,
    ///     wgpu::util::DrawIndexedIndirectArgs { index_count: 36, ..Default::default() },
    /// );
    /// # }
    /// ```
    pub fn set_indexed_draw(&self, queue: &wgpu::Queue, args: wgpu::util::DrawIndexedIndirectArgs) {
        self.write_draw_args(queue, indexed_words(args));
    }

    /// Sets every view's non-indexed draw arguments (the first 16 bytes of
    /// each; [`wgpu::util::DrawIndirectArgs`]) but `instance_count`.
    pub fn set_draw(&self, queue: &wgpu::Queue, args: wgpu::util::DrawIndirectArgs) {
        self.write_draw_args(queue, non_indexed_words(args));
    }

    /// [`Self::set_indexed_draw`] for `view` alone: each level of detail of
    /// a view draws its own mesh. Views past the target's are ignored.
    pub fn set_view_indexed_draw(
        &self,
        queue: &wgpu::Queue,
        view: u32,
        args: wgpu::util::DrawIndexedIndirectArgs,
    ) {
        if view < self.views {
            self.write_view_draw_args(queue, view, indexed_words(args));
        }
    }

    /// [`Self::set_draw`] for `view` alone. Views past the target's are
    /// ignored.
    pub fn set_view_draw(&self, queue: &wgpu::Queue, view: u32, args: wgpu::util::DrawIndirectArgs) {
        if view < self.views {
            self.write_view_draw_args(queue, view, non_indexed_words(args));
        }
    }

    /// Writes every view's arguments but its `instance_count` (word 1).
    fn write_draw_args(&self, queue: &wgpu::Queue, args: [u32; DRAW_ARGS_WORDS as usize]) {
        for view in 0..self.views {
            self.write_view_draw_args(queue, view, args);
        }
    }

    /// Writes `view`'s arguments but its `instance_count` (word 1).
    fn write_view_draw_args(&self, queue: &wgpu::Queue, view: u32, args: [u32; DRAW_ARGS_WORDS as usize]) {
        let at = view as u64 * DRAW_ARGS_SIZE;
        queue.write_buffer(&self.draw_args, at, bytemuck::bytes_of(&args[0]));
        queue.write_buffer(&self.draw_args, at + 8, bytemuck::cast_slice(&args[2..]));
    }

    /// The survivors: each view's densely from [`Self::view_output_offset`],
    /// as instance copies or `u32` indices.
    pub fn output_buffer(&self) -> &wgpu::Buffer {
        &self.output
    }

    /// Per view, at [`Self::draw_args_offset`], `DrawIndexedIndirectArgs`
    /// (or `DrawIndirectArgs` in its first 16 bytes): `instance_count`, at
    /// byte [`INSTANCE_COUNT_OFFSET`] of each, is the view's visible count.
    pub fn draw_args(&self) -> &wgpu::Buffer {
        &self.draw_args
    }

    /// Binds `view`'s survivors as vertex buffer `slot`, for a pipeline
    /// whose instance layout is [`InstanceFormat::vertex_layout`]: the
    /// instance copies of a cull with [`crate::OutputKind::Instances`] (a
    /// cull with index output is read by the vertex shader from
    /// [`Self::output_buffer`] instead).
    pub fn bind_view_instances(&self, pass: &mut wgpu::RenderPass<'_>, slot: u32, view: u32) {
        let start = self.view_output_offset(view);
        let len = self.capacity as u64 * self.output_stride;
        pass.set_vertex_buffer(slot, self.output.slice(start..start + len));
    }

    /// Records `view`'s indexed draw of its survivors: indirect, with the
    /// arguments [`Self::set_indexed_draw`] set and the cull's visible
    /// count. The pipeline, index buffer, bind groups and (for instance
    /// output) [`Self::bind_view_instances`] are the caller's.
    ///
    /// ```no_run
    /// # fn f(target: &cull_core::CullTarget, pass: &mut wgpu::RenderPass<'_>) {
    /// target.bind_view_instances(pass, 1, 0);
    /// target.draw_view_indexed(pass, 0);
    /// # }
    /// ```
    pub fn draw_view_indexed(&self, pass: &mut wgpu::RenderPass<'_>, view: u32) {
        pass.draw_indexed_indirect(&self.draw_args, self.draw_args_offset(view));
    }

    /// [`Self::draw_view_indexed`] without an index buffer
    /// ([`Self::set_draw`]'s arguments).
    pub fn draw_view(&self, pass: &mut wgpu::RenderPass<'_>, view: u32) {
        pass.draw_indirect(&self.draw_args, self.draw_args_offset(view));
    }

    /// Instances the target holds per view.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Views culled into it ([`crate::CullRequest`]); 1 for a target
    /// made by [`CullTarget::new`].
    pub fn views(&self) -> u32 {
        self.views
    }

    /// Byte offset of `view`'s survivors in [`Self::output_buffer`]: a
    /// multiple of 256, so a renderer can bind each view's list at its
    /// offset (storage bindings need 256 on every device).
    pub fn view_output_offset(&self, view: u32) -> u64 {
        view as u64 * self.view_stride as u64 * self.output_stride
    }

    /// Byte offset of `view`'s draw arguments in [`Self::draw_args`], for
    /// an indirect draw.
    pub fn draw_args_offset(&self, view: u32) -> u64 {
        view as u64 * DRAW_ARGS_SIZE
    }

    /// Output elements from one view's survivors to the next's.
    pub(crate) fn view_stride(&self) -> u32 {
        self.view_stride
    }

    /// Bytes per output element.
    pub fn output_stride(&self) -> u64 {
        self.output_stride
    }

    pub(crate) fn culler_id(&self) -> u64 {
        self.culler_id
    }

    /// The format of the instances culled into it.
    pub(crate) fn format(&self) -> crate::InstanceFormat {
        self.format
    }

    /// Whether its lists are of survivor indices (`OutputKind::Indices`).
    pub(crate) fn holds_indices(&self) -> bool {
        self.output_kind == crate::OutputKind::Indices
    }

    /// Output windows (bindings) the target's output spans: with
    /// [`Self::views`], which kernel culls into it ([`crate::Culler::recipe`]).
    pub fn windows(&self) -> u32 {
        self.windows
    }

    pub(crate) fn params_buffer(&self) -> &wgpu::Buffer {
        &self.params
    }

    /// The visibility test's own uniforms ([`crate::kernel::bindings::TEST_UNIFORMS`]).
    pub(crate) fn test_uniforms(&self) -> &wgpu::Buffer {
        &self.test_uniforms
    }

    /// The variant's scratch buffers, in the order it declared them.
    pub(crate) fn scratch(&self) -> &[wgpu::Buffer] {
        &self.scratch
    }

    /// `(window, byte offset, byte size)` of each output binding: windows
    /// of `window_len` elements over every view's list.
    pub(crate) fn output_windows(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        let elements = self.output.size() / self.output_stride;
        (0..self.windows).map(move |w| {
            let first = w as u64 * self.window_len as u64;
            let len = (elements - first).min(self.window_len as u64);
            (w, first * self.output_stride, len * self.output_stride)
        })
    }

    pub(crate) fn timing_recorder(&self) -> Option<Recorder<'_>> {
        self.timing.as_ref().map(TimingQueries::recorder)
    }

    /// Copies the visible count (the draw's `instance_count`) of view 0
    /// back to the CPU, waiting for the GPU. For tests and tools, not for
    /// the frame loop.
    pub fn read_visible_count(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<u32, CullError> {
        self.read_view_count(device, queue, 0)
    }

    /// [`Self::read_visible_count`] of `view`.
    pub fn read_view_count(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        view: u32,
    ) -> Result<u32, CullError> {
        self.check_view(view)?;
        let at = self.draw_args_offset(view) + INSTANCE_COUNT_OFFSET;
        let bytes = read_back(device, queue, &self.draw_args, at, 4)?;
        Ok(bytemuck::pod_read_unaligned(&bytes))
    }

    /// Copies the first `count` output elements of view 0 back to the
    /// CPU, waiting.
    pub fn read_output(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        count: u32,
    ) -> Result<Vec<u8>, CullError> {
        self.read_view_output(device, queue, 0, count)
    }

    /// [`Self::read_output`] of `view`.
    pub fn read_view_output(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        view: u32,
        count: u32,
    ) -> Result<Vec<u8>, CullError> {
        self.check_view(view)?;
        if count > self.capacity {
            return Err(CullError::CountExceedsCapacity {
                count: count as u64,
                capacity: self.capacity as u64,
            });
        }
        let at = self.view_output_offset(view);
        read_back(device, queue, &self.output, at, count as u64 * self.output_stride)
    }

    fn check_view(&self, view: u32) -> Result<(), CullError> {
        if view >= self.views {
            return Err(CullError::ViewCount {
                views: view as usize + 1,
                max: self.views,
            });
        }
        Ok(())
    }

    /// The GPU time of the last cull recorded into this target, waiting for
    /// it. Errors when the target records no timestamps.
    pub fn read_timings(&self, device: &wgpu::Device) -> Result<CullTimings, CullError> {
        let timing = self.timing.as_ref().ok_or(CullError::TimingsUnavailable)?;
        timing.read(device, self.timestamp_period)
    }

    /// The non-blocking form of [`Self::read_timings`], for frame loops: the
    /// first call after a cull starts mapping its timestamps, a later call
    /// (after the device has been polled, as renderers do every frame)
    /// returns them. Culls recorded while a mapping is pending are not timed.
    /// `None` also when the target records no timestamps.
    pub fn poll_timings(&self) -> Option<CullTimings> {
        self.timing.as_ref()?.poll(self.timestamp_period)
    }
}

/// Output elements from one view's survivors to the next's: the capacity,
/// rounded up (with several views) so that each view's list starts at a
/// multiple of 256 bytes.
pub(crate) fn view_stride(capacity: u32, views: u32, output_stride: u64) -> u32 {
    if views <= 1 {
        return capacity;
    }
    let align = (256 / gcd(256, output_stride)) as u32;
    capacity.div_ceil(align).saturating_mul(align)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The words of indexed draw arguments, the instance count left at 0 (the
/// cull writes it).
fn indexed_words(args: wgpu::util::DrawIndexedIndirectArgs) -> [u32; 5] {
    [
        args.index_count,
        0,
        args.first_index,
        args.base_vertex as u32,
        args.first_instance,
    ]
}

/// The words of non-indexed draw arguments, padded to the indexed size.
fn non_indexed_words(args: wgpu::util::DrawIndirectArgs) -> [u32; 5] {
    [args.vertex_count, 0, args.first_vertex, args.first_instance, 0]
}
