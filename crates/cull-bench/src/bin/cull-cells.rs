//! cull-cells: culling by cells (`Culler::cull_views_in_cells`) against the
//! flat cull (`Culler::cull_views`) of the same instances, with GPU
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
//! Every cull's survivors are checked against the CPU reference first, as
//! exact sets. The table gives the bytes each cull reads: every instance
//! for the flat cull; the cell spheres and the kept cells' instances by
//! cells.
//!
//! ```text
//! cargo run --release -p cull-bench --bin cull-cells -- --sizes 1e6,16e6 --fractions 0.01,0.05
//! ```

#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench
mod roofline;

use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CellIndex, CellLayout, CullInput, CullTarget, CullViewsParams, Culler, CullerDesc, InstanceFormat,
    OutputKind, ScanVariant,
};
use roofline::{Roofline, median, timed_context};

const CAMERA: CameraKind = CameraKind::InfiniteReverseZ;

struct Args {
    sizes: Vec<usize>,
    fractions: Vec<f32>,
    variants: Vec<ScanVariant>,
    formats: Vec<InstanceFormat>,
    output: OutputKind,
    runs: usize,
    warm_ms: u64,
}

fn list<T>(value: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    value.split(',').map(parse).collect()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sizes: vec![1_000_000, 4_000_000, 16_000_000, 32_000_000],
        fractions: vec![0.01, 0.05, 0.25, 1.0],
        variants: vec![ScanVariant::SubgroupBallot],
        formats: vec![InstanceFormat::PosQuat],
        output: OutputKind::Indices,
        runs: 11,
        warm_ms: 500,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => {
                args.sizes = list(&value()?, |s| {
                    s.parse::<f64>()
                        .map(|x| x as usize)
                        .map_err(|e| format!("--sizes {s}: {e}"))
                })?
            }
            "--fractions" => {
                args.fractions = list(&value()?, |s| {
                    s.parse().map_err(|e| format!("--fractions {s}: {e}"))
                })?
            }
            "--variants" => {
                args.variants = list(&value()?, |s| {
                    ScanVariant::from_name(s).ok_or(format!("unknown variant {s}"))
                })?
            }
            "--formats" => {
                args.formats = list(&value()?, |s| {
                    InstanceFormat::from_name(s).ok_or(format!("unknown format {s}"))
                })?
            }
            "--output" => {
                args.output = match value()?.as_str() {
                    "indices" => OutputKind::Indices,
                    "instances" => OutputKind::Instances,
                    o => return Err(format!("--output {o}: instances or indices")),
                }
            }
            "--runs" => args.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--warm-ms" => args.warm_ms = value()?.parse().map_err(|e| format!("--warm-ms: {e}"))?,
            _ => {
                return Err("usage: cull-cells [--sizes 1e6,4e6,16e6,32e6] [--fractions 0.01,0.05,0.25,1] \
                     [--variants subgroup-ballot,..] [--formats posquat,packed16] [--output indices|instances] \
                     [--runs 11] [--warm-ms 500]"
                    .into());
            }
        }
    }
    Ok(args)
}

/// One layout of the batch on the GPU, culled flat and by cells.
struct Layout {
    name: &'static str,
    bytes: Vec<u8>,
    input: CullInput,
    cells: CellIndex,
    flat: Vec<f64>,
    by_cells: Vec<f64>,
    /// By cells: the cell pass's and the cull's own times.
    cell_pass: Vec<f64>,
    cull_pass: Vec<f64>,
    kept: u32,
    /// Whether `Culler::cull_views_by_cells_if_faster` would cull by cells.
    picks_cells: bool,
}

fn cull(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    layout: &Layout,
    target: &CullTarget,
    params: &CullViewsParams,
    by_cells: bool,
) -> cull_core::CullTimings {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    if by_cells {
        culler
            .cull_views_in_cells(
                &mut encoder,
                &ctx.queue,
                &layout.input,
                target,
                params,
                &layout.cells,
            )
            .unwrap();
    } else {
        culler
            .cull_views(&mut encoder, &ctx.queue, &layout.input, target, params)
            .unwrap();
    }
    ctx.queue.submit([encoder.finish()]);
    target.read_timings(&ctx.device).unwrap()
}

fn us(d: Option<std::time::Duration>) -> f64 {
    d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
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
        for &variant in &args.variants {
            let desc = CullerDesc {
                variant: Some(variant),
                allow_fallback: false,
                format,
                output: args.output,
                timestamps: true,
                ..Default::default()
            };
            let culler = Culler::new(&ctx.device, &ctx.queue, &desc).unwrap();
            if !culler.culls_cells() {
                eprintln!("skipping {variant:?}: it does not cull by cells");
                continue;
            }
            for &n in &args.sizes {
                for &fraction in &args.fractions {
                    let scene = Scene::random(n as u64 ^ 0xce11, n, CAMERA, Some(fraction)).fit(format);
                    let unsorted = format.encode(&scene.instances).unwrap();
                    let (sorted, layout) =
                        CellLayout::sort(format, &unsorted, scene.bounds, culler.tile_len()).unwrap();
                    let unsorted_spheres =
                        CellLayout::spheres_of(format, &unsorted, scene.bounds, culler.tile_len()).unwrap();
                    let frusta = [scene.frustum().unwrap()];
                    let upload = |name, bytes: Vec<u8>, spheres: &[[f32; 4]]| {
                        let picks_cells = CellLayout {
                            order: Vec::new(),
                            spheres: spheres.to_vec(),
                            cell_len: culler.tile_len(),
                        }
                        .pays_off(format, &frusta, n as u32);
                        let input = CullInput::new(&ctx.device, format, n as u32).unwrap();
                        input.write(&ctx.queue, 0, &bytes).unwrap();
                        let cells = CellIndex::new(&ctx.device, &culler, n as u32).unwrap();
                        cells.write_spheres(&ctx.queue, 0, spheres).unwrap();
                        Layout {
                            name,
                            bytes,
                            input,
                            cells,
                            flat: Vec::new(),
                            by_cells: Vec::new(),
                            cell_pass: Vec::new(),
                            cull_pass: Vec::new(),
                            kept: 0,
                            picks_cells,
                        }
                    };
                    let mut layouts = [
                        upload("sorted", sorted, &layout.spheres),
                        upload("unsorted", unsorted, &unsorted_spheres),
                    ];
                    let target = CullTarget::new(&ctx.device, &culler, n as u32).unwrap();
                    let params = CullViewsParams {
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
                            let count = target.read_view_count(&ctx.device, &ctx.queue, 0).unwrap();
                            let out = target
                                .read_view_output(&ctx.device, &ctx.queue, 0, count.min(n as u32))
                                .unwrap();
                            let got: Vec<u32> = match args.output {
                                OutputKind::Indices => bytemuck::pod_collect_to_vec(&out),
                                OutputKind::Instances => cull_core::cpu::copies_to_indices(
                                    format.stride() as usize,
                                    &l.bytes,
                                    &out,
                                ),
                            };
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
                                    l.cull_pass.push(us(t.fused));
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
                        let cell_bytes = cells as u64 * 16
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
