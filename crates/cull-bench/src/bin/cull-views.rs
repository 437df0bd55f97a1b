//! cull-views: several views culled in one pass (`Culler::cull_views`)
//! against the same views culled one after the other, over the same
//! instances, with GPU timestamps, as ratios to one view and to a copy
//! kernel over one view's bytes measured in the same run.
//!
//! Each cell culls `n` instances against K views (K = 1, 2, 4, 6, 8): the
//! camera of a random scene and copies of it turned a few degrees about
//! the vertical, so every view sees about the same share. Two ways:
//! - `single`: K culls into K one-view targets (each reads every instance);
//! - `one pass`: one cull into a target of K views, by a culler that allows
//!   eight (`max_views`), as a renderer holding one culler for cameras,
//!   cascades and cube faces would.
//!
//! Every view's survivors are checked against the CPU reference first, as
//! exact sets.
//!
//! ```text
//! cargo run --release -p cull-bench --bin cull-views -- --sizes 1e6,4e6,16e6
//! cull-views --sizes 4e6 --variants subgroup-ballot --formats posquat --runs 15
//! ```

#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench
mod roofline;

use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullTarget, CullViewsParams, Culler, CullerDesc, Frustum, InstanceFormat, MAX_VIEWS, OutputKind,
    ScanVariant, SizeMetric,
};
use glam::Mat4;
use roofline::{Roofline, median, timed_context};

const VIEWS: [u32; 5] = [1, 2, 4, 6, 8];
const CAMERA: CameraKind = CameraKind::InfiniteReverseZ;

