//! cull-views: several views culled in one pass (`Culler::cull`)
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
//! `--occlusion` measures the two phases of occlusion culling instead
//! (`CullRequest::occlusion_early` and `occlusion_late`, one view) against a
//! plain cull of the same view: a 1280×720 depth buffer whose left half is a
//! wall at the median depth of the visible instances, its pyramid built
//! once, the history warmed by one frame (so the early phase draws what
//! passed last frame, as in a steady camera). The pyramid build is timed on
//! its own. `--occlusion --cells` culls the batch sorted into cells
//! (`CellLayout::sort`): the plain cull flat and by cells, and both phases
//! by cells, whose late cell pass also tests the cells against the pyramid.
//!
//! ```text
//! cargo run --release -p cull-bench --bin cull-views -- --sizes 1e6,4e6,16e6
//! cull-views --sizes 4e6 --variants subgroup-ballot --formats posquat --runs 15
//! cull-views --occlusion --cells --sizes 4e6,16e6 --variants subgroup-ballot,ordered
//! ```

#[path = "../flags.rs"]
mod flags;
#[path = "../local_center.rs"]
mod local_center;
#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench
mod roofline;

use argh::FromArgs;
use cull_core::SphereClass;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CellIndex, CellLayout, CpuPyramid, CullInput, CullRequest, CullTarget, Culler, CullerDesc, DepthOrder,
    DepthPyramid, Frustum, InstanceFormat, MAX_VIEWS, OcclusionCamera, OcclusionHistory, OutputKind,
    PyramidBuilder, ScanVariant, SizeMetric, VisibilityTest,
};
use glam::Mat4;
use roofline::{Roofline, median, timed_context};

/// `--variants` by default.
const DEFAULT_VARIANTS: [ScanVariant; 4] = [
    ScanVariant::SubgroupBallot,
    ScanVariant::SubgroupShuffle,
    ScanVariant::BlockAtomic,
    ScanVariant::Ordered,
];
const VIEWS: [u32; 5] = [1, 2, 4, 6, 8];
const CAMERA: CameraKind = CameraKind::InfiniteReverseZ;

/// `request`, by `cells` where the batch is sorted into them.
fn maybe_by_cells<'a>(request: CullRequest<'a>, cells: Option<&'a CellIndex>) -> CullRequest<'a> {
    match cells {
        Some(cells) => request.by_cells(cells),
        None => request,
    }
}

/// Times several views culled in one pass against the same views culled one
/// after the other, or (--occlusion) occlusion culling's two phases against a plain cull.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} --sizes 1e6,4e6,16e6",
    example = "{command_name} --sizes 4e6 --variants subgroup-ballot --formats posquat --runs 15",
    example = "{command_name} --occlusion --cells --sizes 4e6,16e6 --variants subgroup-ballot,ordered"
)]
struct Args {
    /// instance counts, comma-separated, in any floating-point notation
    /// (default 1e6,4e6,16e6)
    #[argh(
        option,
        arg_name = "n,..",
        from_str_fn(flags::sizes),
        default = "vec![1_000_000, 4_000_000, 16_000_000]"
    )]
    sizes: flags::Sizes,
    /// scan variants by name, comma-separated (default
    /// subgroup-ballot,subgroup-shuffle,block-atomic,ordered)
    #[argh(
        option,
        arg_name = "name,..",
        from_str_fn(flags::variants),
        default = "DEFAULT_VARIANTS.to_vec()"
    )]
    variants: flags::Variants,
    /// instance formats by name, comma-separated (default posquat,packed16)
    #[argh(
        option,
        arg_name = "name,..",
        from_str_fn(flags::formats),
        default = "vec![InstanceFormat::PosQuat, InstanceFormat::Packed16]"
    )]
    formats: flags::Formats,
    /// the fraction of the instances in view (default 0.25)
    #[argh(option, arg_name = "f", default = "0.25")]
    fraction: f32,
    /// what the culls write: indices (the default) or instances (copies)
    #[argh(
        option,
        arg_name = "indices|instances",
        from_str_fn(flags::output),
        default = "OutputKind::Indices"
    )]
    output: OutputKind,
    /// timed rounds per cell (default 11)
    #[argh(option, default = "11")]
    runs: usize,
    /// milliseconds of sustained copies before each cell's timed rounds
    /// (default 500)
    #[argh(option, arg_name = "ms", default = "500")]
    warm_ms: u64,
    /// the views are levels of detail of one camera rather than turned
    /// copies of it
    #[argh(switch)]
    lod: bool,
    /// time occlusion culling's phases against a plain cull instead
    #[argh(switch)]
    occlusion: bool,
    /// with --occlusion: the batch sorted into cells, culled by them
    #[argh(switch)]
    cells: bool,
    /// where the mesh's bounding sphere sits in its own space: offset (the
    /// default) or origin
    #[argh(
        option,
        long = "local-center",
        arg_name = "offset|origin",
        from_str_fn(local_center::parse),
        default = "false"
    )]
    centred: bool,
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

