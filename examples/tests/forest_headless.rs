//! Runs the `forest` example headless, as CI does: both batches are culled
//! and drawn with their textured materials, and the sun's cascades cull the
//! trees and draw them into the shadow maps.

mod common;

/// Runs the example headless with `extra` arguments; its summary line and
/// screenshot.
fn run_forest(extra: &[&str], shot_name: &str) -> (String, image::RgbaImage) {
    let args = [&["--frames", "30", "--count", "4000", "--size", "240x136"], extra].concat();
    common::run_headless("forest", &args, shot_name)
}

/// With `--occlusion`, what nearer trees hide (seen across the forest at
/// tree height) is not drawn: fewer instances visible than without, none of
/// the batches empty. (Mostly rocks: a tree's bounding sphere reaches past
/// the trees in front of it into the sky.) With `--cells`, the batches are
/// sorted into cells and the same instances are in view (with
/// `--depth-prepass` too); the camera keeps some of the trees' cells, and
/// (a small forest) the pick culls flat.
#[test]
fn forest_headless_occlusion_and_cells() {
    let (plain, _) = run_forest(&[], "forest-plain.png");
    // With a depth prepass too (the batches are drawn into it): the same
    // instances in view.
    let (cells, _) = run_forest(&["--cells", "--depth-prepass"], "forest-cells.png");
    assert_eq!(common::field(&cells, "depth_prepass"), "true", "{cells}");
    for name in ["trees_visible", "rocks_visible"] {
        assert_eq!(
            common::field(&cells, name),
            common::field(&plain, name),
            "{name} by cells: {cells}\nflat: {plain}"
        );
    }
    assert_eq!(common::field(&plain, "cells"), "n/a", "{plain}");
    let number = |line: &str, name: &str| common::field(line, name).parse::<u32>().unwrap();
    let (kept, total) = (number(&cells, "cells_kept"), number(&cells, "cells"));
    // A small forest: the pick culls flat.
    assert_eq!(common::field(&cells, "by_cells"), "false", "{cells}");
    assert!(kept > 0 && kept <= total, "{cells}");
    let (occluded, _) = run_forest(&["--occlusion"], "forest-occlusion.png");
    let visible = |line: &str, name: &str| common::field(line, name).parse::<u32>().unwrap();
    let total = |line: &str| visible(line, "trees_visible") + visible(line, "rocks_visible");
    assert!(common::field(&occluded, "occlusion") == "true", "{occluded}");
    assert!(
        visible(&occluded, "trees_visible") > 0
            && visible(&occluded, "rocks_visible") > 0
            && total(&occluded) < total(&plain),
        "with occlusion: {occluded}\nwithout: {plain}"
    );
}

