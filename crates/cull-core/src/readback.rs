//! Reading GPU results on the CPU: blocking ([`read_back`], for tools and
//! tests) and without stalling a frame ([`AsyncReadback`], for renderers:
//! the timestamps of [`crate::CullTarget`] and the Bevy plugin's visible
//! counts both go through it). The lowest layer: it depends on nothing else
//! in the crate but the error type.

use crate::CullError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Nothing copied, or the last result taken: a copy may be recorded.
const IDLE: u8 = 0;
/// A copy was recorded (it may be recorded again, until mapping starts).
const COPIED: u8 = 1;
/// Mapping requested; waiting for the device.
const MAPPING: u8 = 2;
/// Mapped: the bytes can be taken.
const READY: u8 = 3;

/// A staging buffer and its state: record a copy into it with
/// [`Self::copy`], then call [`Self::poll`] once per frame after submitting:
/// the first call starts mapping, a later one (once the device has been
/// polled, as renderers do every frame) returns the bytes and the tag given
/// with the copy. Never blocks; copies offered while a mapping is pending are
/// skipped rather than waited for.
#[derive(Debug)]
pub struct AsyncReadback {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    len: AtomicU64,
    tag: AtomicU64,
}

impl AsyncReadback {
    /// A staging buffer of `size` bytes.
    pub fn new(device: &wgpu::Device, size: u64, label: &str) -> Self {
        Self {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            state: Arc::new(AtomicU8::new(IDLE)),
            len: AtomicU64::new(0),
            tag: AtomicU64::new(0),
        }
    }

    /// Bytes of GPU memory it holds.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer.size()
    }

    /// Whether [`Self::copy`] would record now (no mapping pending).
    pub fn can_copy(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire), IDLE | COPIED)
    }

    /// Records a copy of `len` bytes at `offset` of `source` (which needs
    /// `COPY_SRC`) to the staging buffer's start, unless a mapping is
    /// pending; `tag` (e.g. a frame number) comes back with the bytes.
    /// Returns whether it recorded ([`Self::copy_at`] at 0, which says what
    /// it refuses).
    pub fn copy(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        source: &wgpu::Buffer,
        offset: u64,
        len: u64,
        tag: u64,
    ) -> bool {
        self.copy_at(encoder, (source, offset, len), 0, tag)
    }

    /// Records a copy as [`Self::copy`] does, into the staging buffer at
    /// byte `at`, beside the other copies recorded since the last mapping:
    /// one mapping then reads back many buffers' bytes (the bytes returned
    /// run from 0 to the end of the farthest copy). A copy that is empty,
    /// does not fit the staging buffer ([`Self::buffer_bytes`]) or whose
    /// `offset`, `len` or `at` is not a multiple of
    /// [`wgpu::COPY_BUFFER_ALIGNMENT`] is not recorded (false). Calls must
    /// not overlap one another or [`Self::poll`] (hold a lock around them).
    pub fn copy_at(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        (source, offset, len): (&wgpu::Buffer, u64, u64),
        at: u64,
        tag: u64,
    ) -> bool {
        let end = at.saturating_add(len);
        let aligned = [offset, len, at]
            .iter()
            .all(|v| v % wgpu::COPY_BUFFER_ALIGNMENT == 0);
        if !self.can_copy() || len == 0 || !aligned || end > self.buffer.size() {
            return false;
        }
        encoder.copy_buffer_to_buffer(source, offset, &self.buffer, at, len);
        let before = match self.state.load(Ordering::Acquire) {
            COPIED => self.len.load(Ordering::Acquire),
            _ => 0,
        };
        self.len.store(end.max(before), Ordering::Release);
        self.tag.store(tag, Ordering::Release);
        self.state.store(COPIED, Ordering::Release);
        true
    }

    /// The non-blocking step: starts mapping a recorded copy, or returns the
    /// bytes and tag of a mapped one (and is idle again).
    pub fn poll(&self) -> Option<(Vec<u8>, u64)> {
        match self.state.load(Ordering::Acquire) {
            COPIED => {
                self.state.store(MAPPING, Ordering::Release);
                let state = self.state.clone();
                let len = self.len.load(Ordering::Acquire);
                self.buffer.slice(..len).map_async(wgpu::MapMode::Read, move |r| {
                    state.store(if r.is_ok() { READY } else { IDLE }, Ordering::Release);
                });
                None
            }
            READY => Some(self.take()),
            _ => None,
        }
    }

    /// Waits for the recorded copy (submitted already) and returns it.
    pub fn read_blocking(&self, device: &wgpu::Device) -> Result<(Vec<u8>, u64), CullError> {
        match self.state.load(Ordering::Acquire) {
            COPIED => {
                let len = self.len.load(Ordering::Acquire);
                let bytes = map_blocking(device, &self.buffer, len)?;
                self.state.store(IDLE, Ordering::Release);
                Ok((bytes, self.tag.load(Ordering::Acquire)))
            }
            READY => Ok(self.take()),
            MAPPING => Err(CullError::Readback(
                "an asynchronous readback is in progress".into(),
            )),
            _ => Err(CullError::Readback("nothing was copied to read back".into())),
        }
    }

    fn take(&self) -> (Vec<u8>, u64) {
        let len = self.len.load(Ordering::Acquire);
        let bytes = self.buffer.slice(..len).get_mapped_range().to_vec();
        self.buffer.unmap();
        self.state.store(IDLE, Ordering::Release);
        (bytes, self.tag.load(Ordering::Acquire))
    }
}

/// Copies `size` bytes at `offset` of `buffer` (which needs `COPY_SRC`) to
/// the CPU, blocking until the GPU is done.
pub fn read_back(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>, CullError> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("cull-readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    map_blocking(device, &staging, size)
}

/// Maps the first `size` bytes of a `MAP_READ` buffer, copies them out and unmaps.
pub(crate) fn map_blocking(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    size: u64,
) -> Result<Vec<u8>, CullError> {
    let slice = buffer.slice(..size);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| CullError::Readback(e.to_string()))?;
    rx.recv()
        .map_err(|e| CullError::Readback(e.to_string()))?
        .map_err(|e| CullError::Readback(e.to_string()))?;
    let data = slice.get_mapped_range().to_vec();
    buffer.unmap();
    Ok(data)
}