/// `levels` with the first level's size scale one ulp larger: the same
/// work, but no longer one camera's views ([`VisibilityTest::for_views`]).
fn apart(levels: &[Frustum]) -> Vec<Frustum> {
    let mut views = levels.to_vec();
    if let Some(band) = views.first_mut().and_then(|f| f.size_band.as_mut()) {
        band.metric.scale = band.metric.scale.next_up();
        assert_eq!(VisibilityTest::for_views(&views), VisibilityTest::Frustum);
    }
    views
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
            let request = CullRequest::new(input, target, frusta, scene.bounds, n);
            self.culler.cull(&mut encoder, &ctx.queue, request).unwrap();
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
    let args: Args = argh::from_env();
    if args.cells && !args.occlusion {
        flags::usage_error("--cells times occlusion culling by cells: give it with --occlusion");
    }
    let ctx = timed_context();
    let device_line = format!("{}; {}", ctx.describe(), local_center::describe(args.centred));
    eprintln!("device: {device_line}");
    let roofline = Roofline::new(&ctx);
    let mut rows = Vec::new();
    let mut wrong = false;
    for &format in &args.formats {
        for &n in &args.sizes {
            let mut scene = Scene::random(n as u64 ^ 0x71e5, n, CAMERA, Some(args.fraction)).fit(format);
            local_center::apply(&mut scene, args.centred);
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
            // In --lod, the same levels with the nearest level's scale one
            // ulp larger are no longer one camera's, so they are culled with
            // a frustum test per level (VisibilityTest::Frustum) rather than
            // one for all (DetailLevels): the same work otherwise, and the
            // same references (a ulp is far inside the bands' tolerance).
            let per_level: Vec<Vec<Frustum>> = frusta.iter().map(|views| apart(views)).collect();
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
            if args.occlusion {
                let setup = Occluded::new(&ctx, &scene, &bytes, format);
                for &variant in &args.variants {
                    if !variant.is_available(ctx.device.features()) {
                        eprintln!("skipping {variant:?}: not available");
                        continue;
                    }
                    let culler = culler(&ctx, variant, format, args.output, 1);
                    match setup.rows(&ctx, &roofline, &args, &culler, &input, &scene, n as u32) {
                        Ok(r) => rows.extend(r),
                        Err(e) => {
                            eprintln!("{variant:?} {format:?} n={n}: {e}");
                            wrong = true;
                        }
                    }
                }
                continue;
            }
            for &variant in &args.variants {
                if !variant.is_available(ctx.device.features()) {
                    eprintln!("skipping {variant:?}: not available");
                    continue;
                }
                let mut ways: Vec<(u32, &str, Way)> = Vec::new();
                const PER_LEVEL: &str = "one pass, a frustum test per level";
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
                        if args.lod {
                            ways.push((k, PER_LEVEL, way(MAX_VIEWS, k, true)));
                        }
                    }
                }
                let views_for = |k: u32, name: &str| {
                    if name == PER_LEVEL {
                        &per_level[of(k)]
                    } else {
                        &frusta[of(k)]
                    }
                };
                for (k, name, way) in &ways {
                    way.run(&ctx, &input, views_for(*k, name), &scene, n as u32);
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
                        let (k, name, way) = &mut ways[(j + round) % count];
                        let t = way.run(&ctx, &input, views_for(*k, name), &scene, n as u32);
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
    if args.occlusion {
        println!(
            "Device: {device_line}. Output: {:?}, ~{:.0}% in the view, a wall hiding its left half; \
             times are medians of {} runs. Pyramid of 1280×720: {:.1} µs.{}\n",
            args.output,
            args.fraction * 100.0,
            args.runs,
            Occluded::pyramid_us(&ctx, args.runs),
            if args.cells {
                " The batch is sorted into cells (CellLayout::sort); \"by cells\" reads only the kept cells' \
                 instances (the late phase's cell pass also tests the cells against the pyramid)."
            } else {
                ""
            }
        );
        println!(
            "| format | variant | n | phase | kept | GPU µs | × plain cull | × copy of the plain cull's bytes |"
        );
        println!("|---|---|---:|---|---:|---:|---:|---:|");
        for row in rows {
            println!("{row}");
        }
        if wrong {
            std::process::exit(1);
        }
        return;
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

/// The depth buffer's size in `--occlusion`.
const DEPTH_SIZE: (u32, u32) = (1280, 720);

/// What `--occlusion` culls against: the scene's camera and the pyramid of
/// a wall over the left half of the screen at the visible instances'
/// median depth.
struct Occluded {
    camera: OcclusionCamera,
    pyramid: DepthPyramid,
    cpu: CpuPyramid,
}

impl Occluded {
    fn new(ctx: &cull_core::GpuContext, scene: &Scene, bytes: &[u8], format: InstanceFormat) -> Self {
        let frustum = scene.frustum().unwrap();
        let mut depths: Vec<f32> = (0..scene.instances.len())
            .filter_map(|i| format.world_sphere(bytes, i, scene.bounds))
            .filter(|s| frustum.intersects_sphere(s.center, s.radius))
            .map(|s| {
                let c = scene.clip_from_world * s.center.extend(1.0);
                c.z / c.w
            })
            .collect();
        depths.sort_by(f32::total_cmp);
        let wall = depths.get(depths.len() / 2).copied().unwrap_or(0.5);
        let (w, h) = DEPTH_SIZE;
        let depth: Vec<f32> = (0..w * h)
            .map(|i| if i % w < w / 2 { wall } else { 0.0 })
            .collect();
        let cpu = CpuPyramid::build(w, h, &depth, DepthOrder::ReverseZ).unwrap();
        let pyramid = DepthPyramid::new(&ctx.device, w, h, DepthOrder::ReverseZ).unwrap();
        pyramid.write_levels(&ctx.queue, &cpu).unwrap();
        let eye = scene
            .clip_from_world
            .inverse()
            .project_point3(glam::Vec3::new(0.0, 0.0, 0.5));
        let camera = OcclusionCamera::from_clip_from_world(scene.clip_from_world, eye).unwrap();
        Self { camera, pyramid, cpu }
    }

    /// The GPU time of building a 1280×720 pyramid from an R32Float depth.
    fn pyramid_us(ctx: &cull_core::GpuContext, runs: usize) -> f64 {
        let (w, h) = DEPTH_SIZE;
        let builder = PyramidBuilder::new(&ctx.device).unwrap();
        let depth = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("bench depth"),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::R32Float,
            usage: wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        });
        let pyramid = DepthPyramid::new(&ctx.device, w, h, DepthOrder::ReverseZ).unwrap();
        let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let samples = (0..runs + 3)
            .map(|_| {
                let mut encoder = ctx.device.create_command_encoder(&Default::default());
                encoder.write_timestamp(&queries, 0);
                builder
                    .build(&ctx.device, &mut encoder, &depth, &pyramid)
                    .unwrap();
                encoder.write_timestamp(&queries, 1);
                encoder.resolve_query_set(&queries, 0..2, &resolve, 0);
                ctx.queue.submit([encoder.finish()]);
                let bytes = cull_core::read_back(&ctx.device, &ctx.queue, &resolve, 0, 16).unwrap();
                let t: [u64; 2] = bytemuck::pod_read_unaligned(&bytes);
                t[1].saturating_sub(t[0]) as f64 * ctx.queue.get_timestamp_period() as f64 / 1e3
            })
            .skip(3)
            .collect();
        median(samples)
    }

    /// Rows for one culler: the plain cull, the early and late phases and
    /// both, after checking that together they keep what the CPU says
    /// passes the pyramid. With `args.cells`, over the batch sorted into
    /// cells: the plain cull flat and by cells, and both phases by cells.
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &self,
        ctx: &cull_core::GpuContext,
        roofline: &Roofline,
        args: &Args,
        culler: &Culler,
        input: &CullInput,
        scene: &Scene,
        n: u32,
    ) -> Result<Vec<String>, String> {
        let format = culler.format();
        let bytes = format.encode(&scene.instances).unwrap();
        // By cells: every cull reads the batch sorted into the culler's
        // cells (a permutation: the counts checked below are the same).
        let sorted = args.cells.then(|| {
            let (sorted, layout) = CellLayout::sort(format, &bytes, scene.bounds, culler.tile_len()).unwrap();
            let input = CullInput::new(&ctx.device, format, n).unwrap();
            input.write(&ctx.queue, 0, &sorted).unwrap();
            let cells = CellIndex::new(&ctx.device, culler, n).unwrap();
            cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
            (input, cells)
        });
        let (input, cells) = match &sorted {
            Some((input, cells)) => (input, Some(cells)),
            None => (input, None),
        };
        let frusta = [scene.frustum().unwrap()];
        let bounds = scene.bounds;
        let target = || CullTarget::new(&ctx.device, culler, n).unwrap();
        let (plain, plain_cells, early, late) = (target(), target(), target(), target());
        let mut history = OcclusionHistory::new(&ctx.device, n).unwrap();
        // By cells the late phase also clears the history's half it writes
        // (the instances of the cells it does not read are not visible), a
        // buffer clear outside its timed passes: timestamps written by the
        // encoder around the whole call include it, and the boundaries.
        let stamps = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("late phase, whole"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("late phase, whole"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        // GPU µs of the plain cull, the plain cull by cells (0 without
        // cells), the early phase, the late one, and (by cells) the late
        // one from the encoder's timestamps.
        let frame = |history: &mut OcclusionHistory| -> [f64; 5] {
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            let flat = CullRequest::new(input, &plain, &frusta, bounds, n);
            culler.cull(&mut encoder, &ctx.queue, flat).unwrap();
            if let Some(cells) = cells {
                let by_cells = CullRequest::new(input, &plain_cells, &frusta, bounds, n).by_cells(cells);
                culler.cull(&mut encoder, &ctx.queue, by_cells).unwrap();
            }
            let early_phase = CullRequest::new(input, &early, &frusta, bounds, n).occlusion_early(history);
            culler
                .cull(&mut encoder, &ctx.queue, maybe_by_cells(early_phase, cells))
                .unwrap();
            encoder.write_timestamp(&stamps, 0);
            let late_phase = CullRequest::new(input, &late, &frusta, bounds, n).occlusion_late(
                history,
                &self.pyramid,
                &self.camera,
            );
            culler
                .cull(&mut encoder, &ctx.queue, maybe_by_cells(late_phase, cells))
                .unwrap();
            encoder.write_timestamp(&stamps, 1);
            encoder.resolve_query_set(&stamps, 0..2, &resolved, 0);
            ctx.queue.submit([encoder.finish()]);
            let us = |t: &CullTarget| t.read_timings(&ctx.device).unwrap().total.as_secs_f64() * 1e6;
            let whole: [u64; 2] = bytemuck::pod_read_unaligned(
                &cull_core::read_back(&ctx.device, &ctx.queue, &resolved, 0, 16).unwrap(),
            );
            let whole_us =
                whole[1].saturating_sub(whole[0]) as f64 * ctx.queue.get_timestamp_period() as f64 / 1e3;
            [
                us(&plain),
                if cells.is_some() { us(&plain_cells) } else { 0.0 },
                us(&early),
                us(&late),
                whole_us,
            ]
        };
        // Two frames: the first fills the history; the second's phases are
        // the steady state checked here.
        frame(&mut history);
        frame(&mut history);
        let count = |t: &CullTarget| t.read_visible_count(&ctx.device, &ctx.queue).unwrap();
        let kept = [count(&plain), count(&plain_cells), count(&early), count(&late)];
        if cells.is_some() && kept[1] != kept[0] {
            return Err(format!(
                "the plain cull kept {} flat and {} by cells",
                kept[0], kept[1]
            ));
        }
        let frustum = frusta[0];
        let (mut inside, mut border) = (0u32, 0u32);
        for i in 0..n as usize {
            let Some(s) = format.world_sphere(&bytes, i, scene.bounds) else {
                continue;
            };
            let f = frustum.classify(&s);
            if f == SphereClass::Outside {
                continue;
            }
            match (f, self.camera.classify(&s, &self.cpu).expect("a valid camera")) {
                (_, SphereClass::Outside) => {}
                (SphereClass::Inside, SphereClass::Inside) => inside += 1,
                _ => border += 1,
            }
        }
        let together = kept[2] + kept[3];
        if !(inside..=inside + border).contains(&together) {
            return Err(format!(
                "early {} + late {} kept {together}, the CPU says {inside} (+{border} borderline)",
                kept[2], kept[3]
            ));
        }
        let visible = kept[0] as u64;
        let copy_bytes = n as u64 * format.stride() + visible * args.output.stride(format);
        let copy = roofline.copy_job(ctx, input.buffer(), plain.output_buffer(), copy_bytes / 2);
        roofline.warm_up(ctx, &copy, std::time::Duration::from_millis(args.warm_ms));
        let mut samples: [Vec<f64>; 5] = Default::default();
        let mut copies = Vec::new();
        for _ in 0..args.runs {
            let t = frame(&mut history);
            for (s, t) in samples.iter_mut().zip(t) {
                s.push(t);
            }
            copies.push(roofline.time_copy(ctx, &copy));
        }
        let copy_us = median(copies);
        let [p, pc, e, l, lw] = samples.map(median);
        let rows: Vec<(&str, u32, f64)> = if cells.is_some() {
            vec![
                ("plain cull", kept[0], p),
                ("plain cull by cells", kept[1], pc),
                ("early by cells", kept[2], e),
                ("late by cells", kept[3], l),
                (
                    "late by cells, whole call (its history clear included)",
                    kept[3],
                    lw,
                ),
                ("early + late by cells", together, e + l),
            ]
        } else {
            vec![
                ("plain cull", kept[0], p),
                ("early", kept[2], e),
                ("late", kept[3], l),
                ("early + late", together, e + l),
            ]
        };
        Ok(rows
            .into_iter()
            .map(|(name, kept, us)| {
                format!(
                    "| {} | {} | {n} | {name} | {kept} | {us:.1} | {:.2} | {:.2} |",
                    format.name(),
                    culler.variant().name(),
                    us / p,
                    us / copy_us
                )
            })
            .inspect(|r| eprintln!("{r}"))
            .collect())
    }
}
