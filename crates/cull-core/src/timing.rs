//! GPU timestamps around each pass of a cull.

use crate::CullError;
use crate::readback::AsyncReadback;
use std::sync::Mutex;
use std::time::Duration;

// The resolve buffer is copied to the readback buffer (an AsyncReadback)
// only when no mapping of it is pending, so culling never waits on the CPU.

/// Which stage a compute pass belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassKind {
    /// Votes written to a buffer (Hillis-Steele).
    Vote,
    /// The global scan passes (Hillis-Steele).
    Scan,
    /// Compaction and draw arguments (Hillis-Steele).
    Compact,
    /// Vote, scan and compaction in one pass (the single-pass variants; the
    /// vote and gather dispatches of the two-pass ordered variant).
    Fused,
    /// The cell pass of a cull by cells ([`crate::CellLayout`]).
    Cells,
}

impl PassKind {
    /// The pass's debug label.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Vote => "cull-vote",
            Self::Scan => "cull-scan",
            Self::Compact => "cull-compact",
            Self::Fused => "cull-fused",
            Self::Cells => "cull-cells",
        }
    }
}

/// GPU time of one cull, from timestamp queries.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CullTimings {
    /// Vote passes (Hillis-Steele only).
    pub vote: Option<Duration>,
    /// Scan passes (Hillis-Steele only).
    pub scan: Option<Duration>,
    /// Compaction passes (Hillis-Steele only).
    pub compact: Option<Duration>,
    /// Single passes doing all three (the other variants).
    pub fused: Option<Duration>,
    /// The cell pass of a cull by cells ([`crate::CellLayout`]).
    pub cells: Option<Duration>,
    /// From the start of the first pass to the end of the last.
    pub total: Duration,
}

/// Timestamp query set and buffers of one target.
pub(crate) struct TimingQueries {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: AsyncReadback,
    max_passes: u32,
    /// Kinds of the passes whose timestamps are in the readback buffer.
    recorded: Mutex<Vec<PassKind>>,
}

impl TimingQueries {
    /// Bytes of the buffers it holds (the query set's memory is the driver's).
    pub fn buffer_bytes(&self) -> u64 {
        self.resolve.size() + self.readback.buffer_bytes()
    }

    pub fn new(device: &wgpu::Device, max_passes: u32) -> Self {
        let count = max_passes * 2;
        let size = count as u64 * 8;
        Self {
            query_set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("cull-timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull-timestamps-resolve"),
                size,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            readback: AsyncReadback::new(device, size, "cull-timestamps-readback"),
            max_passes,
            recorded: Mutex::new(Vec::new()),
        }
    }

    pub fn recorder(&self) -> Recorder<'_> {
        Recorder {
            queries: self,
            kinds: Vec::new(),
        }
    }

    /// Reads the timestamps of the last cull copied for reading (blocking).
    pub fn read(&self, device: &wgpu::Device, period_ns: f32) -> Result<CullTimings, CullError> {
        if self.recorded.lock().expect("timing lock poisoned").is_empty() {
            return Ok(CullTimings::default());
        }
        let (bytes, _) = self.readback.read_blocking(device)?;
        Ok(self.decode(&bytes, period_ns))
    }

    pub fn poll(&self, period_ns: f32) -> Option<CullTimings> {
        let (bytes, _) = self.readback.poll()?;
        Some(self.decode(&bytes, period_ns))
    }

    fn decode(&self, bytes: &[u8], period_ns: f32) -> CullTimings {
        let kinds = self.recorded.lock().expect("timing lock poisoned").clone();
        let stamps: Vec<u64> = bytemuck::pod_collect_to_vec(bytes);
        let ns = |ticks: u64| Duration::from_nanos((ticks as f64 * period_ns as f64) as u64);
        let mut t = CullTimings::default();
        for (i, kind) in kinds.iter().enumerate() {
            let d = ns(stamps[2 * i + 1].saturating_sub(stamps[2 * i]));
            let slot = match kind {
                PassKind::Vote => &mut t.vote,
                PassKind::Scan => &mut t.scan,
                PassKind::Compact => &mut t.compact,
                PassKind::Fused => &mut t.fused,
                PassKind::Cells => &mut t.cells,
            };
            *slot = Some(slot.unwrap_or_default() + d);
        }
        let first = stamps[0];
        let last = stamps[..kinds.len() * 2].iter().copied().max().unwrap_or(first);
        t.total = ns(last.saturating_sub(first));
        t
    }
}

/// Hands out query slots while one cull is encoded.
pub(crate) struct Recorder<'a> {
    queries: &'a TimingQueries,
    kinds: Vec<PassKind>,
}

impl<'a> Recorder<'a> {
    /// Timestamp writes for the next pass, or `None` once the slots run out.
    pub fn next(&mut self, kind: PassKind) -> Option<wgpu::ComputePassTimestampWrites<'a>> {
        let i = self.kinds.len() as u32;
        if i >= self.queries.max_passes {
            return None;
        }
        self.kinds.push(kind);
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.queries.query_set,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        })
    }

    /// Resolves the queries and, unless a mapping of the readback buffer is
    /// pending, copies them there for reading.
    pub fn finish(self, encoder: &mut wgpu::CommandEncoder) {
        let n = self.kinds.len() as u32;
        if n == 0 {
            return;
        }
        let q = self.queries;
        // While a mapping is pending this cull goes untimed rather than wait.
        if !q.readback.can_copy() {
            return;
        }
        encoder.resolve_query_set(&q.query_set, 0..2 * n, &q.resolve, 0);
        q.readback.copy(encoder, &q.resolve, 0, n as u64 * 16, 0);
        *q.recorded.lock().expect("timing lock poisoned") = self.kinds;
    }
}