struct Args {
    sizes: Vec<usize>,
    variants: Vec<ScanVariant>,
    formats: Vec<InstanceFormat>,
    fraction: f32,
    output: OutputKind,
    runs: usize,
    warm_ms: u64,
    /// The views are levels of detail of one camera (`Frustum::detail_levels`)
    /// rather than turned copies of it.
    lod: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sizes: vec![1_000_000, 4_000_000, 16_000_000],
        variants: vec![
            ScanVariant::SubgroupBallot,
            ScanVariant::SubgroupShuffle,
            ScanVariant::BlockAtomic,
            ScanVariant::Ordered,
        ],
        formats: vec![InstanceFormat::PosQuat, InstanceFormat::Packed16],
        fraction: 0.25,
        output: OutputKind::Indices,
        runs: 11,
        warm_ms: 500,
        lod: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => {
                args.sizes = value()?
                    .split(',')
                    .map(|s| {
                        s.parse::<f64>()
                            .map(|x| x as usize)
                            .map_err(|e| format!("--sizes {s}: {e}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--variants" => {
                args.variants = value()?
                    .split(',')
                    .map(|s| ScanVariant::from_name(s).ok_or(format!("unknown variant {s}")))
                    .collect::<Result<_, _>>()?
            }
            "--formats" => {
                args.formats = value()?
                    .split(',')
                    .map(|s| InstanceFormat::from_name(s).ok_or(format!("unknown format {s}")))
                    .collect::<Result<_, _>>()?
            }
            "--fraction" => args.fraction = value()?.parse().map_err(|e| format!("--fraction: {e}"))?,
            "--output" => {
                args.output = match value()?.as_str() {
                    "indices" => OutputKind::Indices,
                    "instances" => OutputKind::Instances,
                    o => return Err(format!("--output {o}: instances or indices")),
                }
            }
            "--lod" => args.lod = true,
            "--runs" => args.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--warm-ms" => args.warm_ms = value()?.parse().map_err(|e| format!("--warm-ms: {e}"))?,
            _ => {
                return Err("usage: cull-views [--sizes 1e6,4e6,16e6] [--variants NAME,..] \
                     [--formats posquat,packed16] [--fraction 0.25] [--output indices|instances] [--runs 11] [--warm-ms 500] [--lod]"
                    .into());
            }
        }
    }
    Ok(args)
}

/// `k` levels of detail of the scene's camera: thresholds at quantiles of
/// the visible spheres' sizes, the last 0, so that every visible instance is
/// in exactly one level and the levels write as much as one view does.
fn detail_levels(scene: &Scene, format: InstanceFormat, bytes: &[u8], k: u32) -> Vec<Frustum> {
    let projection = CAMERA.projection();
    let view = projection.inverse() * scene.clip_from_world;
    let metric = SizeMetric::from_view(projection, view.inverse());
    let frustum = Frustum::from_clip_from_world(scene.clip_from_world, None).unwrap();
    let mut sizes: Vec<f64> = (0..scene.instances.len())
        .step_by(97)
        .filter_map(|i| format.world_sphere(bytes, i, scene.bounds))
        .filter(|s| frustum.intersects_sphere(s.center, s.radius))
        .map(|s| metric.size(s.center, s.radius))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    let mut thresholds: Vec<f32> = (1..k)
        .map(|j| sizes[(j as usize * sizes.len() / k as usize).min(sizes.len() - 1)] as f32)
        .collect();
    thresholds.dedup();
    thresholds.push(0.0);
    frustum.detail_levels(metric, &thresholds).unwrap()
}

/// The scene's camera turned by `k` times a few degrees about its vertical.
fn turned_views(scene: &Scene, k: u32) -> Vec<Frustum> {
    let projection = CAMERA.projection();
    let view = projection.inverse() * scene.clip_from_world;
    (0..k)
        .map(|i| {
            let turn = Mat4::from_rotation_y((i as f32 * 3.0).to_radians());
            Frustum::from_clip_from_world(projection * turn * view, None).unwrap()
        })
        .collect()
}

fn culler(
    ctx: &cull_core::GpuContext,
    variant: ScanVariant,
    format: InstanceFormat,
    output: OutputKind,
    views: u32,
) -> Culler {
    let desc = CullerDesc {
        variant: Some(variant),
        allow_fallback: false,
        format,
        output,
        max_views: views,
        ..Default::default()
    };
    Culler::new(&ctx.device, &ctx.queue, &desc).unwrap()
}

/// One way of culling K views, timed.
struct Way {
    culler: Culler,
    /// One target per cull: K single-view targets, or one of K views.
    targets: Vec<CullTarget>,
    samples: Vec<f64>,
}

impl Way {
    /// K culls of one view each, or (`together`) one of K views.
    fn new(ctx: &cull_core::GpuContext, culler: Culler, n: u32, k: u32, together: bool) -> Self {
        let targets = if together {
            vec![CullTarget::with_views(&ctx.device, &culler, n, k).unwrap()]
        } else {
            (0..k)
                .map(|_| CullTarget::new(&ctx.device, &culler, n).unwrap())
                .collect()
        };
        Self {
            culler,
            targets,
            samples: Vec::new(),
        }
    }

    /// Records and submits the culls; returns their GPU time in microseconds.
    fn run(
        &self,
        ctx: &cull_core::GpuContext,
        input: &cull_core::CullInput,
        frusta: &[Frustum],
        scene: &Scene,
        n: u32,
    ) -> f64 {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let culls: Vec<(&CullTarget, &[Frustum])> = if self.targets.len() == 1 {
            vec![(&self.targets[0], frusta)]
        } else {
            self.targets.iter().zip(frusta.chunks(1)).collect()
        };
        for (target, frusta) in &culls {
            let params = CullViewsParams {
                frusta,
                local_bounds: scene.bounds,
                count: n,
            };
            self.culler
                .cull_views(&mut encoder, &ctx.queue, input, target, &params)
                .unwrap();
        }
        ctx.queue.submit([encoder.finish()]);
        culls
            .iter()
            .map(|(t, _)| t.read_timings(&ctx.device).unwrap().total.as_secs_f64() * 1e6)
            .sum()
    }

    /// Each view's survivors, as batch indices (the culls write indices or
    /// instance copies of `bytes`).
    fn survivors(
        &self,
        ctx: &cull_core::GpuContext,
        k: u32,
        output: OutputKind,
        bytes: &[u8],
    ) -> Vec<Vec<u32>> {
        (0..k)
            .map(|v| {
                let (target, view) = if self.targets.len() == 1 {
                    (&self.targets[0], v)
                } else {
                    (&self.targets[v as usize], 0)
                };
                let count = target.read_view_count(&ctx.device, &ctx.queue, view).unwrap();
                let count = count.min(target.capacity());
                let out = target
                    .read_view_output(&ctx.device, &ctx.queue, view, count)
                    .unwrap();
                match output {
                    OutputKind::Indices => bytemuck::pod_collect_to_vec(&out),
                    OutputKind::Instances => {
                        let stride = self.culler.format().stride() as usize;
                        cull_core::cpu::copies_to_indices(stride, bytes, &out)
                    }
                }
            })
            .collect()
    }
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let ctx = timed_context();
    let device_line = ctx.describe();
    eprintln!("device: {device_line}");
    let roofline = Roofline::new(&ctx);
    let mut rows = Vec::new();
    let mut wrong = false;
    for &format in &args.formats {
        for &n in &args.sizes {
            let scene = Scene::random(n as u64 ^ 0x71e5, n, CAMERA, Some(args.fraction)).fit(format);
            let bytes = format.encode(&scene.instances).unwrap();
            let input = cull_core::CullInput::new(&ctx.device, format, n as u32).unwrap();
            input.write(&ctx.queue, 0, &bytes).unwrap();
            // The views of each K, and their references.
            let views_of = |k: u32| {
                if args.lod && k > 1 {
                    detail_levels(&scene, format, &bytes, k)
                } else {
                    turned_views(&scene, MAX_VIEWS)[..k as usize].to_vec()
                }
            };
            let frusta: Vec<Vec<Frustum>> = VIEWS.iter().map(|&k| views_of(k)).collect();
            let references: Vec<Vec<_>> = frusta
                .iter()
                .map(|views| {
                    views
                        .iter()
                        .map(|f| cull_core::cpu::classify(format, &bytes, scene.bounds, f).unwrap())
                        .collect()
                })
                .collect();
            let of = |k: u32| VIEWS.iter().position(|&v| v == k).expect("one of VIEWS");
            for &variant in &args.variants {
                if !variant.is_available(ctx.device.features()) {
                    eprintln!("skipping {variant:?}: not available");
                    continue;
                }
                let mut ways: Vec<(u32, &str, Way)> = Vec::new();
                let way = |views: u32, k: u32, together: bool| {
                    Way::new(
                        &ctx,
                        culler(&ctx, variant, format, args.output, views),
                        n as u32,
                        k,
                        together,
                    )
                };
                for &k in &VIEWS {
                    ways.push((k, "single", way(1, k, false)));
                    if k > 1 {
                        ways.push((k, "one pass", way(MAX_VIEWS, k, true)));
                    }
                }
                for (k, name, way) in &ways {
                    way.run(&ctx, &input, &frusta[of(*k)], &scene, n as u32);
                    let survivors = way.survivors(&ctx, *k, args.output, &bytes);
                    for (v, (got, r)) in survivors.iter().zip(&references[of(*k)]).enumerate() {
                        if let Err(e) = r.check(got) {
                            eprintln!("{variant:?} {format:?} n={n} K={k} {name} view {v}: {e}");
                            wrong = true;
                        }
                    }
                }
                let visible = references[0][0].visible.len() as u64;
                let out = ways[0].2.targets[0].output_buffer();
                let copy_bytes = n as u64 * format.stride() + visible * args.output.stride(format);
                let copy = roofline.copy_job(&ctx, input.buffer(), out, copy_bytes / 2);
                roofline.warm_up(&ctx, &copy, std::time::Duration::from_millis(args.warm_ms));
                let mut copies = Vec::new();
                for round in 0..3 + args.runs {
                    let count = ways.len();
                    for j in 0..count {
                        let (k, _, way) = &mut ways[(j + round) % count];
                        let t = way.run(&ctx, &input, &frusta[of(*k)], &scene, n as u32);
                        let c = roofline.time_copy(&ctx, &copy);
                        if round >= 3 {
                            way.samples.push(t);
                            copies.push(c);
                        }
                    }
                }
                let copy_us = median(copies);
                let one_view = median(ways[0].2.samples.clone());
                for (k, name, way) in ways {
                    let us = median(way.samples);
                    rows.push(format!(
                        "| {} | {} | {} | {k} | {name} | {us:.1} | {:.2} | {:.2} |",
                        format.name(),
                        variant.name(),
                        n,
                        us / one_view,
                        us / copy_us
                    ));
                    eprintln!("{}", rows.last().unwrap());
                }
            }
        }
    }
    println!(
        "Device: {device_line}. Output: {:?}, ~{:.0}% visible per view; times are medians of {} runs.{}\n",
        args.output,
        args.fraction * 100.0,
        args.runs,
        if args.lod {
            " Views: levels of detail of one camera (together they keep what one view keeps)."
        } else {
            ""
        }
    );
    println!("| format | variant | n | views | how | GPU µs | × one view | × copy of one view's bytes |");
    println!("|---|---|---:|---:|---|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    if wrong {
        eprintln!("some culls disagreed with the CPU reference");
        std::process::exit(1);
    }
}
