//! What an example was asked for on its command line, and the parsers of
//! the flags the examples share (each example declares its own flags with
//! `argh`, so that `--help` lists exactly what it takes).

use bevy::prelude::*;

/// What a one-scene example was asked for: the instances, how it runs
/// (a window, or headless frames saved to a screenshot) and the scene's
/// options. Each example parses its own flags (with `argh`, so `--help`
/// lists exactly the flags it takes) into this.
#[derive(Resource, Clone, Debug)]
pub struct SceneArgs {
    pub count: usize,
    pub headless: bool,
    pub frames: u32,
    pub screenshot: Option<std::path::PathBuf>,
    pub width: u32,
    pub height: u32,
    /// Occlusion culling on the camera (`--occlusion`).
    pub occlusion: bool,
    /// The batches sorted into cells and culled by cells where that pays
    /// off (`--cells`, `GpuCullCells`).
    pub cells: bool,
    /// Levels of detail on the batches (`--lod`, `GpuCullLod`), in the
    /// examples that have them.
    pub lod: bool,
    /// The same scene as ordinary Bevy entities, culled and drawn by Bevy
    /// (`--compare bevy`), in the examples that have it.
    pub compare_bevy: bool,
    /// With `--compare bevy`: Bevy's `NoCpuCulling` on the camera
    /// (`--no-cpu-culling`), which leaves the culling to Bevy's GPU.
    pub no_cpu_culling: bool,
    /// Headless: each render pass's GPU time at the end (`--pass-times`,
    /// [`add_pass_times`]), in the examples that have it.
    pub pass_times: bool,
    /// Bevy's `DepthPrepass` on the camera (`--depth-prepass`), in the
    /// examples that have it: the main pass then shades each pixel once.
    pub depth_prepass: bool,
    /// Headless: the summary as one JSON line (`--json`) instead of
    /// sentences.
    pub json: bool,
    /// Headless: Bevy's UI and text kept, for a HUD in the screenshot (a
    /// window always has them).
    pub hud: bool,
}

impl SceneArgs {
    /// `count` instances, in a window or `headless` for `frames` frames
    /// (the last saved to `screenshot`), at `size`: 1280x720 by default,
    /// 480x270 headless (lavapipe renders every pixel on the CPU). The
    /// options are off.
    pub fn new(
        count: usize,
        headless: bool,
        frames: u32,
        screenshot: Option<std::path::PathBuf>,
        size: Option<(u32, u32)>,
    ) -> Self {
        let (width, height) = size.unwrap_or(if headless { (480, 270) } else { (1280, 720) });
        Self {
            count,
            headless,
            frames,
            screenshot,
            width,
            height,
            occlusion: false,
            cells: false,
            lod: false,
            compare_bevy: false,
            no_cpu_culling: false,
            pass_times: false,
            depth_prepass: false,
            json: false,
            hud: false,
        }
    }
}

/// The [`SceneArgs`] of an example's `flags`, from the flags every example
/// has: `count`, `headless`, `frames`, `screenshot`, `size` and `json`.
macro_rules! scene_args {
    ($flags:expr) => {
        support::SceneArgs {
            json: $flags.json,
            ..support::SceneArgs::new(
                $flags.count,
                $flags.headless,
                $flags.frames,
                $flags.screenshot.clone(),
                $flags.size,
            )
        }
    };
}
pub(crate) use scene_args;

/// `--count N`: a whole number of instances; `1e6` works.
pub fn parse_count(value: &str) -> Result<usize, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as usize)
        .ok_or_else(|| format!("`{value}` is not a count of instances (1e6 works)"))
}

/// `--size WxH`.
pub fn parse_size_flag(value: &str) -> Result<(u32, u32), String> {
    parse_size(value)
        .filter(|&(w, h)| w > 0 && h > 0)
        .ok_or_else(|| format!("`{value}` is not a size: WxH, e.g. 1280x720"))
}

/// `--compare bevy`: the only path there is to compare with.
pub fn parse_compare(value: &str) -> Result<bool, String> {
    match value {
        "bevy" => Ok(true),
        _ => Err(format!("`{value}`: only `--compare bevy` is known")),
    }
}

/// Parses `WxH`.
pub fn parse_size(value: &str) -> Option<(u32, u32)> {
    let (w, h) = value.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

/// `--variant NAME`: a scan variant compiled into cull-core.
pub fn parse_variant(value: &str) -> Result<bevy_gpu_cull::GpuCullScanVariant, String> {
    bevy_gpu_cull::GpuCullScanVariant::from_name(value)
        .ok_or_else(|| format!("`{value}` is not a scan variant"))
}

/// `--format NAME`: matrix, posquat or packed16.
pub fn parse_format(value: &str) -> Result<bevy_gpu_cull::GpuCullInstanceFormat, String> {
    bevy_gpu_cull::GpuCullInstanceFormat::from_name(value)
        .ok_or_else(|| format!("`{value}`: matrix, posquat or packed16"))
}
