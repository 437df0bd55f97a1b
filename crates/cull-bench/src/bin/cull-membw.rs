//! cull-membw: whether the GPU keeps its memory speed between the cells of
//! a benchmark. Two 1 GiB buffers (smaller where bindings are) are measured
//! again and again with timestamp queries: a copy of half of one into the
//! other, and dependent random loads (one subgroup, each load's address
//! depending on the previous one, so the time per load is the memory
//! latency). Before each measurement it does what a bench does between
//! cells: `write` (upload half a buffer), `readback` (map a quarter back),
//! `cpu` (2 s of busy CPU threads, the GPU idle), `idle` (sleep 2 s) or
//! `none`; then, with `--warm-ms`, keeps the GPU busy with copies.
//!
//! On an NVIDIA H100, after a second or two without GPU work (nvidia-smi
//! then reads the SM clock at its idle 345 MHz) the short measured
//! submissions run slow and stay slow: the copy falls from 2.9 to 1.65 TB/s
//! and a load's latency rises from 0.26 to 1.2 µs, as from a clock that did
//! not come back up. 300 ms of sustained copies first restores the speed
//! (mostly: cull-bench warms for 500 ms). See docs/benchmarks.md.
//!
//! ```text
//! cull-membw --cells cpu
//! cull-membw --cells cpu --warm-ms 500
//! ```

#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench, which uses all of it
mod roofline;

use argh::{FromArgValue, FromArgs};
use roofline::{Roofline, median};
use std::time::{Duration, Instant};

/// Dependent random loads by one subgroup: each address depends on the
/// previous load, so the time per step is the memory latency.
const CHASE: &str = r#"
@group(0) @binding(0) var<storage, read> buf: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;
struct Params { region: u32, steps: u32 }
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(32)
fn chase(@builtin(local_invocation_index) lid: u32) {
    var x = lid * 2654435761u + 1u;
    var acc = 0u;
    for (var s = 0u; s < p.steps; s += 1u) {
        x = x * 1664525u + 1013904223u + acc;
        acc = buf[(x >> 3u) % p.region].x;
    }
    sink[lid] = acc;
}
"#;

const STEPS: u32 = 2048;

/// Measures whether the GPU keeps its memory speed between the cells of a
/// benchmark: a copy and dependent random loads, again and again.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} --cells cpu",
    example = "{command_name} --cells cpu --warm-ms 500"
)]
struct Args {
    /// what to do before each measurement, as a bench does between cells:
    /// write (upload half a buffer), readback (map a quarter back), cpu (2 s
    /// of busy CPU threads, the GPU idle), idle (sleep 2 s) or none (the
    /// default)
    #[argh(option, arg_name = "write|readback|cpu|idle|none", default = "Cells::None")]
    cells: Cells,
    /// milliseconds of copies keeping the GPU busy after that, before
    /// measuring (default 0)
    #[argh(option, arg_name = "ms", default = "0")]
    warm_ms: u64,
}

/// `--cells`: what happens between two measurements.
#[derive(Clone, Copy, FromArgValue)]
enum Cells {
    Write,
    Readback,
    Cpu,
    Idle,
    None,
}

impl Cells {
    fn name(self) -> &'static str {
        match self {
            Cells::Write => "write",
            Cells::Readback => "readback",
            Cells::Cpu => "cpu",
            Cells::Idle => "idle",
            Cells::None => "none",
        }
    }
}

fn main() {
    let Args {
        cells: action,
        warm_ms,
    } = argh::from_env();
    let ctx = roofline::timed_context();
    println!(
        "Device: {}; between cells: {}; then {warm_ms} ms of copies before measuring\n",
        ctx.describe(),
        action.name()
    );
    let device = &ctx.device;
    let roofline = Roofline::new(&ctx);
    // 1 GiB, or the largest binding where that is smaller (lavapipe: 128 MiB).
    let size: u64 = (1u64 << 30).min(device.limits().max_storage_buffer_binding_size) / 16 * 16;
    let make = |size, usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    let input = make(size, storage);
    let target = make(size, storage);
    let bytes = size / 2;
    let copy = roofline.copy_job(&ctx, &input, &target, bytes);

    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("chase"),
        source: wgpu::ShaderSource::Wgsl(CHASE.into()),
    });
    let chase = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("chase"),
        layout: None,
        module: &module,
        entry_point: Some("chase"),
        compilation_options: Default::default(),
        cache: None,
    });
    let sink = make(128, wgpu::BufferUsages::STORAGE);
    let params = make(16, wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST);
    ctx.queue.write_buffer(
        &params,
        0,
        bytemuck::cast_slice(&[(size / 16) as u32, STEPS, 0, 0]),
    );
    let chase_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &chase.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: input.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: sink.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: params.as_entire_binding(),
            },
        ],
    });

    let host: Vec<u8> = (0..bytes as usize)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let t0 = Instant::now();
    println!("| cell | s | copy TB/s | chase ns |");
    println!("|---:|---:|---:|---:|");
    for cell in 0..14 {
        match action {
            Cells::Write => {
                ctx.queue.write_buffer(&input, 0, &host);
                ctx.queue.submit([]);
            }
            Cells::Readback => {
                let rb = make(
                    size / 4,
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                );
                let mut encoder = device.create_command_encoder(&Default::default());
                encoder.copy_buffer_to_buffer(&target, 0, &rb, 0, size / 4);
                ctx.queue.submit([encoder.finish()]);
                rb.slice(..size / 4).map_async(wgpu::MapMode::Read, |_| {});
                device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
                let sum: u64 = rb
                    .slice(..size / 4)
                    .get_mapped_range()
                    .iter()
                    .step_by(4096)
                    .map(|&b| b as u64)
                    .sum();
                std::hint::black_box(sum);
            }
            Cells::Idle => std::thread::sleep(Duration::from_secs(2)),
            Cells::Cpu => {
                let until = Instant::now() + Duration::from_secs(2);
                std::thread::scope(|s| {
                    for _ in 0..16 {
                        s.spawn(|| {
                            let mut v = 1u64;
                            while Instant::now() < until {
                                for _ in 0..10000 {
                                    v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
                                }
                            }
                            std::hint::black_box(v);
                        });
                    }
                });
            }
            Cells::None => {}
        }
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        roofline.warm_up(&ctx, &copy, Duration::from_millis(warm_ms));
        let tb = 2.0 * bytes as f64 / median((0..9).map(|_| roofline.time_copy(&ctx, &copy)).collect()) / 1e6;
        let chase_us = median(
            (0..3)
                .map(|_| {
                    roofline.timed(&ctx, |pass| {
                        pass.set_pipeline(&chase);
                        pass.set_bind_group(0, &chase_group, &[]);
                        pass.dispatch_workgroups(1, 1, 1);
                    })
                })
                .collect(),
        );
        let ns = chase_us * 1000.0 / STEPS as f64;
        println!(
            "| {cell} | {:.1} | {tb:.2} | {ns:.0} |",
            t0.elapsed().as_secs_f32()
        );
    }
}
