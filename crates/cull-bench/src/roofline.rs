//! The two reference kernels every cull is measured against, run in the
//! same process on the same device: a copy kernel over the same bytes (the
//! memory roofline) and an empty dispatch (the launch floor).

use cull_core::GpuContext;

const COPY: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
struct Params { len: u32, groups_x: u32 }
@group(0) @binding(2) var<uniform> params: Params;

// Four vec4 per thread, strided by the workgroup like the cull's loads.
@compute @workgroup_size(256)
fn copy(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let base = (wid.y * params.groups_x + wid.x) * 1024u + lid;
    for (var k = 0u; k < 4u; k += 1u) {
        let i = base + k * 256u;
        if i < params.len {
            dst[i] = src[i];
        }
    }
}

@compute @workgroup_size(256)
fn empty() {}
"#;

/// The device to measure on, or exit with the reason: GPU times come from
/// timestamp queries, so an adapter without them cannot be measured.
pub fn timed_context() -> GpuContext {
    let ctx = GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    if !ctx.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("the adapter has no timestamp queries: GPU times cannot be measured");
        std::process::exit(1);
    }
    ctx
}

/// What `cull-bench` flushes the L2 cache with by default: a copy of
/// 128 MiB (256 MiB touched), five times the 50 MB L2 of an H100 or H200.
pub const DEFAULT_L2_FLUSH_MIB: u64 = 128;

/// Two timestamp queries around one compute or render pass, and their
/// readback: the GPU time of that pass.
pub struct PassTimer {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl PassTimer {
    pub fn new(device: &wgpu::Device) -> Self {
        let buffer = |usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage,
                mapped_at_creation: false,
            })
        };
        Self {
            query_set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: None,
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            readback: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
        }
    }

    /// The timestamp writes of a timed compute pass.
    pub fn compute_writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.query_set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    /// The timestamp writes of a timed render pass.
    #[allow(dead_code)] // cull-tiny-draws times render passes; the bench, compute passes only
    pub fn render_writes(&self) -> wgpu::RenderPassTimestampWrites<'_> {
        wgpu::RenderPassTimestampWrites {
            query_set: &self.query_set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    /// Submits `encoder`, whose one timed pass wrote this timer's
    /// timestamps, waits for it, and returns that pass's GPU microseconds.
    pub fn submit_and_read(&self, ctx: &GpuContext, mut encoder: wgpu::CommandEncoder) -> f64 {
        encoder.resolve_query_set(&self.query_set, 0..2, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.readback, 0, 16);
        ctx.queue.submit([encoder.finish()]);
        let slice = self.readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        ctx.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let t: Vec<u64> = bytemuck::pod_collect_to_vec(&slice.get_mapped_range());
        self.readback.unmap();
        t[1].saturating_sub(t[0]) as f64 * ctx.queue.get_timestamp_period() as f64 / 1000.0
    }
}

/// Timestamped reference kernels.
pub struct Roofline {
    copy: wgpu::ComputePipeline,
    empty: wgpu::ComputePipeline,
    timer: PassTimer,
    /// The untimed copy between two timed kernels ([`Self::with_l2_flush`]),
    /// over buffers of its own.
    l2_flush: Option<(CopyJob, [wgpu::Buffer; 2])>,
}

