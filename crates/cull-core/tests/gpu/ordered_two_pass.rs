//! The two-pass ordered variant: exactly the stable compaction with tiny
//! tiles over several super-tiles of counts, chunks, surplus workgroups and
//! several views.

use crate::harness::*;
use cull_core::{InstanceFormat, OutputKind, ScanVariant, Tuning};

/// The two-pass ordered variant in each form: tiles of 128 instances (so
/// 100,003 instances are 782 tiles, over four super-tiles of counts),
/// chunks (small bindings) and a two-dimensional dispatch with surplus
/// workgroups in both passes, one view and six, both outputs, every format.
#[test]
fn two_pass_across_super_tiles_chunks_and_surplus_workgroups() {
    let ctx = gpu();
    let forms = two_pass_forms(ctx);
    assert_eq!(forms.len(), 2, "lavapipe has subgroups: both forms run");
    for (form, format) in forms
        .into_iter()
        .flat_map(|f| InstanceFormat::ALL.map(|format| (f, format)))
    {
        let small = Tuning {
            workgroup_size: Some(32),
            max_workgroups_per_dimension: Some(5),
            ..form
        };
        let chunked = Tuning {
            max_binding_size: Some(64 << 10),
            ..small
        };
        for (tuning, name) in [(small, "tiny tiles"), (chunked, "chunks")] {
            for output in [OutputKind::Indices, OutputKind::Instances] {
                let culler = culler(ctx, ScanVariant::OrderedTwoPass, format, output, tuning);
                let form = form_name(&culler);
                let chunk = culler.chunk_len() as usize;
                let sizes = if name == "chunks" {
                    vec![chunk - 3, 2 * chunk + 129]
                } else {
                    vec![0, 1, 127, 100_003]
                };
                for n in sizes {
                    let scene = edge_scene(n as u64 + 5, n, Camera::Perspective, format);
                    for repeat in 0..2 {
                        let survivors = run(ctx, &culler, &scene, n.max(1) as u32);
                        assert_ordered(
                            &format!("{form} {format:?} {name} {output:?} n={n} #{repeat}"),
                            &scene,
                            format,
                            &survivors,
                        );
                    }
                }
            }
            // Six views; with chunks, two (the output may span four bindings).
            let (n, count) = if name == "chunks" {
                let chunk = culler(
                    ctx,
                    ScanVariant::OrderedTwoPass,
                    format,
                    OutputKind::Indices,
                    tuning,
                )
                .chunk_len();
                (2 * chunk as usize - 5, 2)
            } else {
                (50_001, 6)
            };
            let views = views_culler(
                ctx,
                ScanVariant::OrderedTwoPass,
                format,
                OutputKind::Indices,
                tuning,
                count,
            );
            let scene = edge_scene(78, n, Camera::InfiniteReverseZ, format);
            let frusta = view_frusta(&scene, 5, count as usize);
            let survivors = run_views(ctx, &views, &scene, &frusta, n as u32, count);
            assert_views_exact(
                &format!("{} {format:?} {name} {count} views n={n}", form_name(&views)),
                &views,
                &scene,
                &frusta,
                &survivors,
            );
        }
    }
}
