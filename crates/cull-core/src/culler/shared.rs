//! What the culls of one [`super::Culler::cull_all`] share: the dispatches
//! recorded into one compute pass, and their uniforms, uploaded through one
//! staging buffer into one buffer of the culler's, in one copy. A `queue.write_buffer`
//! makes a staging buffer of its own for every call, and every copy into a
//! target's own buffer is a command wgpu tracks, encodes and submits; with
//! many small culls a frame that cost more CPU than the rest of recording
//! them.

use crate::CullTarget;
use crate::kernel::PARAMS_STRIDE;
use crate::passes::SharedDispatch;
use std::ops::Range;
use std::sync::Mutex;

/// Smallest size of a shared uniform buffer.
const MIN_SHARED_UNIFORM_BYTES: u64 = 16 * 1024;

/// Shared uniform buffers a culler keeps. wgpu orders a copy into a buffer
/// after every earlier pass that read it, so calls that took one buffer
/// would run one after another on the GPU; consecutive calls (a frame's
/// view groups, say) take different ones, up to this many.
const SHARED_UNIFORM_SLOTS: usize = 4;

/// The buffers the shared culls' uniform entries go to, one per call,
/// each call's entries from the start of its buffer. A call takes the slot
/// its first target took before (a new one, in turn, for a target not seen
/// yet), so the culls of a frame's call find the bind groups of the same
/// call a frame earlier, whose buffer they bind again.
#[derive(Default)]
pub(super) struct SharedUniforms(Mutex<Slots>);

#[derive(Default)]
struct Slots {
    buffers: [Option<wgpu::Buffer>; SHARED_UNIFORM_SLOTS],
    /// The slot the next target not seen yet takes.
    next: usize,
}

impl SharedUniforms {
    /// The slot a call that starts with `first` takes, and its buffer
    /// (none yet before a call has asked for one).
    fn begin(&self, first: Option<&CullTarget>) -> (usize, Option<wgpu::Buffer>) {
        let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut take_next = || {
            let slot = slots.next;
            slots.next = (slot + 1) % SHARED_UNIFORM_SLOTS;
            slot
        };
        let slot = match first {
            Some(target) => *target.shared_slot.get_or_init(take_next),
            None => take_next(),
        };
        (slot, slots.buffers[slot].clone())
    }

    /// A call that took `slot` and whose culls asked for `wanted` bytes
    /// ended: where its buffer was too short (its culls past the end took
    /// their targets' buffers), a larger one, for the next call that takes
    /// it, within the device's limit.
    fn end(&self, device: &wgpu::Device, slot: usize, wanted: u64) {
        let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let size = slots.buffers[slot].as_ref().map_or(0, wgpu::Buffer::size);
        // Every call ends here: the limits are asked for only to grow.
        if wanted <= size {
            return;
        }
        let largest = device.limits().max_buffer_size / PARAMS_STRIDE * PARAMS_STRIDE;
        let new_size = wanted
            .next_power_of_two()
            .max(MIN_SHARED_UNIFORM_BYTES)
            .min(largest);
        if new_size > size {
            slots.buffers[slot] = Some(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull_all uniforms"),
                size: new_size,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
    }
}

/// The shared culls gathered so far: their dispatches, and the bytes each
/// of their uniform buffers receives before the pass.
pub(super) struct SharedCulls<'a> {
    uniforms: &'a SharedUniforms,
    /// The call's slot and its buffer.
    slot: usize,
    buffer: Option<wgpu::Buffer>,
    /// Bytes taken from the buffer (its entries, from its start).
    taken: u64,
    /// Bytes the shared culls asked for, whether or not the buffer held
    /// them.
    wanted: u64,
    dispatches: Vec<SharedDispatch>,
    /// The entries taken from the buffer, in its order.
    taken_bytes: Vec<u8>,
    /// Every other upload's bytes, one after another (each a multiple of
    /// [`wgpu::COPY_BUFFER_ALIGNMENT`], as `write_buffer` requires too).
    bytes: Vec<u8>,
    /// Where each upload besides the call's buffer goes: its buffer, and its range
    /// in `bytes`.
    uploads: Vec<(wgpu::Buffer, Range<u64>)>,
}

impl<'a> SharedCulls<'a> {
    /// A new call's shared culls, the first into `first`, taking their
    /// uniforms from one of `uniforms`' buffers.
    pub fn new(uniforms: &'a SharedUniforms, first: Option<&CullTarget>) -> Self {
        let (slot, buffer) = uniforms.begin(first);
        Self {
            uniforms,
            slot,
            buffer,
            taken: 0,
            wanted: 0,
            dispatches: Vec::new(),
            taken_bytes: Vec::new(),
            bytes: Vec::new(),
            uploads: Vec::new(),
        }
    }

