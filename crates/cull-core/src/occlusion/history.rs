//! Which instances were visible after the last late phase.

use crate::CullError;

/// Which instances were visible after the last late phase, for one camera
/// and batch: two halves of a bit per instance (32 consecutive instances to
/// a `u32` word), swapped by each late phase (it reads one and writes the
/// other, so a variant that votes in several dispatches reads the last
/// frame's answer in every one). The culler clears the half a late phase
/// writes before it, and the late phase sets the bits of the instances that
/// pass. Starts empty: the first early phase keeps nothing, and the first
/// late phase draws all that passes the pyramid.
pub struct OcclusionHistory {
    buffer: wgpu::Buffer,
    capacity: u32,
    current: u32,
}

impl OcclusionHistory {
    /// Allocates the history of up to `capacity` instances: two bits each
    /// (rounded up to words), bound whole, so at most the device's largest
    /// storage binding (`CullError::BatchTooLarge` beyond, which no `u32`
    /// count reaches at WebGPU's default 128 MiB).
    pub fn new(device: &wgpu::Device, capacity: u32) -> Result<Self, CullError> {
        let size = crate::buffers::checked_size(device, history_words(capacity) * 2, 4)?;
        // The passes bind it whole.
        let limit = device.limits().max_storage_buffer_binding_size;
        if size > limit {
            return Err(CullError::BatchTooLarge {
                capacity: capacity as u64,
                windows: 1,
                window_len: limit.saturating_mul(4).min(u32::MAX as u64),
                max: 1,
            });
        }
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("occlusion history"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Ok(Self {
            buffer,
            capacity,
            current: 0,
        })
    }

    /// Instances it can hold.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Its buffer (both halves).
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Forgets every instance (the next early phase keeps none).
    pub fn clear(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.clear_buffer(&self.buffer, 0, None);
    }

    /// Where the half the next early and late phases read starts, and where
    /// the half the next late phase writes starts (words).
    pub(crate) fn halves(&self) -> (u32, u32) {
        let words = history_words(self.capacity);
        let read = self.current * words;
        (read, words - read)
    }

    /// Swaps the halves: the late phase just recorded wrote the other one.
    pub(crate) fn advance(&mut self) {
        self.current = 1 - self.current;
    }

    /// Whether each of the first `count` instances was visible after the
    /// last late phase recorded (0 or 1 each), waiting for the GPU. For
    /// tests and tools.
    pub fn read_back(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        count: u32,
    ) -> Result<Vec<u32>, CullError> {
        if count > self.capacity {
            return Err(CullError::CountExceedsCapacity {
                count: count as u64,
                capacity: self.capacity as u64,
            });
        }
        let (read, _) = self.halves();
        let words = count.div_ceil(32) as u64;
        let bytes = crate::readback::read_back(device, queue, &self.buffer, read as u64 * 4, words * 4)?;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok((0..count as usize)
            .map(|i| (words[i / 32] >> (i % 32)) & 1)
            .collect())
    }
}

/// Words of one half of a history of `capacity` instances: a bit each.
pub(crate) fn history_words(capacity: u32) -> u32 {
    capacity.max(1).div_ceil(32)
}
