//! Pixels of instances too small to rasterize well: each survivor of a list
//! claims the one pixel its instance's point projects to, in a view-sized
//! buffer, written by compute instead of a draw (`shaders/cull/splat.wgsl`;
//! CPU mirror [`crate::cpu::splat`]).
//!
//! A GPU's triangle front end sets up a primitive at a fixed rate however
//! few pixels it covers, so a level of detail below a pixel or two costs as
//! much per instance as a large one; a compute pass writing those
//! instances' pixels costs a hundredth of that. A renderer then shades the
//! claimed pixels (in a full-screen pass, or over the tiles holding them),
//! rebuilding each pixel's surface from its id.

use crate::buffers::CullTarget;
use crate::kernel::{ShaderModule, shader_module};
use crate::list_stage::{ListStage, StageBinding, layout_entries};
use crate::{CullError, CullInput, InstanceFormat};
use glam::{Mat4, Vec3};

/// The splat's module (an entry module: it imports `cull::points` and
/// `cull::math` from [`crate::shader::library`]).
pub(crate) const SPLAT_MODULE: ShaderModule = shader_module!("splat.wgsl");

/// Threads of a workgroup, one survivor each (as `splat.wgsl`).
const GROUP: u32 = 256;
/// Bytes between the jobs bound at dynamic offsets.
const ENTRY_STRIDE: u64 = 256;
/// Bytes of `SplatJob`.
const JOB_BYTES: u64 = 112;
/// The entry points: every list's depth pass, then every list's id pass.
pub(crate) const ENTRY_POINTS: [&str; 2] = ["splat_depths", "splat_ids"];

/// The view a [`PixelSplatter`] projects into.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PixelSplatView {
    /// The view's clip-from-world matrix (wgpu clip space).
    pub clip_from_world: Mat4,
    /// Whether a greater depth is nearer (reverse-Z, Bevy's): depths in
    /// (0, 1] are kept. Otherwise a smaller one is, and depths in [0, 1).
    pub reverse_z: bool,
}

impl PixelSplatView {
    /// Where point `p`, placed in the world by `world_from_local`, lands
    /// on a target of `width` × `height` pixels: its pixel (row by row from
    /// the top) and depth key, the nearest depth having the greatest key
    /// and no kept depth key 0. None off the target, behind the eye, past
    /// the depth range or where the projection overflows. (The splat
    /// multiplies the two matrices first, as here.)
    pub fn pixel(&self, world_from_local: Mat4, p: Vec3, (width, height): (u32, u32)) -> Option<(u32, u32)> {
        let clip = (self.clip_from_world * world_from_local) * p.extend(1.0);
        if !clip.is_finite() || clip.w <= 0.0 {
            return None;
        }
        let ndc = clip.truncate() / clip.w;
        let in_depth = if self.reverse_z {
            ndc.z > 0.0 && ndc.z <= 1.0
        } else {
            ndc.z >= 0.0 && ndc.z < 1.0
        };
        let (w, h) = (width as f32, height as f32);
        let x = (ndc.x * 0.5 + 0.5) * w;
        let y = (0.5 - ndc.y * 0.5) * h;
        if !(in_depth && x >= 0.0 && x < w && y >= 0.0 && y < h) {
            return None;
        }
        let bits = ndc.z.to_bits() & 0x7fff_ffff;
        let key = if self.reverse_z { bits } else { !bits };
        Some((y as u32 * width + x as u32, key))
    }
}

/// One list splatted into a [`PixelSplatTarget`]: the survivors of `list`
/// in `target`, culled from `input`.
#[derive(Clone, Copy)]
pub struct PixelSplatSource<'a> {
    /// The instances the list indexes: the input the list was culled from
    /// (refused where its format is not the cull's; indices past it are
    /// skipped).
    pub input: &'a CullInput,
    /// The cull's target (of [`OutputKind::Indices`](crate::OutputKind::Indices)).
    pub target: &'a CullTarget,
    /// The list: a view of the target (or a view's level).
    pub list: u32,
    /// The mesh-space point each instance is projected by (a level mesh's
    /// center, say).
    pub local_center: Vec3,
    /// What places the list's instances in the world (`Mat4::IDENTITY` for
    /// instances in world space; a batch entity's transform for instances
    /// relative to it): the point is projected by the view's
    /// `clip_from_world` times this.
    pub world_from_local: Mat4,
    /// A pixel claimed by instance `i` of this list holds id
    /// `id_base + i + 1`: sources sharing a target take disjoint ranges.
    pub id_base: u32,
}