    /// Room for `len` bytes of uniform entries in the call's buffer: the
    /// buffer and the entries' offset there; `None` where it is full (the
    /// cull then takes its own buffer). Either way the bytes count toward
    /// the buffer's next size.
    pub fn reserve(&mut self, len: u64) -> Option<(wgpu::Buffer, u64)> {
        self.wanted += len;
        let buffer = self.buffer.as_ref()?;
        let at = self.taken;
        if at + len > buffer.size() {
            return None;
        }
        self.taken += len;
        Some((buffer.clone(), at))
    }

    /// Takes back the last [`Self::reserve`] of `len` bytes (`reserved`:
    /// whether it found room): the cull did not share the pass after all.
    pub fn unreserve(&mut self, len: u64, reserved: bool) {
        self.wanted -= len;
        if reserved {
            self.taken -= len;
        }
    }

    /// Adds one cull's dispatches; `entries` are the bytes of its reserved
    /// entries, in the order reserved.
    pub fn add_dispatches(&mut self, dispatches: Vec<SharedDispatch>, entries: &[u8]) {
        self.dispatches.extend(dispatches);
        self.taken_bytes.extend_from_slice(entries);
        debug_assert_eq!(self.taken_bytes.len() as u64, self.taken);
    }

    /// Adds `bytes` for the start of `buffer` (which needs `COPY_DST`).
    pub fn upload(&mut self, buffer: &wgpu::Buffer, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        debug_assert_eq!(bytes.len() as u64 % wgpu::COPY_BUFFER_ALIGNMENT, 0);
        let start = self.bytes.len() as u64;
        self.bytes.extend_from_slice(bytes);
        self.uploads
            .push((buffer.clone(), start..self.bytes.len() as u64));
    }

    /// Records the uploads (copies from one staging buffer: the entries
    /// taken from the call's buffer in one, then one per other buffer) and
    /// then the pass of every dispatch, into `encoder`; nothing if no cull
    /// was shared.
    pub fn record(self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
        self.uniforms.end(device, self.slot, self.wanted);
        // Without a dispatch (every shared cull was of no instances) no
        // pass reads the uniforms.
        if self.dispatches.is_empty() {
            return;
        }
        let taken_len = self.taken_bytes.len() as u64;
        let total = taken_len + self.bytes.len() as u64;
        if total > 0 {
            // Mappable at creation without a staging buffer of wgpu's own.
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull_all uniforms"),
                size: total,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            for (at, bytes) in [(0, &self.taken_bytes), (taken_len, &self.bytes)] {
                if !bytes.is_empty() {
                    (staging.slice(at..at + bytes.len() as u64))
                        .get_mapped_range_mut()
                        .copy_from_slice(bytes);
                }
            }
            staging.unmap();
            if let Some(buffer) = self.buffer.as_ref().filter(|_| taken_len > 0) {
                encoder.copy_buffer_to_buffer(&staging, 0, buffer, 0, taken_len);
            }
            for (buffer, range) in &self.uploads {
                let at = taken_len + range.start;
                encoder.copy_buffer_to_buffer(&staging, at, buffer, 0, range.end - range.start);
            }
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("cull_all"),
            timestamp_writes: None,
        });
        // wgpu sets a pipeline again however often it is the same one (and
        // its dispatches share it: every cull of a kernel does).
        let mut bound: Option<&wgpu::ComputePipeline> = None;
        for dispatch in &self.dispatches {
            if bound != Some(&dispatch.pipeline) {
                pass.set_pipeline(&dispatch.pipeline);
                bound = Some(&dispatch.pipeline);
            }
            dispatch.record(&mut pass);
        }
    }
}
