//! cull-cells: culling by cells (`CullRequest::by_cells_if_faster`, here
//! always taking cells: listed on the CPU for the unordered variants, a
//! cell pass for the others) against the
//! flat cull (`Culler::cull`) of the same instances, with GPU
//! timestamps, as ratios to each other and to a copy kernel over the flat
//! cull's bytes measured in the same run.
//!
//! Each cell is a random scene of `n` instances in a box around the camera,
//! `--fractions` of them in the view, sorted into cells
//! (`CellLayout::sort`). Two layouts:
//! - `sorted`: the batch in cell order, each cell spatially compact (a
//!   spatially coherent world: the cull reads only the cells in view);
//! - `unsorted`: the batch in its random order, each cell's sphere as large
//!   as the scene (what cells cost when they cannot help).
//!
//! Then a **field** (`--scene field`, or `all`, the default): `n` instances
//! on a flat square, sorted into cells, seen by a camera that moves across
//! it over [`FRAMES`] frames, as a game's would. Two cameras:
//! - `above`: looking down from the height where about each `--fractions`
//!   of the field is in view;
//! - `ground`: at eye height looking across the field, with four levels of
//!   detail whose farthest ends where an instance is small on screen (a
//!   cut-off): the cell pass also culls the cells beyond it.
//!
//! The table gives per-frame medians summed over the path, so the ratios
//! are those of the whole flight.
//!
//! Every cull's survivors are checked against the CPU reference first, as
//! exact sets. The table gives the bytes each cull reads: every instance
//! for the flat cull; the kept cells' instances by cells (and every cell's
//! sphere, with a cell pass). "The pick" is what `by_cells_if_faster`
//! decides with the default thresholds.
//!
//! ```text
//! cargo run --release -p cull-bench --bin cull-cells -- --sizes 1e6,16e6 --fractions 0.01,0.05
//! ```

#[path = "../flags.rs"]
mod flags;
#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench
mod roofline;

use argh::{FromArgValue, FromArgs};
use cull_core::CELL_BOUNDS_BYTES;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CellBounds, CellIndex, CellLayout, CullInput, CullRequest, CullTarget, Culler, CullerDesc, Frustum,
    InstanceFormat, OutputKind, ScanVariant, Sphere,
};
use roofline::{Roofline, median, timed_context};

const CAMERA: CameraKind = CameraKind::InfiniteReverseZ;

/// Frames of a field's camera path.
const FRAMES: usize = 8;

/// Which scenes to measure (`--scene`).
#[derive(Clone, Copy, PartialEq, Eq, FromArgValue)]
enum Scenes {
    Random,
    Field,
    All,
}

/// Times culling by cells against the flat cull of the same instances, in
/// random scenes and in a field seen by a moving camera.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} --sizes 1e6,16e6 --fractions 0.01,0.05",
    example = "{command_name} --scene field --variants subgroup-ballot,ordered"
)]
struct Args {
    /// instance counts, comma-separated, in any floating-point notation
    /// (default 1e6,4e6,16e6,32e6)
    #[argh(
        option,
        arg_name = "n,..",
        from_str_fn(flags::sizes),
        default = "vec![1_000_000, 4_000_000, 16_000_000, 32_000_000]"
    )]
    sizes: flags::Sizes,
    /// fractions of the instances in view, comma-separated (default
    /// 0.01,0.05,0.25,1)
    #[argh(
        option,
        arg_name = "f,..",
        from_str_fn(flags::fractions),
        default = "vec![0.01, 0.05, 0.25, 1.0]"
    )]
    fractions: flags::Fractions,
    /// scan variants by name, comma-separated (default subgroup-ballot)
    #[argh(
        option,
        arg_name = "name,..",
        from_str_fn(flags::variants),
        default = "vec![ScanVariant::SubgroupBallot]"
    )]
    variants: flags::Variants,
    /// instance formats by name, comma-separated (default posquat)
    #[argh(
        option,
        arg_name = "name,..",
        from_str_fn(flags::formats),
        default = "vec![InstanceFormat::PosQuat]"
    )]
    formats: flags::Formats,
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
    /// the scenes to measure: random (sorted and unsorted batches), field
    /// (a moving camera) or all (the default)
    #[argh(
        option,
        long = "scene",
        arg_name = "random|field|all",
        default = "Scenes::All"
    )]
    scenes: Scenes,
}

