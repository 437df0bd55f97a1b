//! The markdown table and the SVG plots.

use crate::Cell;
use cull_core::InstanceFormat;
use plotters::prelude::*;
use std::fmt::Write;
use std::path::Path;

/// The table, one row per cell, with speedups over Hillis-Steele and the CPU.
pub fn markdown(cells: &[Cell], device: &str, launch_us: f64) -> String {
    let mut s = String::new();
    writeln!(
        s,
        "Device: {device}. Empty dispatch: {launch_us:.2} us. GPU times are timestamp-query medians."
    )
    .unwrap();
    writeln!(s).unwrap();
    writeln!(
        s,
        "| variant | format | N | visible % | GPU us (median) | min-max us | G inst/s | % of roofline | x Hillis-Steele | x CPU |"
    )
    .unwrap();
    writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
    for c in cells {
        let baseline = cells.iter().find(|b| {
            b.variant == "hillis-steele" && b.format == c.format && b.n == c.n && b.visible == c.visible
        });
        let vs_hs = baseline.map_or("-".into(), |b| format!("{:.1}", b.gpu_us / c.gpu_us));
        writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} | {:.1}-{:.1} | {:.2} | {:.0}% | {} | {:.1} |",
            c.variant,
            c.format,
            c.n,
            100.0 * c.visible as f64 / c.n.max(1) as f64,
            if c.correct {
                format!("{:.1}", c.gpu_us)
            } else {
                "WRONG".into()
            },
            c.gpu_min_us,
            c.gpu_max_us,
            c.ginst_per_s(),
            c.roofline_pct(),
            vs_hs,
            c.cpu_us / c.gpu_us,
        )
        .unwrap();
    }
    s
}

/// Time against N (log-log) for one format at the visible fraction nearest
/// 25%: a line per variant, the copy roofline and the CPU.
pub fn plot(
    cells: &[Cell],
    format: InstanceFormat,
    device: &str,
    dir: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let cells: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.format == format.name() && c.correct)
        .collect();
    if cells.is_empty() {
        return Ok(());
    }
    let share = |c: &Cell| c.visible as f64 / c.n.max(1) as f64;
    let fraction = cells
        .iter()
        .map(|c| share(c))
        .min_by(|a, b| (a - 0.25).abs().total_cmp(&(b - 0.25).abs()))
        .unwrap();
    // Cells at (roughly) that fraction.
    let cells: Vec<&Cell> = cells
        .into_iter()
        .filter(|c| (share(c) - fraction).abs() < 0.05)
        .collect();
    let path = dir.join(format!("bench-{}.svg", format.name()));
    let root = SVGBackend::new(&path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (x0, x1) = (
        cells.iter().map(|c| c.n).min().unwrap().max(1) as f64,
        cells.iter().map(|c| c.n).max().unwrap().max(2) as f64,
    );
    let all = cells.iter().flat_map(|c| [c.gpu_us, c.copy_us, c.cpu_us]);
    let y0 = all.clone().fold(f64::INFINITY, f64::min) * 0.7;
    let y1 = all.fold(0.0, f64::max) * 1.4;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{} instances, ~{:.0}% visible: GPU time vs N ({})",
                format.name(),
                fraction * 100.0,
                device.split(" (").next().unwrap_or(device)
            ),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("instances (N)")
        .y_desc("microseconds")
        .draw()?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for c in &cells {
        match series.iter_mut().find(|(name, _)| *name == c.variant) {
            Some((_, points)) => points.push((c.n as f64, c.gpu_us)),
            None => series.push((c.variant.clone(), vec![(c.n as f64, c.gpu_us)])),
        }
    }
    let dedup = |points: Vec<(f64, f64)>| {
        let mut p = points;
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p.dedup_by(|a, b| a.0 == b.0);
        p
    };
    let roofline = dedup(cells.iter().map(|c| (c.n as f64, c.copy_us)).collect());
    let cpu = dedup(cells.iter().map(|c| (c.n as f64, c.cpu_us)).collect());
    for (i, (name, points)) in series.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(dedup(points), color.stroke_width(2)).point_size(3))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .draw_series(LineSeries::new(roofline, BLACK.stroke_width(2)))?
        .label("copy roofline (same bytes)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(cpu, RGBColor(150, 150, 150).stroke_width(1)))?
        .label("CPU (all threads)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(150, 150, 150)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The ordered variants' forms against the best variant that does not keep
/// order, cell by cell. Each variant's speed is taken as its fraction of the
/// copy over its own buffers (measured in the same rounds), so that a change
/// of the GPU's speed between rounds weighs on both sides alike. Where the
/// copies match, this is the instances/s ratio.
pub fn ordered_summary(cells: &[Cell]) -> String {
    let unordered = ["subgroup-ballot", "subgroup-shuffle", "block-atomic"];
    let ordered: Vec<&str> = [
        "ordered",
        "ordered-workgroup",
        "ordered-two-pass",
        "ordered-two-pass-workgroup",
    ]
    .into_iter()
    .filter(|o| cells.iter().any(|c| c.variant == *o))
    .collect();
    let mut s = String::new();
    if ordered.is_empty() {
        return s;
    }
    writeln!(
        s,
        "| format | N | visible % | copy TB/s (best / {}) | best unordered (% of its copy) | {} |",
        ordered[0],
        ordered
            .iter()
            .map(|o| format!("{o} / best"))
            .collect::<Vec<_>>()
            .join(" | ")
    )
    .unwrap();
    writeln!(s, "|---|---:|---:|---:|---|{}", "---:|".repeat(ordered.len())).unwrap();
    let mut seen = Vec::new();
    // With no instances there is no speed to compare.
    for c in cells.iter().filter(|c| c.n > 0) {
        let key = (c.format.as_str(), c.n, c.visible);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let same = |v: &str| {
            cells
                .iter()
                .find(|b| b.variant == v && (b.format.as_str(), b.n, b.visible) == key && b.correct)
        };
        let Some(best) = unordered
            .iter()
            .filter_map(|v| same(v))
            .max_by(|a, b| a.roofline_pct().total_cmp(&b.roofline_pct()))
        else {
            continue;
        };
        let ratios: Vec<String> = ordered
            .iter()
            .map(|o| {
                same(o).map_or("-".into(), |c| {
                    format!("{:.2}", c.roofline_pct() / best.roofline_pct())
                })
            })
            .collect();
        writeln!(
            s,
            "| {} | {} | {:.1} | {:.2} / {} | {} ({:.0}%) | {} |",
            c.format,
            c.n,
            100.0 * c.visible as f64 / c.n.max(1) as f64,
            best.copy_tb_per_s(),
            same(ordered[0]).map_or("-".into(), |o| format!("{:.2}", o.copy_tb_per_s())),
            best.variant,
            best.roofline_pct(),
            ratios.join(" | ")
        )
        .unwrap();
    }
    s
}
