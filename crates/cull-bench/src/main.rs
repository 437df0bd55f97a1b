//! cull-bench: every compiled-in scan variant x instance format x size x
//! visible fraction, timed with GPU timestamps against a copy kernel over
//! the same bytes and an empty dispatch, measured in the same run.
//!
//! ```text
//! cargo run --release -p cull-bench -- --out bench-out
//! cargo run --release -p cull-bench -- --sizes 1e3,1e5 --fractions 0.25 --runs 5 --out bench-out
//! ```
//!
//! Prints a markdown table last; writes `bench.json`, `bench.md` and one SVG
//! plot per format to `--out`.

mod flags;
mod forms;
mod local_center;
mod report;
mod roofline;

use argh::FromArgs;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, CullerDesc, GpuContext, Instance, InstanceFormat, OutputKind,
    ScanVariant, Tuning,
};
use forms::{forms, label};
use rayon::prelude::*;
use roofline::{Roofline, median};
use std::path::PathBuf;
use std::time::Instant;

/// Times each compiled-in scan variant, instance format, size and visible
/// fraction against a copy kernel over the same bytes, measured in the same run.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} --out bench-out",
    example = "{command_name} --sizes 1e3,1e5 --fractions 0.25 --runs 5 --out bench-out",
    example = "{command_name} --replot bench.json --out DIR",
    note = "Prints a markdown table last; with --out, writes bench.json, bench.md and one SVG plot per format there."
)]
struct Args {
    /// instance counts, comma-separated, in any floating-point notation
    /// (default 1e3,1e4,1e5,1e6,4e6,16e6,32e6)
    #[argh(
        option,
        arg_name = "n,..",
        from_str_fn(flags::sizes),
        default = "vec![1_000, 10_000, 100_000, 1_000_000, 4_000_000, 16_000_000, 32_000_000]"
    )]
    sizes: flags::Sizes,
    /// visible fractions, comma-separated (default 0.05,0.25,1)
    #[argh(
        option,
        arg_name = "f,..",
        from_str_fn(flags::fractions),
        default = "vec![0.05, 0.25, 1.0]"
    )]
    fractions: flags::Fractions,
    /// scan variants by name, comma-separated, or all (the default: every
    /// compiled-in one)
    #[argh(
        option,
        arg_name = "all|name,..",
        from_str_fn(variants),
        default = "ScanVariant::compiled().collect()"
    )]
    variants: flags::Variants,
    /// instance formats, comma-separated (matrix, posquat, packed16), or all
    /// (the default)
    #[argh(
        option,
        arg_name = "all|name,..",
        from_str_fn(formats),
        default = "InstanceFormat::ALL.to_vec()"
    )]
    formats: flags::Formats,
    /// what the culls write: instances (copies, the default) or indices
    #[argh(
        option,
        arg_name = "instances|indices",
        from_str_fn(flags::output),
        default = "OutputKind::Instances"
    )]
    output: OutputKind,
    /// timed rounds per cell (default 25)
    #[argh(option, default = "25")]
    runs: usize,
    /// milliseconds of sustained copies before each cell's timed rounds
    /// (default 500)
    #[argh(option, arg_name = "ms", default = "500")]
    warm_ms: u64,
    /// mebibytes an untimed copy reads (and writes) between two timed kernels, so
    /// that each starts with none of its bytes in the L2 cache; 0 keeps
    /// whatever the kernel before it left there (default 128)
    #[argh(
        option,
        long = "l2-flush-mb",
        arg_name = "mib",
        default = "roofline::DEFAULT_L2_FLUSH_MIB"
    )]
    l2_flush_mib: u64,
    /// the cullers' threads per workgroup: a power of two from 32 to 256
    /// (the default)
    #[argh(option, arg_name = "n")]
    workgroup_size: Option<u32>,
    /// whether subgroup-ballot writes instance copies wider than 16 bytes
    /// a dense row at a time: on, off, or auto (the default: on for 64 B
    /// instances, off for 32 B ones)
    #[argh(option, arg_name = "auto|on|off", from_str_fn(row_writes), default = "None")]
    row_writes: Option<bool>,
    /// where the mesh's bounding sphere sits in its own space: offset (the
    /// default: every vote rotates it) or origin (the common case, which the
    /// formats' votes take a shorter path for)
    #[argh(
        option,
        long = "local-center",
        arg_name = "offset|origin",
        from_str_fn(local_center::parse),
        default = "false"
    )]
    centred: bool,
    /// the folder to write bench.json, bench.md and the plots to (with
    /// --replot, default the current one)
    #[argh(option, arg_name = "dir")]
    out: Option<PathBuf>,
    /// plot and tabulate a bench.json again instead of measuring (no GPU
    /// needed)
    #[argh(option, arg_name = "bench.json")]
    replot: Option<PathBuf>,
}