/// One layout of the batch on the GPU, culled flat and by cells.
struct Layout {
    name: &'static str,
    bytes: Vec<u8>,
    input: CullInput,
    cells: CellIndex,
    /// The cells on the CPU (bounds only), which a cull by cells takes.
    cell_layout: CellLayout,
    flat: Vec<f64>,
    by_cells: Vec<f64>,
    /// By cells: the cell pass's and the cull's own times.
    cell_pass: Vec<f64>,
    cull_pass: Vec<f64>,
    kept: u32,
    /// Whether `CullRequest::by_cells_if_faster` would cull by cells.
    picks_cells: bool,
}

impl Layout {
    /// `bytes` (a batch of `culler`'s format) and its cells' `bounds` on
    /// the GPU.
    fn upload(
        ctx: &cull_core::GpuContext,
        culler: &Culler,
        name: &'static str,
        bytes: Vec<u8>,
        bounds: &[CellBounds],
        picks_cells: bool,
    ) -> Self {
        let n = (bytes.len() as u64 / culler.format().stride()) as u32;
        let input = CullInput::new(&ctx.device, culler.format(), n).unwrap();
        input.write(&ctx.queue, 0, &bytes).unwrap();
        let mut cells = CellIndex::new(&ctx.device, culler, n).unwrap();
        cells.write_bounds(&ctx.queue, 0, bounds).unwrap();
        // By cells whatever they leave unread: a cull by cells here is
        // `by_cells_if_faster` always taking cells (listed on the CPU for
        // the unordered variants, the cell pass for the others), what an
        // application's pick culls by cells with.
        cells.set_min_skipped_bytes(0);
        Layout {
            name,
            bytes,
            input,
            cells,
            cell_layout: CellLayout {
                order: Vec::new(),
                bounds: bounds.to_vec(),
                cell_len: culler.tile_len(),
            },
            flat: Vec::new(),
            by_cells: Vec::new(),
            cell_pass: Vec::new(),
            cull_pass: Vec::new(),
            kept: 0,
            picks_cells,
        }
    }
}

/// View `view`'s survivors in `target`, as indices into `bytes` (the
/// culled batch), whatever the output kind.
fn survivors(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    output: OutputKind,
    target: &CullTarget,
    view: u32,
    bytes: &[u8],
) -> Vec<u32> {
    let format = culler.format();
    let n = (bytes.len() as u64 / format.stride()) as u32;
    let count = target.read_view_count(&ctx.device, &ctx.queue, view).unwrap();
    let out = target
        .read_view_output(&ctx.device, &ctx.queue, view, count.min(n))
        .unwrap();
    match output {
        OutputKind::Indices => bytemuck::pod_collect_to_vec(&out),
        OutputKind::Instances => cull_core::cpu::copies_to_indices(format.stride() as usize, bytes, &out),
    }
}

/// What a cull here culls: `count` instances of a mesh bounded by
/// `local_bounds`, against `frusta`.
struct Params<'a> {
    frusta: &'a [Frustum],
    local_bounds: Sphere,
    count: u32,
}

fn cull(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    layout: &Layout,
    target: &CullTarget,
    params: &Params,
    by_cells: bool,
) -> cull_core::CullTimings {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let request = CullRequest::new(
        &layout.input,
        target,
        params.frusta,
        params.local_bounds,
        params.count,
    );
    let request = if by_cells {
        request.by_cells_if_faster(&layout.cell_layout, &layout.cells)
    } else {
        request
    };
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    ctx.queue.submit([encoder.finish()]);
    target.read_timings(&ctx.device).unwrap()
}

/// Whether `variant`'s culls by cells list the kept cells on the CPU (the
/// unordered variants): no cell pass reads the cells' bounds.
fn lists_cells(variant: ScanVariant) -> bool {
    matches!(
        variant,
        ScanVariant::SubgroupBallot | ScanVariant::SubgroupShuffle | ScanVariant::BlockAtomic
    )
}

