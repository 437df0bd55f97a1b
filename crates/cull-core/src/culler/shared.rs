//! What the culls of one [`super::Culler::cull_all`] share: the dispatches
//! recorded into one compute pass, and their uniforms, uploaded through one
//! staging buffer. A `queue.write_buffer` makes a staging buffer of its own
//! for every call; with many small culls a frame that cost more CPU than
//! the rest of recording them.

use crate::passes::SharedDispatch;

/// The shared culls gathered so far: their dispatches, and the bytes each
/// of their uniform buffers receives before the pass.
#[derive(Default)]
pub(super) struct SharedCulls {
    dispatches: Vec<SharedDispatch>,
    /// Every upload's bytes, one after another (each a multiple of
    /// [`wgpu::COPY_BUFFER_ALIGNMENT`], as `write_buffer` requires too).
    bytes: Vec<u8>,
    /// Where each upload goes: its buffer, and its range in `bytes`.
    uploads: Vec<(wgpu::Buffer, std::ops::Range<u64>)>,
}

impl SharedCulls {
    /// Adds one cull's dispatches.
    pub fn add_dispatches(&mut self, dispatches: Vec<SharedDispatch>) {
        self.dispatches.extend(dispatches);
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

    /// Records the uploads (copies from one staging buffer) and then the
    /// pass of every dispatch, into `encoder`; nothing if no cull was
    /// shared.
    pub fn record(self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) {
        // Without a dispatch (every shared cull was of no instances) no
        // pass reads the uniforms.
        if self.dispatches.is_empty() {
            return;
        }
        if !self.bytes.is_empty() {
            // Mappable at creation without a staging buffer of wgpu's own.
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull_all uniforms"),
                size: self.bytes.len() as u64,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            staging
                .slice(..)
                .get_mapped_range_mut()
                .copy_from_slice(&self.bytes);
            staging.unmap();
            for (buffer, range) in &self.uploads {
                encoder.copy_buffer_to_buffer(&staging, range.start, buffer, 0, range.end - range.start);
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