impl Args {
    /// Culler tuning for the whole run (`--workgroup-size`, `--row-writes`).
    fn tuning(&self) -> Tuning {
        Tuning {
            workgroup_size: self.workgroup_size,
            row_writes: self.row_writes,
            ..Tuning::default()
        }
    }
}

/// `--variants`: names, or `all` for every compiled-in one.
fn variants(value: &str) -> Result<Vec<ScanVariant>, String> {
    match value {
        "all" => Ok(ScanVariant::compiled().collect()),
        v => flags::variants(v),
    }
}

/// `--formats`: names, or `all`.
fn formats(value: &str) -> Result<Vec<InstanceFormat>, String> {
    match value {
        "all" => Ok(InstanceFormat::ALL.to_vec()),
        f => flags::formats(f),
    }
}

/// `--row-writes on|off|auto` ([`Tuning::row_writes`]).
fn row_writes(value: &str) -> Result<Option<bool>, String> {
    match value {
        "on" => Ok(Some(true)),
        "off" => Ok(Some(false)),
        "auto" => Ok(None),
        v => Err(format!("--row-writes {v}: on, off or auto")),
    }
}

/// One measured cell of the table.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    pub variant: String,
    pub format: String,
    pub n: usize,
    pub visible: u32,
    pub gpu_us: f64,
    pub gpu_min_us: f64,
    pub gpu_max_us: f64,
    pub bytes_moved: u64,
    /// The copy kernel over the same number of bytes (read + written).
    pub copy_us: f64,
    pub launch_us: f64,
    pub cpu_us: f64,
    pub correct: bool,
}

impl Cell {
    pub fn ginst_per_s(&self) -> f64 {
        self.n as f64 / self.gpu_us / 1e3
    }
    /// The copy kernel's speed over this cell's bytes (read + written): the
    /// state of the memory system during this cell.
    pub fn copy_tb_per_s(&self) -> f64 {
        self.bytes_moved as f64 / self.copy_us / 1e6
    }

    pub fn roofline_pct(&self) -> f64 {
        100.0 * self.copy_us / self.gpu_us
    }
}

/// An order-independent fingerprint of a set of instances: count and the
/// wrapping sum of a hash of each one's bytes.
fn fingerprint<'a>(elements: impl ParallelIterator<Item = &'a [u8]>) -> (u64, u64) {
    elements
        .map(|e| {
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            for w in e.chunks_exact(4) {
                h = (h ^ u32::from_le_bytes(w.try_into().unwrap()) as u64).wrapping_mul(0x1000_0000_01b3);
                h ^= h >> 29;
            }
            (1, h)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.wrapping_add(b.1)))
}

/// The scene's instances in `format`; a format without scale gets them at
/// scale 1 (the random scenes' scales only vary what is visible).
fn encode_par(format: InstanceFormat, scene: &Scene) -> Vec<u8> {
    scene
        .instances
        .par_chunks(1 << 16)
        .map(|c| {
            let fitted: Vec<Instance> = c.iter().map(|&i| format.fit(i)).collect();
            format
                .encode(&fitted)
                .expect("random scenes are finite, at scale 1 where the format has none")
        })
        .flatten_iter()
        .collect()
}

