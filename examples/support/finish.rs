//! The end of a headless run for the examples whose scene is batches seen
//! by one camera: their summary says how many instances are in view, how
//! many the CPU's reference keeps, per level of detail and by cells where
//! the batches have them.

use super::reference::cpu_reference;
use super::{HeadlessRun, HeadlessStep, PipelinesSettled, SceneArgs, Summary};
use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::window::PrimaryWindow;
use bevy_gpu_cull::GpuCullCellStats;
use bevy_gpu_cull::cull_core::cpu::Reference;
use bevy_gpu_cull::prelude::*;

/// The example's name, for its summary ([`super::example_app`] inserts it).
#[derive(Resource, Clone)]
pub struct ExampleName(pub String);

/// A headless run's end: once the batches have been drawn with instances
/// in view and the frames asked for have run, takes the screenshot, prints
/// the summary (with the CPU's reference for the final view) and exits. In
/// a window, the title shows the count in view instead.
pub fn finish_headless(
    args: Res<SceneArgs>,
    name: Res<ExampleName>,
    mut run: ResMut<HeadlessRun>,
    settled: Res<PipelinesSettled>,
    (stats, settings): (Res<GpuCullStats>, Res<GpuCullSettings>),
    camera: Query<(&Camera, &GlobalTransform, &RenderTarget), With<Camera3d>>,
    batches: Query<(
        &GpuCullInstances,
        &GpuCullBounds,
        Option<&GpuCullLod>,
        Has<GpuCullComputeWrites>,
    )>,
    mut windows: Query<&mut Window, With<PrimaryWindow>>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
) {
    let visible: u32 = stats.visible.values().sum();
    let title = format!("{}: {visible} of {} instances in view", name.0, args.count);
    if let Ok(mut window) = windows.single_mut()
        && window.title != title
    {
        window.title = title;
    }
    let Ok((cam, transform, target)) = camera.single() else {
        return;
    };
    let ready = stats.drawn_frames >= 2 && (visible > 0 || args.count == 0);
    if !args.headless {
        return;
    }
    let HeadlessStep::Finish(code) = run.step(&args, ready, true, &settled, Some(target), &mut commands)
    else {
        return;
    };
    // The CPU's reference, summed over the batches; not for instances
    // written on the GPU, which the CPU never sees.
    let view = (cam.clip_from_view(), transform.to_matrix());
    let reference = batches
        .iter()
        .try_fold(Reference::default(), |mut sum, (list, bounds, lod, gpu)| {
            let r = (!gpu).then(|| cpu_reference(view.0, view.1, list, *bounds, lod, settings.format))??;
            sum.visible.extend(r.visible);
            sum.borderline.extend(r.borderline);
            Some(sum)
        });
    let per_level = per_level(&stats, |_| true);
    let cells = stats.cells.values().next();
    let mut summary = run.summary(&name.0, &settled);
    summary.line(match &reference {
        Some(r) => format!(
            "{visible} of {} instances in view (the CPU's frustum reference: {}, {} more borderline)",
            args.count,
            r.visible.len(),
            r.borderline.len()
        ),
        None => format!("{visible} of {} instances in view", args.count),
    });
    if let Some(levels) = &per_level {
        summary.line(format!(
            "per level of detail, finest first: {}",
            levels_text(levels)
        ));
    }
    add_cells(&mut summary, cells);
    summary
        .field("instances", args.count)
        .field("visible", visible)
        .field("cpu_reference", reference.as_ref().map(|r| r.visible.len()))
        .field("cpu_borderline", reference.as_ref().map(|r| r.borderline.len()))
        .field("visible_per_level", per_level)
        .field("drawn_frames", stats.drawn_frames)
        .field("variant", stats.variant.map(|v| v.name()))
        .print(args.json);
    exit.write(code);
}

/// The instances in view per level of detail, finest first, summed over
/// the views and the batches `batch` picks; `None` without levels.
pub fn per_level(stats: &GpuCullStats, batch: impl Fn(Entity) -> bool) -> Option<Vec<u32>> {
    let mut sums: Vec<u32> = Vec::new();
    for (_, levels) in stats.visible_per_level.iter().filter(|((_, b), _)| batch(*b)) {
        sums.resize(sums.len().max(levels.len()), 0);
        sums.iter_mut().zip(levels).for_each(|(sum, n)| *sum += n);
    }
    (!sums.is_empty()).then_some(sums)
}

/// Counts per level as people read them: `a/b/c`.
pub fn levels_text(levels: &[u32]) -> String {
    levels.iter().map(u32::to_string).collect::<Vec<_>>().join("/")
}

/// A view's cells of a batch: a sentence, and the fields `cells_kept`,
/// `cells` and `by_cells` (`null` when the batch is not sorted into cells).
pub fn add_cells(summary: &mut Summary, cells: Option<&GpuCullCellStats>) {
    if let Some(c) = cells {
        let how = if c.by_cells {
            "culled by cells"
        } else {
            "culled flat: too few instances to skip"
        };
        summary.line(format!("{} of {} cells kept, {how}", c.kept, c.cells));
    }
    summary
        .field("cells_kept", cells.map(|c| c.kept))
        .field("cells", cells.map(|c| c.cells))
        .field("by_cells", cells.map(|c| c.by_cells));
}