/// Tuning of a [`PixelSplatter`], for tests of its dispatch shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PixelSplatDesc {
    /// Caps workgroups along one dimension below the device's limit
    /// (dispatches of more use a second dimension).
    pub max_workgroups_per_dimension: Option<u32>,
}

/// A view-sized pair of pixel buffers a [`PixelSplatter`] writes: per
/// pixel, row by row from the top, the nearest depth key (0: none) and the
/// id of the instance kept there (0: none).
pub struct PixelSplatTarget {
    size: (u32, u32),
    sources: u32,
    keys: wgpu::Buffer,
    ids: wgpu::Buffer,
    jobs: wgpu::Buffer,
}

impl PixelSplatTarget {
    /// Buffers for a `width` × `height` view, splatted from up to
    /// `max_sources` lists at a time. Refused for an empty view, no
    /// sources, or more pixels than one storage binding of `device` holds
    /// at 4 bytes each.
    pub fn new(
        device: &wgpu::Device,
        (width, height): (u32, u32),
        max_sources: u32,
    ) -> Result<Self, CullError> {
        if width == 0 || height == 0 || max_sources == 0 {
            return Err(CullError::InvalidParameter(
                "a splat target needs at least one pixel and one source",
            ));
        }
        let bytes = (width as u64).saturating_mul(height as u64).saturating_mul(4);
        let limits = device.limits();
        if bytes > limits.max_storage_buffer_binding_size || bytes > limits.max_buffer_size {
            return Err(CullError::InvalidParameter(
                "a splat target's pixels (4 bytes each) must fit one storage binding",
            ));
        }
        if max_sources as u64 * ENTRY_STRIDE > limits.max_buffer_size {
            return Err(CullError::InvalidParameter(
                "a splat target's sources (256 bytes each) must fit one buffer",
            ));
        }
        let pixels = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        Ok(Self {
            size: (width, height),
            sources: max_sources,
            keys: pixels("cull-splat-keys"),
            ids: pixels("cull-splat-ids"),
            jobs: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull-splat-jobs"),
                size: max_sources as u64 * ENTRY_STRIDE,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        })
    }

    /// Width and height in pixels.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Per pixel, the nearest depth key ([`PixelSplatView::pixel`]), 0
    /// where no instance landed.
    pub fn keys(&self) -> &wgpu::Buffer {
        &self.keys
    }

    /// Per pixel, the id of the instance kept (`id_base + index + 1`), 0
    /// where none landed.
    pub fn ids(&self) -> &wgpu::Buffer {
        &self.ids
    }

    /// Records clearing every pixel (key and id 0), as
    /// [`PixelSplatter::splat`] does before it splats.
    pub fn clear(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.clear_buffer(&self.keys, 0, None);
        encoder.clear_buffer(&self.ids, 0, None);
    }