#[test]
fn forest_headless() {
    let (line, img) = run_forest(&[], "forest.png");
    let line = line.as_str();
    let number = |name: &str| common::field(line, name).parse::<u32>().unwrap();
    assert!(
        number("trees_visible") > 0 && number("rocks_visible") > 0,
        "{line}"
    );
    // The sun's cascades (four by default) cull the batches for the shadow maps.
    assert!(
        number("shadow_views") >= 2 && number("shadow_casters") > 0,
        "{line}"
    );
    // The trees' green texture shows.
    assert_green(&img, line);
    // The batches appear with Bevy's own meshes (the ground): their
    // kernels and pipelines compile alongside Bevy's from the first frame.
    // A frame count on a shared two-core machine, where the other tests'
    // processes compile and render at the same time: a run that misses is
    // measured again, and the test fails only when both miss.
    let frame = |line: &str, name: &str| {
        common::field(line, name)
            .parse::<u32>()
            .unwrap_or_else(|_| panic!("{name}: {line}"))
    };
    let in_time = |line: &str| frame(line, "first_batch_frame") <= frame(line, "first_bevy_mesh_frame") + 5;
    if !in_time(line) {
        let (again, _) = run_forest(&[], "forest-again.png");
        assert!(
            in_time(&again),
            "the batches were first drawn more than 5 frames after Bevy's meshes, twice: {line}\n{again}"
        );
    }
    // With levels of detail, every one drawn (no size below which none is),
    // the same instances are in view, each at one level (two within the
    // bands' tolerance of a threshold), the near trees at the finest and the
    // farther at the next.
    let (lod, lod_img) = run_forest(&["--lod", "--min-pixels", "0", "--pass-times"], "forest-lod.png");
    let levels = |name: &str| common::numbers(&lod, name);
    let (trees, rocks) = (levels("trees_per_level"), levels("rocks_per_level"));
    assert_eq!((trees.len(), rocks.len()), (3, 2), "{lod}");
    for (name, per_level) in [("trees_visible", &trees), ("rocks_visible", &rocks)] {
        // The visible count is the levels' sum; against the cull without
        // levels, a few may be counted twice.
        let sum: u32 = per_level.iter().sum();
        let at = |l: &str| common::field(l, name).parse::<u32>().unwrap();
        assert!(
            (at(line)..=at(line) + (at(line) / 100).max(4)).contains(&sum),
            "{name} with levels: {lod}\nwithout: {line}"
        );
    }
    assert!(trees[0] > 0 && trees[1] > 0, "{lod}");
    assert_green(&lod_img, &lod);
    // --pass-times: the GPU time of Bevy's main pass, of the batches drawn
    // before it, and of the plugin's culls (the camera's and its
    // cascades'), and the culls' encoding.
    for pass in [
        "render/main_opaque_pass_3d/elapsed_gpu",
        "render/gpu_cull_opaque_batches/elapsed_gpu",
        "render/gpu_cull/elapsed_gpu",
        "render/gpu_cull/elapsed_cpu",
    ] {
        let ms = common::pass_value(&lod, pass).unwrap_or_else(|| panic!("no {pass}\n{lod}"));
        assert!(ms > 0.0 && ms < 1000.0, "{pass} took {ms} ms\n{lod}");
    }
    // And the render thread's frame: its schedule, then its wait for the
    // GPU (none where the CPU is the slower); unpaced runs do not time it.
    if std::env::var_os("GPU_CULL_UNPACED").is_none() {
        let ms = |name: &str| common::field(&lod, name).parse::<f64>().unwrap_or(f64::NAN);
        let (schedule, wait) = (ms("render_schedule_ms"), ms("render_gpu_wait_ms"));
        assert!(schedule > 0.0 && schedule < 10_000.0, "render_schedule_ms: {lod}");
        assert!((0.0..10_000.0).contains(&wait), "render_gpu_wait_ms: {lod}");
    }
    // And Bevy's own path draws the same forest (the comparison the
    // benchmarks make): green trees, no batches.
    let (bevy, bevy_img) = run_forest(&["--compare", "bevy"], "forest-bevy.png");
    assert_eq!(common::field(&bevy, "path"), "bevy", "{bevy}");
    assert_eq!(common::field(&bevy, "trees_visible"), "n/a", "{bevy}");
    // The same cascades: the batches cast only from the trees and rocks
    // whose shadow can fall on what the camera sees, fewer than Bevy's
    // boxes keep; the pictures agree.
    let count = |line: &str, name: &str| common::field(line, name).parse::<u64>().unwrap();
    let (batches, entities) = (count(line, "shadow_casters"), count(&bevy, "bevy_shadow_casters"));
    assert_eq!(count(line, "bevy_shadow_casters"), 0, "{line}");
    assert!(
        batches > 0 && batches < entities,
        "shadow casters: batches {batches}, Bevy's entities {entities}\n{line}\n{bevy}"
    );
    assert_green(&bevy_img, &bevy);
    let worst = largest_block_difference(&img, &bevy_img);
    assert!(
        worst <= 6.0,
        "the batches' forest differs from Bevy's by up to {worst:.1} (of 255) in a block of 4x4 pixels"
    );
}

/// The largest difference of two frames' 4x4-pixel block means, over the
/// color channels (of 255): the same objects drawn a little differently at
/// their edges agree to a few units; a missing tree or shadow does not.
fn largest_block_difference(a: &image::RgbaImage, b: &image::RgbaImage) -> f64 {
    assert_eq!(a.dimensions(), b.dimensions());
    let mut worst: f64 = 0.0;
    for by in (0..a.height() / 4).map(|y| y * 4) {
        for bx in (0..a.width() / 4).map(|x| x * 4) {
            for c in 0..3 {
                let mean = |img: &image::RgbaImage| {
                    let pixels = (by..by + 4).flat_map(|y| (bx..bx + 4).map(move |x| (x, y)));
                    pixels
                        .map(|(x, y)| f64::from(img.get_pixel(x, y)[c]))
                        .sum::<f64>()
                        / 16.0
                };
                worst = worst.max((mean(a) - mean(b)).abs());
            }
        }
    }
    worst
}