fn main() {
    let args: Args = argh::from_env();
    if let Some(json) = &args.replot {
        replot(json, args.out.as_deref().unwrap_or(std::path::Path::new(".")));
        return;
    }
    let ctx = roofline::timed_context();
    let device_line = ctx.describe();
    eprintln!("device: {device_line}");
    eprintln!("CPU threads for the CPU cull: {}", rayon::current_num_threads());
    let variants: Vec<ScanVariant> = args
        .variants
        .iter()
        .copied()
        .filter(|v| v.is_available(ctx.device.features()))
        .collect();
    for v in &args.variants {
        if !variants.contains(v) {
            eprintln!("skipping {v:?}: not available on this device");
        }
    }
    // Every buffer is allocated once, at the largest size, before any
    // measurement: every cell of a format then runs in the same buffers, and
    // none pays for allocations.
    let max_buffer = ctx.device.limits().max_buffer_size;
    let max_n = args.sizes.iter().copied().max().unwrap_or(0).max(1);
    let capacity = |format: InstanceFormat| {
        let stride = format.stride().max(args.output.stride(format));
        (max_n as u64).min(max_buffer / stride) as u32
    };
    let mut setups = Vec::new();
    for &format in &args.formats {
        let cap = capacity(format);
        let input = CullInput::new(&ctx.device, format, cap).unwrap();
        let cullers: Vec<(Culler, CullTarget)> = forms(&variants, ctx.device.features(), args.tuning())
            .into_iter()
            .map(|(variant, tuning)| {
                let desc = CullerDesc {
                    variant: Some(variant),
                    allow_fallback: false,
                    format,
                    output: args.output,
                    tuning,
                    ..Default::default()
                };
                let culler = Culler::new(&ctx.device, &ctx.queue, &desc).unwrap();
                let target = CullTarget::new(&ctx.device, &culler, cap).unwrap();
                (culler, target)
            })
            .collect();
        setups.push((format, cap, input, cullers));
    }
    let roofline = Roofline::new(&ctx).with_l2_flush(&ctx, args.l2_flush_mib);
    let launch_us = roofline.launch_us(&ctx, 50);
    eprintln!("empty dispatch: {launch_us:.2} us");

    let mut cells = Vec::new();
    for &fraction in &args.fractions {
        for &n in &args.sizes {
            let t = Instant::now();
            let mut scene = Scene::random(n as u64 ^ 0x5eed, n, CameraKind::InfiniteReverseZ, Some(fraction));
            local_center::apply(&mut scene, args.centred);
            let frustum = scene.frustum().unwrap();
            eprintln!(
                "n={n} visible~{fraction}: scene in {:.1}s",
                t.elapsed().as_secs_f32()
            );
            for (format, cap, input, cullers) in &setups {
                let format = *format;
                if n > *cap as usize {
                    eprintln!("  {format:?}: {n} instances exceed the largest buffer; skipped");
                    continue;
                }
                let bytes = encode_par(format, &scene);
                let reference = cull_core::cpu::classify(format, &bytes, scene.bounds, &frustum)
                    .expect("random scenes have valid bounds");
                // The multi-threaded CPU cull of the same scene.
                let cpu_runs = if n >= 4_000_000 { 3 } else { 9 };
                let cpu_us = median(
                    (0..cpu_runs)
                        .map(|_| {
                            let t = Instant::now();
                            std::hint::black_box(
                                cull_core::cpu::cull(format, &bytes, scene.bounds, &frustum)
                                    .expect("random scenes have valid bounds"),
                            );
                            t.elapsed().as_secs_f64() * 1e6
                        })
                        .collect(),
                );
                let stride = format.stride() as usize;
                let expected = fingerprint(reference.visible.par_iter().map(|&i| {
                    let i = i as usize;
                    &bytes[i * stride..(i + 1) * stride]
                }));
                input.write(&ctx.queue, 0, &bytes).unwrap();
                // Every culler is checked first, then all are timed in
                // interleaved rounds (each culler once per round, with the
                // copy over its own buffers, from a rotating start), so that
                // a change of the GPU's speed during the cell slows every
                // variant alike.
                let run = |culler: &Culler, target: &CullTarget| {
                    let mut encoder = ctx.device.create_command_encoder(&Default::default());
                    let frusta = std::slice::from_ref(&frustum);
                    let request = CullRequest::new(input, target, frusta, scene.bounds, n as u32);
                    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
                    ctx.queue.submit([encoder.finish()]);
                    target.read_timings(&ctx.device).unwrap()
                };
                let mut timed = Vec::new();
                for (culler, target) in cullers {
                    let variant = culler.variant();
                    run(culler, target);
                    let visible = target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
                    let correct = check(
                        &ctx,
                        target,
                        args.output,
                        format,
                        &bytes,
                        &reference,
                        expected,
                        visible,
                    );
                    if !correct {
                        eprintln!("  {variant:?} {format:?} n={n}: WRONG OUTPUT, not timed");
                    }
                    let out_stride = args.output.stride(format);
                    let bytes_moved = n as u64 * format.stride() + visible as u64 * out_stride + 4;
                    let copy =
                        roofline.copy_job(&ctx, input.buffer(), target.output_buffer(), bytes_moved / 2);
                    let cell = Cell {
                        variant: label(culler),
                        format: format.name().into(),
                        n,
                        visible,
                        gpu_us: f64::NAN,
                        gpu_min_us: f64::NAN,
                        gpu_max_us: f64::NAN,
                        bytes_moved,
                        copy_us: f64::NAN,
                        launch_us,
                        cpu_us,
                        correct,
                    };
                    timed.push((culler, target, copy, cell, Vec::new(), Vec::new(), Vec::new()));
                }
                // Sustained work first: the GPU's clock drops while the CPU
                // builds the scene and checks the output (see warm_up).
                if let Some((_, _, copy, ..)) = timed.first() {
                    roofline.warm_up(&ctx, copy, std::time::Duration::from_millis(args.warm_ms));
                }
                const WARM_UP: usize = 3;
                for round in 0..WARM_UP + args.runs {
                    for j in 0..timed.len() {
                        let k = (j + round) % timed.len();
                        let (culler, target, copy, cell, cull_us, copy_us, vote_us) = &mut timed[k];
                        if !cell.correct {
                            continue;
                        }
                        roofline.flush_l2(&ctx);
                        let t = run(culler, target);
                        roofline.flush_l2(&ctx);
                        let c = roofline.time_copy(&ctx, copy);
                        if round >= WARM_UP {
                            cull_us.push(t.total.as_secs_f64() * 1e6);
                            copy_us.push(c);
                            // The vote pass of a variant with several passes.
                            if let Some(vote) = t.vote {
                                vote_us.push(vote.as_secs_f64() * 1e6);
                            }
                        }
                    }
                }
                for (_, _, _, mut cell, mut cull_us, copy_us, vote_us) in timed {
                    if cell.correct {
                        cull_us.sort_by(f64::total_cmp);
                        cell.gpu_us = cull_us[cull_us.len() / 2];
                        cell.gpu_min_us = cull_us[0];
                        cell.gpu_max_us = cull_us[cull_us.len() - 1];
                        cell.copy_us = median(copy_us);
                    }
                    eprintln!(
                        "  {:16} {:8} {:>9} vis {:>5.1}%  {:>9.1} us  {:>5.1}% roofline  cpu {:>9.1} us",
                        cell.variant,
                        format.name(),
                        n,
                        100.0 * cell.visible as f64 / n.max(1) as f64,
                        cell.gpu_us,
                        cell.roofline_pct(),
                        cpu_us
                    );
                    if !vote_us.is_empty() {
                        eprintln!(
                            "  {:16} vote pass {:>9.1} us (median)",
                            cell.variant,
                            median(vote_us)
                        );
                    }
                    cells.push(cell);
                }
            }
        }
    }
    let mesh = local_center::describe(args.centred);
    let cache = cache_line(args.l2_flush_mib);
    let table = format!(
        "{}\n{}",
        report::markdown(&cells, &format!("{device_line}; {mesh}; {cache}"), launch_us),
        report::ordered_summary(&cells)
    );
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("bench.md"), &table).unwrap();
        let json = serde_json::json!({ "device": device_line, "l2_flush_mib": args.l2_flush_mib, "launch_us": launch_us, "cells": cells });
        std::fs::write(
            dir.join("bench.json"),
            serde_json::to_string_pretty(&json).unwrap(),
        )
        .unwrap();
        for format in &args.formats {
            if let Err(e) = report::plot(&cells, *format, &device_line, dir) {
                eprintln!("plot for {format:?} failed: {e}");
            }
        }
    }
    println!("{table}");
    if cells.iter().any(|c| !c.correct) {
        eprintln!("some variants produced wrong output");
        std::process::exit(1);
    }
}