    /// The keys and ids, waiting for the GPU: for tests and tools.
    pub fn read(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<(Vec<u32>, Vec<u32>), CullError> {
        let read = |buffer| -> Result<Vec<u32>, CullError> {
            let bytes = crate::read_back(device, queue, buffer, 0, buffer.size())?;
            Ok(bytemuck::pod_collect_to_vec(&bytes))
        };
        Ok((read(&self.keys)?, read(&self.ids)?))
    }

    /// Bytes of GPU memory it holds.
    pub fn buffer_bytes(&self) -> u64 {
        self.keys.size() + self.ids.size() + self.jobs.size()
    }
}

/// Writes the pixels of lists of survivors (culls of index output,
/// [`OutputKind::Indices`](crate::OutputKind::Indices), of any cullers and
/// formats) into a
/// [`PixelSplatTarget`]: each survivor
/// projects its instance's transformed mesh point and claims the pixel it
/// falls in; a pixel keeps the nearest, and among equally near ones the
/// greatest id, whatever order the lists, survivors and threads come in.
///
/// Cost: per list, two dispatches over its capacity, each reading the
/// survivor's index and instance and doing one 32-bit atomic maximum; and
/// clearing 8 bytes a pixel.
///
/// ```no_run
/// use cull_core::prelude::*;
/// use cull_core::{PixelSplatDesc, PixelSplatSource, PixelSplatTarget, PixelSplatView, PixelSplatter};
/// # fn f(gpu: &GpuContext, input: &CullInput, camera: &Frustum, clip_from_world: glam::Mat4) -> Result<(), CullError> {
/// let desc = CullerDesc { output: OutputKind::Indices, ..CullerDesc::default() };
/// let culler = Culler::new(&gpu.device, &gpu.queue, &desc)?;
/// let splatter = PixelSplatter::new(&gpu.device, PixelSplatDesc::default());
/// let target = CullTarget::new(&gpu.device, &culler, input.capacity())?;
/// let pixels = PixelSplatTarget::new(&gpu.device, (1280, 720), 1)?;
/// let mut encoder = gpu.device.create_command_encoder(&Default::default());
/// let bounds = Sphere::new(glam::Vec3::ZERO, 0.5);
/// let request = CullRequest::new(input, &target, std::slice::from_ref(camera), bounds, input.capacity());
/// culler.cull(&mut encoder, &gpu.queue, request)?;
/// let view = PixelSplatView { clip_from_world, reverse_z: true };
/// let source = PixelSplatSource {
///     input,
///     target: &target,
///     list: 0,
///     local_center: glam::Vec3::ZERO,
///     world_from_local: glam::Mat4::IDENTITY,
///     id_base: 0,
/// };
/// splatter.splat(&mut encoder, &gpu.queue, &pixels, &view, &[source])?;
/// gpu.queue.submit([encoder.finish()]);
/// # Ok(()) }
/// ```
pub struct PixelSplatter {
    stage: ListStage,
}

impl PixelSplatter {
    /// A splatter, compiling its pipelines. It splats the lists of any
    /// cull of index output ([`OutputKind::Indices`](crate::OutputKind::Indices)), of any culler and
    /// instance format, together.
    pub fn new(device: &wgpu::Device, desc: PixelSplatDesc) -> Self {
        let stage = ListStage::new(
            device,
            (SPLAT_MODULE, &ENTRY_POINTS),
            &layout_entries(&BINDINGS),
            desc.max_workgroups_per_dimension,
        );
        Self { stage }
    }

    /// Records, after the culls that wrote the lists in `encoder`: clearing
    /// `pixels`, then a compute pass splatting every source into them as
    /// seen by `view`.
    pub fn splat(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        pixels: &PixelSplatTarget,
        view: &PixelSplatView,
        sources: &[PixelSplatSource<'_>],
    ) -> Result<(), CullError> {
        self.check_all(pixels, sources)?;
        pixels.clear(encoder);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("cull-splat"),
            timestamp_writes: None,
        });
        self.record(&mut pass, queue, pixels, view, sources)
    }

    /// [`Self::splat`] recorded into `pass` (a pass with timestamps, or
    /// with other work), after [`PixelSplatTarget::clear`] in its encoder.
    /// Splat every list a target takes in one call, once per clear and per
    /// submission: a second call would find ids of the first at depths it
    /// replaced, and the sources' uniforms are written when the queue
    /// submits, so a second call's would replace the first's.
    pub fn splat_in_pass(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        queue: &wgpu::Queue,
        pixels: &PixelSplatTarget,
        view: &PixelSplatView,
        sources: &[PixelSplatSource<'_>],
    ) -> Result<(), CullError> {
        self.check_all(pixels, sources)?;
        self.record(pass, queue, pixels, view, sources)
    }

    /// The splat's dispatches, its sources checked.
    fn record(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        queue: &wgpu::Queue,
        pixels: &PixelSplatTarget,
        view: &PixelSplatView,
        sources: &[PixelSplatSource<'_>],
    ) -> Result<(), CullError> {
        let mut groups = Vec::with_capacity(sources.len());
        for (slot, source) in sources.iter().enumerate() {
            let dims = self.stage.dims(source.target.capacity().div_ceil(GROUP))?;
            let words = job_words(source.input.format(), view, source, pixels.size, dims.0);
            queue.write_buffer(
                &pixels.jobs,
                slot as u64 * ENTRY_STRIDE,
                bytemuck::cast_slice(&words),
            );
            groups.push((
                self.bind_group(source, pixels),
                (slot as u64 * ENTRY_STRIDE) as u32,
                dims,
            ));
        }
        for pipeline in &self.stage.pipelines {
            pass.set_pipeline(pipeline);
            for (group, offset, (x, y)) in &groups {
                pass.set_bind_group(0, group, &[*offset]);
                pass.dispatch_workgroups(*x, *y, 1);
            }
        }
        Ok(())
    }

    fn check_all(
        &self,
        pixels: &PixelSplatTarget,
        sources: &[PixelSplatSource<'_>],
    ) -> Result<(), CullError> {
        if sources.len() as u64 > pixels.sources as u64 {
            return Err(CullError::InvalidParameter(
                "more sources than the splat target was made for",
            ));
        }
        sources.iter().try_for_each(|source| self.check(source))
    }

    fn check(&self, source: &PixelSplatSource<'_>) -> Result<(), CullError> {
        self.stage.check(source.input, source.target, source.list)?;
        if source.id_base as u64 + source.input.capacity() as u64 > u32::MAX as u64 {
            return Err(CullError::InvalidParameter(
                "a source's ids (id_base + instance + 1) must fit 32 bits",
            ));
        }
        Ok(())
    }

    fn bind_group(&self, source: &PixelSplatSource<'_>, pixels: &PixelSplatTarget) -> wgpu::BindGroup {
        fn whole(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            }
        }
        let target = source.target;
        let entries = [
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &pixels.jobs,
                    offset: 0,
                    size: wgpu::BufferSize::new(JOB_BYTES),
                }),
            },
            whole(1, source.input.buffer()),
            wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: target.output_buffer(),
                    offset: target.view_output_offset(source.list),
                    size: wgpu::BufferSize::new(target.capacity() as u64 * 4),
                }),
            },
            whole(3, target.draw_args()),
            whole(4, &pixels.keys),
            whole(5, &pixels.ids),
        ];
        self.stage.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("cull-splat"),
            layout: &self.stage.layout,
            entries: &entries,
        })
    }
}