/// At least a fiftieth of the frame shows the trees' green texture.
fn assert_green(img: &image::RgbaImage, line: &str) {
    let green = img
        .pixels()
        .filter(|p| p[1] as u32 > p[0] as u32 + 25 && p[1] as u32 > p[2] as u32 + 25)
        .count();
    assert!(
        green > (img.width() * img.height() / 50) as usize,
        "only {green} green pixels: {line}"
    );
}

/// The far trees and rocks drawn as pixels (`--as-pixels`: written by a
/// compute pass, shaded by their materials over the tiles holding them; at this
/// height the trees from a pixel up to the cone's size, under three
/// pixels) look like the same levels drawn as triangles. The rest of the frame is
/// the same picture. In the rows where the two differ (the far forest at
/// the horizon) about as many pixels show a tree or rock, from 3% fewer to
/// 30% more (a triangle a pixel or two across lights the pixels whose
/// centers it covers, none to a few; a pixel instance lights one: here
/// about 6% more; without the pixels' shading, 14% fewer), in the same mean
/// color, within 8 of 255 per channel (the same material and light; a
/// pixel is shaded as its mesh's middle, a triangle across it). Pixels
/// missing from the frame, or shaded with another normal, change the
/// count or the color by more.
#[test]
fn forest_pixel_levels_look_like_their_triangles() {
    let args = ["--frames", "30", "--count", "40000", "--size", "240x136", "--lod"];
    let (triangles, tri_img) = common::run_headless("forest", &args, "forest-far-triangles.png");
    let with_pixels = [&args[..], &["--as-pixels"]].concat();
    let (pixels, pix_img) = common::run_headless("forest", &with_pixels, "forest-far-pixels.png");
    let levels = common::numbers(&pixels, "trees_per_level");
    assert!(
        levels.len() >= 3 && levels.last().is_some_and(|&n| n > 1000),
        "a level of far trees: {pixels}"
    );
    for name in ["trees_visible", "rocks_visible"] {
        assert_eq!(
            common::field(&pixels, name),
            common::field(&triangles, name),
            "{name}: {pixels}\n{triangles}"
        );
    }
    let (w, h) = tri_img.dimensions();
    let differs = |x: u32, y: u32| {
        let (a, b) = (tri_img.get_pixel(x, y), pix_img.get_pixel(x, y));
        (0..3).any(|c| a[c].abs_diff(b[c]) > 8)
    };
    let differing: Vec<(u32, u32)> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .filter(|&(x, y)| differs(x, y))
        .collect();
    assert!(
        !differing.is_empty() && differing.len() <= (w * h / 50) as usize,
        "{} pixels differ",
        differing.len()
    );
    let rows: std::collections::BTreeSet<u32> = differing.iter().map(|&(_, y)| y).collect();
    // The sky's color, at the top left; what differs from it is forest.
    let sky = *tri_img.get_pixel(0, 0);
    let forest = |img: &image::RgbaImage| {
        let pixels: Vec<[u8; 4]> = rows
            .iter()
            .flat_map(|&y| (0..w).map(move |x| img.get_pixel(x, y).0))
            .filter(|p| (0..3).any(|c| p[c].abs_diff(sky[c]) > 20))
            .collect();
        let mean =
            |c: usize| pixels.iter().map(|p| f64::from(p[c])).sum::<f64>() / pixels.len().max(1) as f64;
        (pixels.len() as f64, [mean(0), mean(1), mean(2)])
    };
    let ((tri_count, tri_mean), (pix_count, pix_mean)) = (forest(&tri_img), forest(&pix_img));
    assert!(
        (0.97..=1.3).contains(&(pix_count / tri_count)),
        "forest pixels in those rows: {pix_count} with pixel levels, {tri_count} with triangles (rows {rows:?})"
    );
    for c in 0..3 {
        assert!(
            (pix_mean[c] - tri_mean[c]).abs() <= 8.0,
            "far forest color: {pix_mean:?} as pixels, {tri_mean:?} as triangles"
        );
    }
}