/// Whether the survivors equal the CPU reference: a fingerprint first, the
/// full exact-set comparison if it differs (or borderline instances exist).
#[allow(clippy::too_many_arguments)]
fn check(
    ctx: &GpuContext,
    target: &CullTarget,
    output: OutputKind,
    format: InstanceFormat,
    bytes: &[u8],
    reference: &cull_core::cpu::Reference,
    expected: (u64, u64),
    visible: u32,
) -> bool {
    let out = target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    let stride = format.stride() as usize;
    let survivors: Vec<u32> = match output {
        OutputKind::Indices => bytemuck::pod_collect_to_vec(&out),
        OutputKind::Instances => {
            if reference.borderline.is_empty() && fingerprint(out.par_chunks_exact(stride)) == expected {
                return true;
            }
            let index: std::collections::HashMap<&[u8], u32> = bytes
                .chunks_exact(stride)
                .enumerate()
                .map(|(i, c)| (c, i as u32))
                .collect();
            out.chunks_exact(stride)
                .map(|c| index.get(c).copied().unwrap_or(u32::MAX))
                .collect()
        }
    };
    match reference.check(&survivors) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("  mismatch: {e}");
            false
        }
    }
}

/// Redraws the plots and the table of an earlier run's `bench.json` (no GPU needed).
fn replot(json: &std::path::Path, dir: &std::path::Path) {
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
    let value: serde_json::Value = serde_json::from_str(&text).expect("bench.json");
    let cells: Vec<Cell> = serde_json::from_value(value["cells"].clone()).expect("bench.json cells");
    let device = value["device"].as_str().unwrap_or("unknown device");
    // Runs before the flag (2026-11-24) kept the L2 between timed kernels.
    let cache = cache_line(value["l2_flush_mib"].as_u64().unwrap_or(0));
    std::fs::create_dir_all(dir).unwrap();
    for format in InstanceFormat::ALL {
        if let Err(e) = report::plot(&cells, format, device, dir) {
            eprintln!("plot for {format:?} failed: {e}");
        }
    }
    println!(
        "{}\n{}",
        report::markdown(
            &cells,
            &format!("{device}; {cache}"),
            value["launch_us"].as_f64().unwrap_or(f64::NAN)
        ),
        report::ordered_summary(&cells)
    );
}

/// How the timed kernels found the L2 (`--l2-flush-mb`), for the table's header.
fn cache_line(l2_flush_mib: u64) -> String {
    match l2_flush_mib {
        0 => "L2 not flushed between timed kernels".to_string(),
        mib => format!("L2 flushed before each timed kernel (an untimed copy of {mib} MiB)"),
    }
}