impl Roofline {
    pub fn new(ctx: &GpuContext) -> Self {
        let device = &ctx.device;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("roofline"),
            source: wgpu::ShaderSource::Wgsl(COPY.into()),
        });
        let make = |entry| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        Self {
            copy: make("copy"),
            empty: make("empty"),
            timer: PassTimer::new(device),
            l2_flush: None,
        }
    }

    /// Makes [`Self::flush_l2`] copy `mib` MiB between two buffers of its
    /// own (0: no flush). Without it, a timed kernel finds in the L2 what
    /// the kernel before it left: the cull and the copy of one cell then
    /// start from different caches (the copy reads the start of the
    /// instances the cull just read), which favours the copy at sizes near
    /// the L2's. A frame's cull finds its instances evicted by the frame's
    /// other passes, so the bench starts every timed kernel cold.
    pub fn with_l2_flush(mut self, ctx: &GpuContext, mib: u64) -> Self {
        self.l2_flush = (mib > 0).then(|| {
            let bytes = (mib << 20).min(ctx.device.limits().max_buffer_size) / 16 * 16;
            let make = || {
                ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("l2 flush"),
                    size: bytes,
                    usage: wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                })
            };
            let buffers = [make(), make()];
            (self.copy_job(ctx, &buffers[0], &buffers[1], bytes), buffers)
        });
        self
    }

    /// Submits the untimed copy of [`Self::with_l2_flush`], if any: the
    /// next timed kernel finds none of its own bytes in the L2.
    pub fn flush_l2(&self, ctx: &GpuContext) {
        let Some((job, _)) = &self.l2_flush else {
            return;
        };
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        self.record_copy(&mut encoder.begin_compute_pass(&Default::default()), job);
        ctx.queue.submit([encoder.finish()]);
    }

    /// GPU microseconds of the compute pass `record` encodes (timestamp queries).
    pub fn timed(&self, ctx: &GpuContext, record: impl FnOnce(&mut wgpu::ComputePass)) -> f64 {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        record(&mut encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: Some(self.timer.compute_writes()),
        }));
        self.timer.submit_and_read(ctx, encoder)
    }

    /// Median microseconds of an empty dispatch of one workgroup.
    pub fn launch_us(&self, ctx: &GpuContext, runs: usize) -> f64 {
        median(
            (0..runs)
                .map(|_| {
                    self.timed(ctx, |pass| {
                        pass.set_pipeline(&self.empty);
                        pass.dispatch_workgroups(1, 1, 1);
                    })
                })
                .collect(),
        )
    }

    /// Prepares a copy of `bytes` from the start of `src` to the start of
    /// `dst` (`bytes` read and `bytes` written), timed by
    /// [`Self::time_copy`]. Measured in the cull's own buffers, so that the
    /// ceiling covers the very memory the cull moves. Where a buffer is
    /// smaller than `bytes`, the copy covers what fits and its time is scaled
    /// up to `bytes`.
    pub fn copy_job(&self, ctx: &GpuContext, src: &wgpu::Buffer, dst: &wgpu::Buffer, bytes: u64) -> CopyJob {
        let device = &ctx.device;
        let limits = device.limits();
        let wanted = bytes.max(16);
        let bytes = wanted.min(src.size()).min(dst.size()) / 16 * 16;
        // Copy in windows no larger than a binding, as the cull does.
        let window = (limits.max_storage_buffer_binding_size / 16384 * 16384).min(bytes);
        let layout = self.copy.get_bind_group_layout(0);
        let max_x = limits.max_compute_workgroups_per_dimension;
        let mut groups = Vec::new();
        let mut offset = 0;
        while offset < bytes {
            let size = window.min(bytes - offset);
            let len = (size / 16) as u32;
            let total = len.div_ceil(1024);
            let (x, y) = if total <= max_x {
                (total, 1)
            } else {
                (max_x, total.div_ceil(max_x))
            };
            let params = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 16,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            ctx.queue
                .write_buffer(&params, 0, bytemuck::cast_slice(&[len, x, 0, 0]));
            let bind = |buffer| {
                wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: wgpu::BufferSize::new(size),
                })
            };
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: bind(src),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: bind(dst),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: params.as_entire_binding(),
                    },
                ],
            });
            groups.push((group, x, y));
            offset += size;
        }
        CopyJob {
            groups,
            scale: wanted as f64 / bytes as f64,
        }
    }

    /// Keeps the GPU busy with `job` for `duration` of wall time. An NVIDIA
    /// H100 left without work for a second or two (while the CPU builds the
    /// next cell's scene) idles down, and the short submissions of a timed
    /// round do not bring it back: every kernel, the copy included, then
    /// runs at about 57% of its speed with 4.5x the memory latency
    /// (`cull-membw --cells cpu` shows it). Sustained work first restores it.
    pub fn warm_up(&self, ctx: &GpuContext, job: &CopyJob, duration: std::time::Duration) {
        let start = std::time::Instant::now();
        while start.elapsed() < duration {
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                for _ in 0..8 {
                    self.record_copy(&mut pass, job);
                }
            }
            ctx.queue.submit([encoder.finish()]);
            ctx.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        }
    }

    /// Microseconds of one run of a prepared copy (scaled to the bytes asked for).
    pub fn time_copy(&self, ctx: &GpuContext, job: &CopyJob) -> f64 {
        self.timed(ctx, |pass| self.record_copy(pass, job)) * job.scale
    }

    /// Records one run of a prepared copy into `pass`.
    fn record_copy(&self, pass: &mut wgpu::ComputePass, job: &CopyJob) {
        pass.set_pipeline(&self.copy);
        for (group, x, y) in &job.groups {
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(*x, *y, 1);
        }
    }
}

/// A copy kernel's bind groups and dispatches, prepared once and timed many times.
pub struct CopyJob {
    groups: Vec<(wgpu::BindGroup, u32, u32)>,
    scale: f64,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
