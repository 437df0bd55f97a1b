//! Runs the one-topic examples headless, as CI does: each draws its batch
//! and reports what its topic changes (levels drawn, instances hidden,
//! cells read), checked here.

mod common;

use common::field;

const SIZE: [&str; 2] = ["--size", "240x136"];

fn number(line: &str, key: &str) -> u32 {
    field(line, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key}: {line}"))
}

/// The GPU's count equals the CPU's reference, but for spheres within
/// rounding of a plane (`cpu_borderline`), which either may keep.
fn assert_reference(line: &str) {
    let (visible, reference) = (number(line, "visible"), number(line, "cpu_reference"));
    let within = reference..=reference + number(line, "cpu_borderline");
    assert!(within.contains(&visible), "the CPU's reference differs: {line}");
}

/// More than a twentieth of the image differs from its first pixel.
fn assert_drawn(img: &image::RgbaImage, line: &str) {
    let first = *img.get_pixel(0, 0);
    let differing = img.pixels().filter(|p| **p != first).count();
    assert!(
        differing > (img.width() * img.height() / 20) as usize,
        "the screenshot is (nearly) blank: {line}"
    );
}

#[test]
fn minimal_draws_the_cubes_in_view() {
    let (line, img) = common::run_headless("minimal", &["--count", "10000", SIZE[0], SIZE[1]], "minimal.png");
    let visible = number(&line, "visible");
    assert!(visible > 0 && visible < 10_000, "{line}");
    assert_reference(&line);
    assert_drawn(&img, &line);
}

#[test]
fn lod_draws_every_level_and_each_sphere_at_the_level_its_size_calls_for() {
    let (line, img) = common::run_headless("lod", &["--count", "20000", SIZE[0], SIZE[1]], "lod.png");
    let levels = common::numbers(&line, "visible_per_level");
    assert_eq!(levels.len(), 4, "{line}");
    assert_eq!(levels.iter().sum::<u32>(), number(&line, "visible"), "{line}");
    // The sum of the levels' references: each sphere at one level.
    assert_reference(&line);
    // Near spheres at the finest level, the farthest as one triangle.
    assert!(levels[0] > 0 && levels[3] > 0, "{line}");
    assert_drawn(&img, &line);
}

#[test]
fn occlusion_hides_what_the_walls_cover() {
    let args = ["--count", "20000", SIZE[0], SIZE[1]];
    let run = |extra: &[&str], shot| common::run_headless("occlusion", &[&args[..], extra].concat(), shot);
    let (walls, img) = run(&[], "occlusion.png");
    let (no_walls, _) = run(&["--no-walls"], "occlusion-no-walls.png");
    let (off, _) = run(&["--off"], "occlusion-off.png");
    let seen = |line: &str| number(line, "visible");
    // Spheres hide spheres (about half of the frustum's here); the walls
    // hide most of what is left but what shows through their gaps (about a
    // thirteenth). Without occlusion culling, the frustum keeps every
    // sphere in it, hidden or not.
    assert!(
        seen(&walls) > 0 && seen(&walls) * 4 < seen(&no_walls) && seen(&no_walls) < seen(&off),
        "walls: {walls}\nno walls: {no_walls}\nno occlusion culling: {off}"
    );
    assert_drawn(&img, &walls);
}

#[test]
fn cells_keep_the_same_instances_and_read_fewer_cells() {
    let args = ["--count", "40000", SIZE[0], SIZE[1]];
    let (cells, img) = common::run_headless("cells", &[&args[..], &["--always"]].concat(), "cells.png");
    let (flat, _) = common::run_headless("cells", &[&args[..], &["--flat"]].concat(), "cells-flat.png");
    assert_eq!(
        number(&cells, "visible"),
        number(&flat, "visible"),
        "by cells: {cells}\nflat: {flat}"
    );
    assert_eq!(field(&cells, "by_cells"), "true", "{cells}");
    // A cell's bounding sphere reaches below the ground, into the frustum's
    // widening underside: fewer than half the cells are kept, not a tenth.
    assert!(
        number(&cells, "cells_kept") * 2 < number(&cells, "cells"),
        "{cells}"
    );
    assert_eq!(field(&flat, "cells"), "n/a", "{flat}");
    assert_drawn(&img, &cells);
}

#[test]
fn explorer_draws_the_field_under_its_hud() {
    let args = ["--count", "20000", "--lod", "--size", "480x270"];
    let (line, img) = common::run_headless("explorer", &args, "explorer.png");
    let levels = common::numbers(&line, "visible_per_level");
    assert_eq!(levels.iter().sum::<u32>(), number(&line, "visible"), "{line}");
    assert!(number(&line, "visible") > 0, "{line}");
    assert_reference(&line);
    assert_drawn(&img, &line);
    // The HUD: white text at the top left (the field's spheres are colored
    // and shaded, never white).
    let white = |x, y| {
        let p: &image::Rgba<u8> = img.get_pixel(x, y);
        p.0[..3].iter().all(|c| *c >= 235)
    };
    let hud_pixels = (8..40)
        .flat_map(|y| (8..240).map(move |x| (x, y)))
        .filter(|&(x, y)| white(x, y))
        .count();
    assert!(
        hud_pixels > 100,
        "no HUD text at the top left ({hud_pixels} white pixels): {line}"
    );
}