/// `SplatJob`'s words (`splat.wgsl`).
fn job_words(
    format: InstanceFormat,
    view: &PixelSplatView,
    source: &PixelSplatSource<'_>,
    (width, height): (u32, u32),
    groups_x: u32,
) -> [u32; JOB_BYTES as usize / 4] {
    let mut words = [0u32; JOB_BYTES as usize / 4];
    let f = f32::to_bits;
    let clip_from_local = view.clip_from_world * source.world_from_local;
    for (word, value) in words.iter_mut().zip(clip_from_local.to_cols_array()) {
        *word = f(value);
    }
    let c = source.local_center;
    let count_word = crate::list_stage::count_word(source.list);
    words[16..].copy_from_slice(&[
        f(c.x),
        f(c.y),
        f(c.z),
        0,
        width,
        height,
        count_word,
        (format.stride() / 16) as u32,
        format.encode_id(),
        groups_x,
        source.id_base,
        u32::from(view.reverse_z),
    ]);
    words
}

/// The bindings of `splat.wgsl`.
const BINDINGS: [StageBinding; 6] = [
    StageBinding::Uniform(JOB_BYTES),
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: false },
    StageBinding::Storage { read_only: false },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_nearest_first_and_never_zero() {
        let view = |reverse_z| PixelSplatView {
            clip_from_world: Mat4::IDENTITY,
            reverse_z,
        };
        let key = |v: &PixelSplatView, z: f32| {
            v.pixel(Mat4::IDENTITY, Vec3::new(0.0, 0.0, z), (4, 2))
                .map(|(_, k)| k)
        };
        let (reverse, forward) = (view(true), view(false));
        assert!(key(&reverse, 0.9) > key(&reverse, 0.1));
        assert_eq!(key(&reverse, 0.0), None);
        assert_eq!(key(&reverse, 1.0), Some(1.0f32.to_bits()));
        assert!(key(&forward, 0.1) > key(&forward, 0.9));
        assert_eq!(key(&forward, -0.0), Some(u32::MAX));
        assert_eq!(key(&forward, 1.0), None);
        // The pixel the point falls in, row by row from the top.
        assert_eq!(
            reverse
                .pixel(Mat4::IDENTITY, Vec3::new(-0.9, 0.9, 0.5), (4, 2))
                .unwrap()
                .0,
            0
        );
        assert_eq!(
            reverse
                .pixel(Mat4::IDENTITY, Vec3::new(0.9, -0.9, 0.5), (4, 2))
                .unwrap()
                .0,
            7
        );
        assert_eq!(
            reverse.pixel(Mat4::IDENTITY, Vec3::new(1.0, 0.0, 0.5), (4, 2)),
            None
        );
        assert_eq!(
            reverse.pixel(Mat4::IDENTITY, Vec3::new(f32::NAN, 0.0, 0.5), (4, 2)),
            None
        );
    }
}