/// What `by_cells_if_faster` must leave unread to cull by cells with
/// `variant`, by default.
fn pick_threshold(variant: ScanVariant) -> u64 {
    if lists_cells(variant) {
        cull_core::LISTED_CELLS_MIN_SKIPPED_BYTES
    } else {
        cull_core::CELLS_MIN_SKIPPED_BYTES
    }
}

/// Bytes of cell bounds a cull by cells of `cells` cells reads on the GPU:
/// all of them in a cell pass, none when the CPU lists the cells.
fn bounds_read(variant: ScanVariant, cells: u32) -> u64 {
    if lists_cells(variant) {
        0
    } else {
        cells as u64 * CELL_BOUNDS_BYTES
    }
}

fn us(d: Option<std::time::Duration>) -> f64 {
    d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

fn main() {
    let args: Args = argh::from_env();
    let ctx = timed_context();
    let device_line = ctx.describe();
    eprintln!("device: {device_line}");
    let roofline = Roofline::new(&ctx);
    let mut rows = Vec::new();
    let mut field_rows = Vec::new();
    let mut wrong = false;
    for &format in &args.formats {
        for &variant in &args.variants {
            let desc = CullerDesc {
                variant: Some(variant),
                allow_fallback: false,
                format,
                output: args.output,
                timestamps: true,
                // The ground camera's four levels of detail.
                max_views: 4,
                ..Default::default()
            };
            let culler = Culler::new(&ctx.device, &ctx.queue, &desc).unwrap();
            if args.scenes != Scenes::Random {
                for &n in &args.sizes {
                    let cameras = args
                        .fractions
                        .iter()
                        .map(|&f| FieldCamera::Above(f))
                        .chain([FieldCamera::Ground]);
                    for camera in cameras {
                        let row = field_row(&ctx, &roofline, &culler, &args, n, camera, &mut wrong);
                        eprintln!("{row}");
                        field_rows.push(row);
                    }
                }
            }
            let sizes = if args.scenes == Scenes::Field {
                &[][..]
            } else {
                &args.sizes[..]
            };
            for &n in sizes {
                for &fraction in &args.fractions {
                    let scene = Scene::random(n as u64 ^ 0xce11, n, CAMERA, Some(fraction)).fit(format);
                    let unsorted = format.encode(&scene.instances).unwrap();
                    let (sorted, layout) =
                        CellLayout::sort(format, &unsorted, scene.bounds, culler.tile_len()).unwrap();
                    let unsorted_bounds =
                        CellLayout::bounds_of(format, &unsorted, scene.bounds, culler.tile_len()).unwrap();
                    let frusta = [scene.frustum().unwrap()];
                    let upload = |name, bytes: Vec<u8>, bounds: &[CellBounds]| {
                        let picks_cells = CellLayout {
                            order: Vec::new(),
                            bounds: bounds.to_vec(),
                            cell_len: culler.tile_len(),
                        }
                        .leaves_unread(
                            format,
                            &frusta,
                            n as u32,
                            pick_threshold(variant),
                        );
                        Layout::upload(&ctx, &culler, name, bytes, bounds, picks_cells)
                    };
                    let mut layouts = [
                        upload("sorted", sorted, &layout.bounds),
                        upload("unsorted", unsorted, &unsorted_bounds),
                    ];
                    let target = CullTarget::new(&ctx.device, &culler, n as u32).unwrap();
                    let params = Params {
                        frusta: &frusta,
                        local_bounds: scene.bounds,
                        count: n as u32,
                    };
                    // Exact sets first, then the cells kept.
                    let mut visible = 0u64;
                    for l in &mut layouts {
                        let reference =
                            cull_core::cpu::classify(format, &l.bytes, scene.bounds, &frusta[0]).unwrap();
                        visible = reference.visible.len() as u64;
                        for by_cells in [false, true] {
                            cull(&ctx, &culler, l, &target, &params, by_cells);
                            let got = survivors(&ctx, &culler, args.output, &target, 0, &l.bytes);
                            if let Err(e) = reference.check(&got) {
                                eprintln!("{variant:?} {format:?} n={n} {} cells={by_cells}: {e}", l.name);
                                wrong = true;
                            }
                            if by_cells {
                                l.kept = l.cells.read_kept(&ctx.device, &ctx.queue).unwrap();
                            }
                        }
                    }
                    let read_bytes = n as u64 * format.stride();
                    let copy_bytes = read_bytes + visible * args.output.stride(format);
                    let copy = roofline.copy_job(
                        &ctx,
                        layouts[0].input.buffer(),
                        target.output_buffer(),
                        copy_bytes / 2,
                    );
                    roofline.warm_up(&ctx, &copy, std::time::Duration::from_millis(args.warm_ms));
                    let mut copies = Vec::new();
                    for round in 0..3 + args.runs {
                        for j in 0..4 {
                            let k = (j + round) % 4;
                            let l = &mut layouts[k / 2];
                            let by_cells = k % 2 == 1;
                            let t = cull(&ctx, &culler, l, &target, &params, by_cells);
                            let c = roofline.time_copy(&ctx, &copy);
                            if round >= 3 {
                                let total = t.total.as_secs_f64() * 1e6;
                                if by_cells {
                                    l.by_cells.push(total);
                                    l.cell_pass.push(us(t.cells));
                                    // The cull's own passes: one, or
                                    // Hillis-Steele's vote, scans and
                                    // compaction.
                                    let passes = [t.vote, t.scan, t.compact, t.fused];
                                    l.cull_pass
                                        .push(us(passes.into_iter().flatten().reduce(|a, b| a + b)));
                                } else {
                                    l.flat.push(total);
                                }
                                copies.push(c);
                            }
                        }
                    }
                    let copy_us = median(copies);
                    let cells = layout.cells();
                    for l in layouts {
                        let flat = median(l.flat);
                        let by_cells = median(l.by_cells);
                        let (cell_pass, cull_pass) = (median(l.cell_pass), median(l.cull_pass));
                        let (pick, picked) = if l.picks_cells {
                            ("cells", by_cells)
                        } else {
                            ("flat", flat)
                        };
                        let cell_bytes = bounds_read(variant, cells)
                            + (l.kept as u64 * culler.tile_len() as u64).min(n as u64) * format.stride();
                        rows.push(format!(
                            "| {} | {} | {} | {:.0}% | {} | {flat:.1} | {by_cells:.1} ({cell_pass:.1} + {cull_pass:.1}) | **{:.2}×** | {pick} | {:.2}× | {:.1}% | {:.1} | {:.1} | {:.2} | {:.2} |",
                            format.name(),
                            variant.name(),
                            n,
                            fraction * 100.0,
                            l.name,
                            flat / by_cells,
                            flat / picked,
                            100.0 * l.kept as f64 / cells as f64,
                            read_bytes as f64 / 1e6,
                            cell_bytes as f64 / 1e6,
                            flat / copy_us,
                            by_cells / copy_us,
                        ));
                        eprintln!("{}", rows.last().unwrap());
                    }
                }
            }
        }
    }
    println!(
        "Device: {device_line}. Output: {:?}; one view; times are medians of {} interleaved runs; \
         the copy moves the flat cull's bytes (every instance read, the survivors written).\n",
        args.output, args.runs,
    );
    if !field_rows.is_empty() {
        println!(
            "A field seen by a moving camera: {FRAMES} frames along a path, times summed over them (each \
             frame's median of {} interleaved runs). Whole cells lie inside the view: the single-pass \
             variants keep their instances without testing them (counted by the CPU mirror, \
             CellLayout::whole_cells).\n",
            args.runs
        );
        println!(
            "| format | variant | n | camera | visible (mean) | flat µs | by cells µs | flat / cells | frames by cells (the pick) | flat / pick | cells kept (whole) (mean) | MB read flat | MB read by cells (mean) | flat × copy | cells × copy |"
        );
        println!("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for row in &field_rows {
            println!("{row}");
        }
        println!();
    }
    if rows.is_empty() {
        if wrong {
            eprintln!("some culls disagreed with the CPU reference");
            std::process::exit(1);
        }
        return;
    }
    println!("A random scene, sorted into cells and unsorted:\n");
    println!(
        "| format | variant | n | visible | layout | flat µs | by cells µs (cell pass + cull) | flat / cells | the pick | flat / pick | cells kept | MB read flat | MB read by cells | flat × copy | cells × copy |"
    );
    println!("|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    if wrong {
        eprintln!("some culls disagreed with the CPU reference");
        std::process::exit(1);
    }
}

/// A camera over a field (`--scene field`).
#[derive(Clone, Copy, Debug)]
enum FieldCamera {
    /// Looking down from the height where about this fraction is in view.
    Above(f32),
    /// At eye height looking across, with levels of detail and a cut-off.
    Ground,
}

/// The field's half side: one instance per 4 m².
fn field_half_side(n: usize) -> f32 {
    (n as f32).sqrt()
}

/// `n` instances on a flat square field (their mesh a unit sphere one
/// metre up), in a seeded random order.
fn field(n: usize) -> Scene {
    let half = field_half_side(n);
    let mut rng = cull_core::scene::SceneRng::new(n as u64 ^ 0xf1e1d);
    let instances = (0..n)
        .map(|_| cull_core::Instance {
            position: glam::Vec3::new(
                rng.range(-half, half),
                rng.range(0.0, 0.5),
                rng.range(-half, half),
            ),
            rotation: rng.rotation(),
            scale: rng.range(0.5, 1.5),
        })
        .collect();
    Scene {
        clip_from_world: glam::Mat4::IDENTITY,
        bounds: cull_core::Sphere::new(glam::Vec3::new(0.0, 1.0, 0.0), 1.0),
        instances,
    }
}

/// Frame `k`'s views of `camera` flying over a field of `n`: the frustum,
/// or (ground) its four levels of detail.
fn field_views(n: usize, camera: FieldCamera, k: usize) -> Vec<cull_core::Frustum> {
    let half = field_half_side(n);
    let t = k as f32 / (FRAMES - 1) as f32;
    let projection = CAMERA.projection();
    match camera {
        FieldCamera::Above(fraction) => {
            // Straight down a perspective camera of fov 1 rad and 16:9 sees
            // about 2.12·h² of the ground.
            let height = (fraction * 4.0 * half * half / 2.12).sqrt();
            let eye = glam::Vec3::new(-0.5 * half + t * half, height, -0.3 * half + 0.6 * t * half);
            let yaw = t * 1.5;
            let look = glam::Vec3::new(0.25 * yaw.cos(), -1.0, 0.25 * yaw.sin());
            let view = glam::Mat4::look_to_rh(eye, look, glam::Vec3::Y);
            vec![cull_core::Frustum::from_clip_from_world(projection * view, None).unwrap()]
        }
        FieldCamera::Ground => {
            let eye = glam::Vec3::new(-0.6 * half + 1.2 * t * half, 2.0, -0.2 * half + 0.4 * t * half);
            let yaw = 0.3 + t * 2.5;
            let look = glam::Vec3::new(yaw.cos(), -0.05, yaw.sin());
            let view = glam::Mat4::look_to_rh(eye, look, glam::Vec3::Y);
            let frustum = cull_core::Frustum::from_clip_from_world(projection * view, None).unwrap();
            let metric = cull_core::SizeMetric {
                origin: eye,
                scale: projection.y_axis.y,
                perspective: true,
            };
            // A unit sphere is culled past about 400 m.
            frustum.detail_levels(metric, &[0.1, 0.03, 0.01, 0.0046]).unwrap()
        }
    }
}

/// One field row: the camera's path culled flat and by cells, every frame
/// checked against the CPU reference, then timed.
#[allow(clippy::too_many_arguments)]
fn field_row(
    ctx: &cull_core::GpuContext,
    roofline: &Roofline,
    culler: &Culler,
    args: &Args,
    n: usize,
    camera: FieldCamera,
    wrong: &mut bool,
) -> String {
    let format = culler.format();
    let variant = culler.variant();
    let scene = field(n).fit(format);
    let bytes = format.encode(&scene.instances).unwrap();
    let (sorted, layout) = CellLayout::sort(format, &bytes, scene.bounds, culler.tile_len()).unwrap();
    let l = Layout::upload(ctx, culler, "sorted", sorted, &layout.bounds, false);
    let frames: Vec<Vec<cull_core::Frustum>> = (0..FRAMES).map(|k| field_views(n, camera, k)).collect();
    let views = frames[0].len() as u32;
    let target = CullTarget::with_views(&ctx.device, culler, n as u32, views).unwrap();
    // Exact sets, every frame and view, flat and by cells; the cells kept
    // and the survivors per frame.
    let mut visible = Vec::new();
    let mut kept = Vec::new();
    let mut whole = 0u32;
    for frusta in &frames {
        whole += layout.whole_cells(frusta, n as u32);
        let params = Params {
            frusta,
            local_bounds: scene.bounds,
            count: n as u32,
        };
        let mut frame_visible = 0u64;
        for by_cells in [false, true] {
            cull(ctx, culler, &l, &target, &params, by_cells);
            for (view, frustum) in frusta.iter().enumerate() {
                let reference = cull_core::cpu::classify(format, &l.bytes, scene.bounds, frustum).unwrap();
                let got = survivors(ctx, culler, args.output, &target, view as u32, &l.bytes);
                if let Err(e) = reference.check(&got) {
                    eprintln!(
                        "{variant:?} {format:?} n={n} field {camera:?} view {view} cells={by_cells}: {e}"
                    );
                    *wrong = true;
                }
                if by_cells {
                    frame_visible += got.len() as u64;
                }
            }
        }
        visible.push(frame_visible);
        kept.push(l.cells.read_kept(&ctx.device, &ctx.queue).unwrap());
    }
    let mean_visible = visible.iter().sum::<u64>() as f64 / FRAMES as f64;
    let read_bytes = n as u64 * format.stride();
    let copy_bytes = read_bytes + mean_visible as u64 * args.output.stride(format);
    let copy = roofline.copy_job(ctx, l.input.buffer(), target.output_buffer(), copy_bytes / 2);
    roofline.warm_up(ctx, &copy, std::time::Duration::from_millis(args.warm_ms));
    let (mut flat, mut by_cells, mut picked, mut copies) = (0.0, 0.0, 0.0, Vec::new());
    let mut frames_by_cells = 0;
    for frusta in &frames {
        let params = Params {
            frusta,
            local_bounds: scene.bounds,
            count: n as u32,
        };
        let (mut f, mut c) = (Vec::new(), Vec::new());
        for round in 0..3 + args.runs {
            for cells in [round % 2 == 0, round % 2 == 1] {
                let t = cull(ctx, culler, &l, &target, &params, cells).total.as_secs_f64() * 1e6;
                let copy_us = roofline.time_copy(ctx, &copy);
                if round >= 3 {
                    if cells { &mut c } else { &mut f }.push(t);
                    copies.push(copy_us);
                }
            }
        }
        let (f, c) = (median(f), median(c));
        flat += f;
        by_cells += c;
        if layout.leaves_unread(format, frusta, n as u32, pick_threshold(culler.variant())) {
            frames_by_cells += 1;
            picked += c;
        } else {
            picked += f;
        }
    }
    let copy_us = median(copies) * FRAMES as f64;
    let cell_count = layout.cells();
    let mean_kept = kept.iter().map(|&k| k as f64).sum::<f64>() / FRAMES as f64;
    let mean_whole = whole as f64 / FRAMES as f64;
    let cell_bytes = bounds_read(culler.variant(), cell_count) as f64
        + (mean_kept * culler.tile_len() as f64).min(n as f64) * format.stride() as f64;
    let camera_name = match camera {
        FieldCamera::Above(f) => format!("above ({:.0}%)", f * 100.0),
        FieldCamera::Ground => "ground, 4 levels".into(),
    };
    format!(
        "| {} | {} | {n} | {camera_name} | {:.2}% | {flat:.1} | {by_cells:.1} | **{:.2}×** | {frames_by_cells}/{FRAMES} | {:.2}× | {:.1}% ({:.1}%) | {:.1} | {:.1} | {:.2} | {:.2} |",
        format.name(),
        variant.name(),
        100.0 * mean_visible / n as f64,
        flat / by_cells,
        flat / picked,
        100.0 * mean_kept / cell_count as f64,
        100.0 * mean_whole / cell_count as f64,
        read_bytes as f64 / 1e6,
        cell_bytes / 1e6,
        flat / copy_us,
        by_cells / copy_us,
    )
}
