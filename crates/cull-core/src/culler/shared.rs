//! What the culls of one [`super::Culler::cull_all`] share: the dispatches
//! recorded into one compute pass, and their uniforms, uploaded through one
//! staging buffer into one buffer of the culler's. A `queue.write_buffer`
//! makes a staging buffer of its own for every call, and every copy into a
//! target's own buffer is a command wgpu tracks, encodes and submits; with
//! many small culls a frame that cost more CPU than the rest of recording
//! them.

use crate::passes::SharedDispatch;
use std::ops::Range;
use std::sync::Mutex;

/// Smallest size of the culler's shared uniform buffer.
const MIN_SHARED_UNIFORM_BYTES: u64 = 16 * 1024;

/// The buffer the shared culls' uniform entries go to, used as a ring: each
/// `cull_all` takes the region after the previous call's, so that the culls
/// of consecutive calls (a frame's views) do not wait for each other on the
/// GPU, and wraps to the start where the rest is too short. A region read by
/// a pass still in flight is only overwritten after it (wgpu orders a copy
/// after the reads before it), so a short ring costs time, never a wrong
/// cull.
#[derive(Default)]
pub(super) struct SharedUniforms(Mutex<Ring>);

#[derive(Default)]
struct Ring {
    buffer: Option<wgpu::Buffer>,
    /// Where the next call's region starts.
    cursor: u64,
    /// The bytes the previous call asked for.
    last_call: u64,
}

impl SharedUniforms {
    /// The region a new call takes: the ring's buffer and the range it may
    /// fill (empty when there is no buffer yet).
    fn begin(&self) -> Option<(wgpu::Buffer, Range<u64>)> {
        let mut ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let buffer = ring.buffer.clone()?;
        if buffer.size() - ring.cursor < ring.last_call {
            ring.cursor = 0;
        }
        let range = ring.cursor..buffer.size();
        Some((buffer, range))
    }

    /// A call that took `used` bytes at `start` and asked for `wanted`
    /// ended: the next call starts after it, and the ring grows (a new
    /// buffer, for the next call) where it could not hold four such calls.
    fn end(&self, device: &wgpu::Device, start: u64, used: u64, wanted: u64) {
        let mut ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        ring.cursor = start + used;
        ring.last_call = wanted;
        let size = ring.buffer.as_ref().map_or(0, wgpu::Buffer::size);
        if wanted * 4 > size {
            ring.buffer = Some(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull_all uniforms"),
                size: (wanted * 4).next_power_of_two().max(MIN_SHARED_UNIFORM_BYTES),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
            ring.cursor = 0;
        }
    }
}

/// The shared culls gathered so far: their dispatches, and the bytes each
/// of their uniform buffers receives before the pass.
pub(super) struct SharedCulls<'a> {
    ring: &'a SharedUniforms,
    /// The call's region of the ring: its buffer and range.
    region: Option<(wgpu::Buffer, Range<u64>)>,
    /// Bytes taken from the region (its entries, from its start).
    taken: u64,
    /// Bytes the culls asked of the ring, whether or not it held them.
    wanted: u64,
    dispatches: Vec<SharedDispatch>,
    /// The entries taken from the ring, in its order.
    ring_bytes: Vec<u8>,
    /// Every other upload's bytes, one after another (each a multiple of
    /// [`wgpu::COPY_BUFFER_ALIGNMENT`], as `write_buffer` requires too).
    bytes: Vec<u8>,
    /// Where each upload besides the ring's goes: its buffer, and its range
    /// in `bytes`.
    uploads: Vec<(wgpu::Buffer, Range<u64>)>,
}

impl<'a> SharedCulls<'a> {
    /// A new call's shared culls, taking their uniforms from `ring`.
    pub fn new(ring: &'a SharedUniforms) -> Self {
        Self {
            ring,
            region: ring.begin(),
            taken: 0,
            wanted: 0,
            dispatches: Vec::new(),
            ring_bytes: Vec::new(),
            bytes: Vec::new(),
            uploads: Vec::new(),
        }
    }

    /// Room for `len` bytes of uniform entries in the ring: its buffer and
    /// the entries' offset there; `None` where the ring is full (the cull
    /// then takes its own buffer), counted so that the ring grows.
    pub fn reserve(&mut self, len: u64) -> Option<(wgpu::Buffer, u64)> {
        self.wanted += len;
        let (buffer, range) = self.region.as_ref()?;
        let at = range.start + self.taken;
        if at + len > range.end {
            return None;
        }
        self.taken += len;
        Some((buffer.clone(), at))
    }

    /// Gives back the last `len` bytes reserved: the cull did not share
    /// the pass after all.
    pub fn unreserve(&mut self, len: u64) {
        self.wanted -= len;
        self.taken -= len;
    }

    /// Adds one cull's dispatches; `entries` are the bytes of its reserved
    /// entries, in the order reserved.
    pub fn add_dispatches(&mut self, dispatches: Vec<SharedDispatch>, entries: &[u8]) {
        self.dispatches.extend(dispatches);
        self.ring_bytes.extend_from_slice(entries);
        debug_assert_eq!(self.ring_bytes.len() as u64, self.taken);
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

    /// Records the uploads (copies from one staging buffer: the ring's
    /// region in one, then one per other buffer) and then the pass of every
    /// dispatch, into `encoder`; nothing if no cull was shared.
    pub fn record(self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
        let start = self.region.as_ref().map_or(0, |(_, range)| range.start);
        self.ring.end(device, start, self.taken, self.wanted);
        // Without a dispatch (every shared cull was of no instances) no
        // pass reads the uniforms.
        if self.dispatches.is_empty() {
            return;
        }
        let ring_len = self.ring_bytes.len();
        if ring_len + self.bytes.len() > 0 {
            // Mappable at creation without a staging buffer of wgpu's own.
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull_all uniforms"),
                size: (ring_len + self.bytes.len()) as u64,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            let ring_len = ring_len as u64;
            for (at, bytes) in [(0, &self.ring_bytes), (ring_len, &self.bytes)] {
                if !bytes.is_empty() {
                    (staging.slice(at..at + bytes.len() as u64))
                        .get_mapped_range_mut()
                        .copy_from_slice(bytes);
                }
            }
            staging.unmap();
            if let Some((ring, _)) = self.region.as_ref().filter(|_| ring_len > 0) {
                encoder.copy_buffer_to_buffer(&staging, 0, ring, start, ring_len);
            }
            for (buffer, range) in &self.uploads {
                let at = ring_len + range.start;
                encoder.copy_buffer_to_buffer(&staging, at, buffer, 0, range.end - range.start);
            }
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("cull_all"),
            timestamp_writes: None,
        });
        for dispatch in &self.dispatches {
            dispatch.record(&mut pass);
        }
    }
}
