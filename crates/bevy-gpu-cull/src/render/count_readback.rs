//! The visible counts' way to the CPU: every view target's counts (and an
//! occlusion-culled view's late counts) are copied into one staging buffer
//! and read back with one mapping a frame, rather than one per (view,
//! batch): with many batches and shadow views, the mappings cost the render
//! thread more than the copies.

use bevy::prelude::*;
use cull_core::AsyncReadback;
use std::sync::{Mutex, MutexGuard};

/// Where one view target's counts lie in the bytes read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CountRegion {
    /// The view target's key in `ViewTargets::map`: (view, batch).
    pub key: (Entity, Entity),
    /// The late phase's counts of an occlusion-culled view.
    pub late: bool,
    /// A combined batch's counts per member rather than the view's count.
    pub members: bool,
    /// Its bytes' range.
    pub at: u64,
    pub len: u64,
}

/// The counts read back in one mapping: their bytes, the render frame they
/// were copied in, and where each target's lie.
pub(crate) struct ReadCounts {
    pub bytes: Vec<u8>,
    pub frame: u64,
    pub regions: Vec<CountRegion>,
}

impl ReadCounts {
    /// The bytes of `region` (none where they fall outside).
    pub fn of(&self, region: &CountRegion) -> Option<&[u8]> {
        self.bytes
            .get(region.at as usize..(region.at + region.len) as usize)
    }
}

/// The smallest staging buffer made.
const MIN_BYTES: u64 = 256;

/// The staging buffer all counts go through, and what was copied into it
/// since its last mapping.
#[derive(Resource, Default)]
pub(crate) struct CountReadback(Mutex<CountStaging>);

#[derive(Default)]
struct CountStaging {
    readback: Option<AsyncReadback>,
    /// The copies recorded since the last mapping, all in render frame
    /// `frame`.
    regions: Vec<CountRegion>,
    frame: u64,
}

impl CountReadback {
    fn lock(&self) -> MutexGuard<'_, CountStaging> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the staging buffer hold at least `bytes` (every target's
    /// counts), unless a mapping is pending: the copies that do not fit
    /// are then skipped until it is done. It shrinks where it holds more
    /// than four times that, and goes where nothing is culled, so that
    /// [`crate::GpuCullStats::gpu_buffer_bytes`] returns to its level when
    /// the batches and views that grew it are gone.
    pub fn reserve(&self, device: &wgpu::Device, bytes: u64) {
        let mut staging = self.lock();
        if !staging.readback.as_ref().is_none_or(AsyncReadback::can_copy) {
            return;
        }
        let size = staging.readback.as_ref().map_or(0, AsyncReadback::buffer_bytes);
        // Room to grow, so that a few new batches make no new buffer.
        let wanted = bytes.next_power_of_two().max(MIN_BYTES);
        if bytes == 0 {
            staging.readback = None;
        } else if size < bytes || (size > 4 * bytes && size > MIN_BYTES) {
            staging.readback = Some(AsyncReadback::new(device, wanted, "gpu_cull_count_readback"));
        } else {
            return;
        }
        staging.regions.clear();
    }

    /// Records a copy of `len` bytes at `offset` of `source` for the view
    /// target `key` (its late counts where `late`, a combined batch's
    /// counts per member where `members`), in render frame `frame`. Skipped (false) while a mapping is pending or where it does
    /// not fit.
    pub fn copy(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        (key, late, members): ((Entity, Entity), bool, bool),
        (source, offset, len): (&wgpu::Buffer, u64, u64),
        frame: u64,
    ) -> bool {
        let mut staging = self.lock();
        let staging = &mut *staging;
        let Some(readback) = staging.readback.as_ref().filter(|r| r.can_copy()) else {
            return false;
        };
        // Copies of an earlier frame that were never mapped are dropped.
        if staging.frame != frame {
            staging.regions.clear();
            staging.frame = frame;
        }
        let at = staging.regions.last().map_or(0, |r| {
            (r.at + r.len).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
        });
        if !readback.copy_at(encoder, (source, offset, len), at, frame) {
            return false;
        }
        staging.regions.push(CountRegion {
            key,
            late,
            members,
            at,
            len,
        });
        true
    }

    /// The non-blocking step, once a frame after submitting
    /// ([`AsyncReadback::poll`]): starts mapping this frame's copies, or
    /// returns those of a mapping that is done.
    pub fn poll(&self) -> Option<ReadCounts> {
        let mut staging = self.lock();
        let (bytes, frame) = staging.readback.as_ref()?.poll()?;
        let regions = std::mem::take(&mut staging.regions);
        Some(ReadCounts {
            bytes,
            frame,
            regions,
        })
    }

    /// Bytes of GPU memory it holds.
    pub fn buffer_bytes(&self) -> u64 {
        self.lock()
            .readback
            .as_ref()
            .map_or(0, AsyncReadback::buffer_bytes)
    }
}
