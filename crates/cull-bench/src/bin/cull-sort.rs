//! cull-sort: what sorting a view's survivors back to front costs
//! (`DepthSorter`, for blended draws), against a copy of the sort's pairs
//! (8 bytes a survivor) in the same run. Every instance survives the cull
//! (a grid in front of the camera, in index order, at random depths); each
//! timed sort follows an untimed cull that writes the list afresh.
//!
//! ```text
//! cull-sort --sizes 10000,100000,1000000 --runs 20
//! ```

#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench, which uses all of it
mod roofline;

use argh::FromArgs;
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, CullerDesc, DepthSortView, DepthSorter, Frustum, Instance,
    InstanceFormat, OutputKind, Sphere,
};
use glam::{Mat4, Vec3, Vec4};
use roofline::{Roofline, median};

/// Times the depth sort of every survivor of a view, at several sizes.
#[derive(FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Args {
    /// instance counts, comma-separated (default 10000,100000,1000000,4000000)
    #[argh(option, default = "String::from(\"10000,100000,1000000,4000000\")")]
    sizes: String,
    /// timed sorts per size; the median is reported (default 20)
    #[argh(option, default = "20")]
    runs: usize,
    /// print one JSON object per size instead of the table
    #[argh(switch)]
    json: bool,
}

/// `n` instances on a grid filling a 90-degree view down −Z, at depths from
/// 2 to 1000 in a scrambled order.
fn instances(n: u32) -> Vec<Instance> {
    let side = (n as f32).sqrt().ceil() as u32;
    (0..n)
        .map(|i| {
            let depth = 2.0 + (i.wrapping_mul(2_654_435_761) % 998_000) as f32 / 1000.0;
            let u = (i % side) as f32 / side as f32 - 0.5;
            let v = (i / side) as f32 / side as f32 - 0.5;
            Instance::from_position(Vec3::new(u * depth, v * depth, -depth))
        })
        .collect()
}

fn main() {
    let args: Args = argh::from_env();
    let sizes: Vec<u32> = args
        .sizes
        .split(',')
        .map(|s| {
            s.trim().parse().unwrap_or_else(|_| {
                eprintln!("--sizes: `{s}` is not a count");
                std::process::exit(2)
            })
        })
        .collect();
    let ctx = roofline::timed_context();
    let roofline = Roofline::new(&ctx);
    let desc = CullerDesc {
        format: InstanceFormat::PosQuat,
        output: OutputKind::Indices,
        ..Default::default()
    };
    let culler = Culler::new(&ctx.device, &ctx.queue, &desc).expect("a culler");
    let sorter = DepthSorter::new(&ctx.device, &culler, Default::default()).expect("a sorter");
    let camera = Frustum::from_clip_from_world(Mat4::perspective_infinite_reverse_rh(1.6, 1.0, 0.1), None)
        .expect("a frustum");
    let order = DepthSortView {
        view_from_world_row_2: Vec4::new(0.0, 0.0, 1.0, 0.0),
        local_center: Vec3::ZERO,
    };
    if !args.json {
        println!("depth sort on {}", ctx.describe());
        println!("| survivors | sort µs | copy of the pairs µs | sort / copy | ns per survivor |");
        println!("|---:|---:|---:|---:|---:|");
    }
    for n in sizes {
        let input = CullInput::new(&ctx.device, culler.format(), n).expect("an input");
        input
            .write_instances(&ctx.queue, 0, &instances(n))
            .expect("instances");
        let target = CullTarget::new(&ctx.device, &culler, n).expect("a target");
        let scratch = sorter.scratch(&ctx.device, &target).expect("the sort's scratch");
        let bounds = Sphere::new(Vec3::ZERO, 0.5);
        let request = || CullRequest::new(&input, &target, std::slice::from_ref(&camera), bounds, n);
        let times: Vec<f64> = (0..args.runs + 2)
            .map(|_| {
                let mut encoder = ctx.device.create_command_encoder(&Default::default());
                culler.cull(&mut encoder, &ctx.queue, request()).expect("a cull");
                ctx.queue.submit([encoder.finish()]);
                roofline.timed(&ctx, |pass| {
                    sorter
                        .sort_in_pass(pass, &ctx.queue, (&input, &target), &scratch, 0, &order)
                        .expect("a sort")
                })
            })
            .skip(2)
            .collect();
        let visible = target
            .read_visible_count(&ctx.device, &ctx.queue)
            .expect("a count");
        let pairs = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n as u64 * 8,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let copy_dst = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n as u64 * 8,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let job = roofline.copy_job(&ctx, &pairs, &copy_dst, n as u64 * 8);
        let copy = median((0..args.runs).map(|_| roofline.time_copy(&ctx, &job)).collect());
        let sort = median(times);
        let per = sort * 1000.0 / visible.max(1) as f64;
        if args.json {
            println!(
                "{{\"survivors\":{visible},\"sort_us\":{sort:.1},\"copy_us\":{copy:.2},\"device\":\"{}\"}}",
                ctx.describe()
            );
        } else {
            println!(
                "| {visible} | {sort:.1} | {copy:.2} | {:.1} | {per:.2} |",
                sort / copy
            );
        }
    }
}
