//! Depth pyramids: built on the GPU from a depth buffer
//! ([`PyramidBuilder`] into a [`DepthPyramid`]), and on the CPU
//! ([`CpuPyramid`], the mirror).

use super::{DepthOrder, pyramid_level_size, pyramid_levels};
use crate::CullError;

/// The texels of the level below that texel `x` of a level `size` wide
/// reduces, the level below being `below` wide: `2x` and `2x + 1`, and for
/// the last texel everything to the end (a third when `below` is odd, the
/// one texel when it is 1). So with pixels mapped to texels clamped to the
/// last one, each texel covers exactly the pixels that map to it.
fn reduced_span(x: u32, size: u32, below: u32) -> std::ops::Range<u32> {
    let end = if x + 1 == size { below } else { 2 * x + 2 };
    (2 * x).min(below - 1)..end
}

/// A depth pyramid on the CPU: the mirror of [`PyramidBuilder::build`], and
/// what [`DepthPyramid::read_back`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuPyramid {
    /// Level 0's width: the depth buffer's.
    pub width: u32,
    /// Level 0's height.
    pub height: u32,
    /// Which depth is farther.
    pub order: DepthOrder,
    /// Each level's depths, rows from the top, `level_size(k)` each.
    pub levels: Vec<Vec<f32>>,
}

impl CpuPyramid {
    /// Builds the pyramid of a `width × height` depth buffer (`depth` row
    /// by row from the top), as the GPU does.
    pub fn build(width: u32, height: u32, depth: &[f32], order: DepthOrder) -> Result<Self, CullError> {
        if width == 0 || height == 0 || depth.len() != width as usize * height as usize {
            return Err(CullError::InvalidParameter(
                "a depth pyramid needs width × height depths, both at least 1",
            ));
        }
        let mut levels = vec![depth.to_vec()];
        for k in 1..pyramid_levels(width, height) {
            let below = levels.last().expect("level 0");
            let (w, h) = pyramid_level_size(width, height, k - 1);
            let (nw, nh) = pyramid_level_size(width, height, k);
            let level = (0..nh)
                .flat_map(|y| (0..nw).map(move |x| (x, y)))
                .map(|(x, y)| {
                    let xs = reduced_span(x, nw, w);
                    let ys = reduced_span(y, nh, h);
                    let mut far: Option<f32> = None;
                    for by in ys {
                        for bx in xs.clone() {
                            let d = below[(by * w + bx) as usize];
                            far = Some(far.map_or(d, |f| order.farther(f, d)));
                        }
                    }
                    far.expect("a texel reduces at least one below")
                })
                .collect();
            levels.push(level);
        }
        Ok(Self {
            width,
            height,
            order,
            levels,
        })
    }

    /// The size of level `k`.
    pub fn level_size(&self, k: u32) -> (u32, u32) {
        pyramid_level_size(self.width, self.height, k)
    }

    /// Texel `(x, y)` of level `k`.
    pub fn texel(&self, k: u32, x: u32, y: u32) -> f32 {
        let (w, _) = self.level_size(k);
        self.levels[k as usize][(y * w + x) as usize]
    }
}

/// A depth pyramid on the GPU: an `R32Float` texture with
/// [`pyramid_levels`] mips, level 0 the size of the depth buffer it is
/// built from ([`PyramidBuilder::build`]); the late phase of an occlusion
/// cull reads it.
pub struct DepthPyramid {
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    mips: Vec<wgpu::TextureView>,
    params: wgpu::Buffer,
    width: u32,
    height: u32,
    order: DepthOrder,
}

impl DepthPyramid {
    /// Allocates the pyramid of a `width × height` depth buffer whose depth
    /// grows as `order` says.
    pub fn new(device: &wgpu::Device, width: u32, height: u32, order: DepthOrder) -> Result<Self, CullError> {
        let max = device.limits().max_texture_dimension_2d;
        if width == 0 || height == 0 || width > max || height > max {
            return Err(CullError::InvalidParameter(
                "a depth pyramid's size must be from 1 to the device's largest 2D texture",
            ));
        }
        let levels = pyramid_levels(width, height);
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("depth pyramid"),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            mip_level_count: levels,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::R32Float,
            usage: wgpu::TextureUsages::STORAGE_BINDING
                | wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::COPY_SRC
                | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        let mips = (0..levels)
            .map(|k| {
                texture.create_view(&wgpu::TextureViewDescriptor {
                    label: Some("depth pyramid level"),
                    base_mip_level: k,
                    mip_level_count: Some(1),
                    ..Default::default()
                })
            })
            .collect();
        let params = wgpu::util::DeviceExt::create_buffer_init(
            device,
            &wgpu::util::BufferInitDescriptor {
                label: Some("depth pyramid params"),
                contents: bytemuck::cast_slice(&[u32::from(order == DepthOrder::ReverseZ), 0, 0, 0]),
                usage: wgpu::BufferUsages::UNIFORM,
            },
        );
        Ok(Self {
            texture,
            view,
            mips,
            params,
            width,
            height,
            order,
        })
    }

    /// Level 0's width (the depth buffer's).
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Level 0's height.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Its levels ([`pyramid_levels`]).
    pub fn levels(&self) -> u32 {
        self.mips.len() as u32
    }

    /// Which depth is farther.
    pub fn order(&self) -> DepthOrder {
        self.order
    }

    /// The texture (every level).
    pub fn texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// A view of every level, as the late phase binds it.
    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }

    /// Writes every level from a pyramid built on the CPU
    /// ([`CpuPyramid::build`]) of the same size and order: for occluders
    /// known on the CPU, and where the GPU cannot build one.
    pub fn write_levels(&self, queue: &wgpu::Queue, pyramid: &CpuPyramid) -> Result<(), CullError> {
        if (pyramid.width, pyramid.height, pyramid.order) != (self.width, self.height, self.order)
            || pyramid.levels.len() != self.mips.len()
        {
            return Err(CullError::InvalidParameter(
                "the CPU pyramid's size, order or levels differ from the GPU pyramid's",
            ));
        }
        for (k, level) in pyramid.levels.iter().enumerate() {
            let (w, h) = pyramid_level_size(self.width, self.height, k as u32);
            queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: k as u32,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                bytemuck::cast_slice(level),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(w * 4),
                    rows_per_image: Some(h),
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
        }
        Ok(())
    }

    /// Copies every level back to the CPU, waiting for the GPU. For tests
    /// and tools.
    pub fn read_back(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<CpuPyramid, CullError> {
        let mut levels = Vec::new();
        for k in 0..self.levels() {
            let (w, h) = pyramid_level_size(self.width, self.height, k);
            let row =
                (w * 4).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("depth pyramid read-back"),
                size: row as u64 * h as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            encoder.copy_texture_to_buffer(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: k,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyBufferInfo {
                    buffer: &buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(row),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
            queue.submit([encoder.finish()]);
            let bytes = crate::readback::read_back(device, queue, &buffer, 0, buffer.size())?;
            let level = bytes
                .chunks_exact(row as usize)
                .flat_map(|r| r[..w as usize * 4].chunks_exact(4))
                .map(bytemuck::pod_read_unaligned::<f32>)
                .collect();
            levels.push(level);
        }
        Ok(CpuPyramid {
            width: self.width,
            height: self.height,
            order: self.order,
            levels,
        })
    }
}

/// Builds [`DepthPyramid`]s from depth buffers (`shaders/cull/pyramid.wgsl`).
/// Create once per device.
pub struct PyramidBuilder {
    module: wgpu::ShaderModule,
    /// Copies a single-sampled depth (a depth format or `R32Float`) to
    /// level 0.
    copy: Pass,
    /// Reduces a level to the next.
    reduce: Pass,
    /// Copies the farthest sample of a multisampled depth to level 0:
    /// compiled when first needed (GL compiles it only where it has
    /// `textureSamples`).
    copy_multisampled: std::sync::OnceLock<Pass>,
}

/// One pass of the pyramid: its pipeline and bind group layout.
struct Pass {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

/// The pyramid shader's workgroup edge (`@workgroup_size(8, 8)`).
const PYRAMID_GROUP: u32 = 8;

/// Binding of the pyramid shader's uniform (the depth order).
const PYRAMID_PARAMS: u32 = 0;
/// Binding of the level written.
const PYRAMID_OUT: u32 = 1;
/// Binding of a multisampled depth buffer.
const PYRAMID_SOURCE_MULTISAMPLED: u32 = 3;
/// Binding of a single-sampled depth buffer, or of the level below.
const PYRAMID_SOURCE: u32 = 4;

impl PyramidBuilder {
    /// Compiles the pyramid's passes. wgpu's GL backend is refused
    /// ([`CullError::UnsupportedBackend`]): its reduction passes, which read
    /// one mip of the texture and write the next, left the levels above 0
    /// unwritten (seen on llvmpipe), and a pyramid of wrong depths could
    /// cull what is visible. There, fill the levels from the CPU
    /// ([`DepthPyramid::write_levels`]).
    pub fn new(device: &wgpu::Device) -> Result<Self, CullError> {
        let backend = device.adapter_info().backend;
        if backend == wgpu::Backend::Gl {
            return Err(CullError::UnsupportedBackend {
                backend,
                what: "building a depth pyramid on the GPU",
            });
        }
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("depth pyramid"),
            source: wgpu::ShaderSource::Wgsl(PYRAMID_SHADER.source.into()),
        });
        let copy = Self::pass(device, &module, "copy_float", false, false);
        let reduce = Self::pass(device, &module, "reduce", true, false);
        Ok(Self {
            module,
            copy,
            reduce,
            copy_multisampled: std::sync::OnceLock::new(),
        })
    }

    fn pass(
        device: &wgpu::Device,
        module: &wgpu::ShaderModule,
        entry: &str,
        order: bool,
        multisampled: bool,
    ) -> Pass {
        let compute = wgpu::ShaderStages::COMPUTE;
        let mut entries = vec![
            wgpu::BindGroupLayoutEntry {
                binding: PYRAMID_OUT,
                visibility: compute,
                ty: wgpu::BindingType::StorageTexture {
                    access: wgpu::StorageTextureAccess::WriteOnly,
                    format: wgpu::TextureFormat::R32Float,
                    view_dimension: wgpu::TextureViewDimension::D2,
                },
                count: None,
            },
            wgpu::BindGroupLayoutEntry {
                binding: if multisampled {
                    PYRAMID_SOURCE_MULTISAMPLED
                } else {
                    PYRAMID_SOURCE
                },
                visibility: compute,
                ty: wgpu::BindingType::Texture {
                    sample_type: if multisampled {
                        wgpu::TextureSampleType::Depth
                    } else {
                        wgpu::TextureSampleType::Float { filterable: false }
                    },
                    view_dimension: wgpu::TextureViewDimension::D2,
                    multisampled,
                },
                count: None,
            },
        ];
        if order {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: PYRAMID_PARAMS,
                visibility: compute,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(entry),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(entry),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        Pass { layout, pipeline }
    }

    /// Records the build of `pyramid` from `depth`: a depth texture
    /// (`Depth32Float`, `Depth24Plus`, `Depth24PlusStencil8`,
    /// `Depth16Unorm`; multisampled or not) or an `R32Float` one, bound with
    /// `TEXTURE_BINDING`, the size of the pyramid's level 0. Its depth must
    /// grow as the pyramid's [`DepthOrder`] says. A multisampled depth gives
    /// each pixel its farthest sample.
    pub fn build(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        depth: &wgpu::Texture,
        pyramid: &DepthPyramid,
    ) -> Result<(), CullError> {
        use wgpu::TextureFormat as F;
        let is_depth = matches!(
            depth.format(),
            F::Depth32Float | F::Depth24Plus | F::Depth24PlusStencil8 | F::Depth16Unorm
        );
        let multisampled = depth.sample_count() > 1;
        if !(is_depth || (depth.format() == F::R32Float && !multisampled)) {
            return Err(CullError::InvalidParameter(
                "a depth pyramid is built from a depth texture or a single-sampled R32Float one",
            ));
        }
        if (depth.width(), depth.height()) != (pyramid.width, pyramid.height) {
            return Err(CullError::InvalidParameter(
                "the depth texture and the depth pyramid's level 0 differ in size",
            ));
        }
        if !depth.usage().contains(wgpu::TextureUsages::TEXTURE_BINDING) {
            return Err(CullError::InvalidParameter(
                "the depth texture needs TextureUsages::TEXTURE_BINDING",
            ));
        }
        let source_view = depth.create_view(&wgpu::TextureViewDescriptor {
            label: Some("depth pyramid source"),
            aspect: if is_depth {
                wgpu::TextureAspect::DepthOnly
            } else {
                wgpu::TextureAspect::All
            },
            base_mip_level: 0,
            mip_level_count: Some(1),
            ..Default::default()
        });
        let (first, source_binding) = if multisampled {
            let pass = self
                .copy_multisampled
                .get_or_init(|| Self::pass(device, &self.module, "copy_multisampled", true, true));
            (pass, PYRAMID_SOURCE_MULTISAMPLED)
        } else {
            (&self.copy, PYRAMID_SOURCE)
        };
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("depth pyramid"),
            timestamp_writes: None,
        });
        for k in 0..pyramid.levels() {
            let (step, input, binding) = if k == 0 {
                (first, &source_view, source_binding)
            } else {
                (&self.reduce, &pyramid.mips[k as usize - 1], PYRAMID_SOURCE)
            };
            let mut entries = vec![
                wgpu::BindGroupEntry {
                    binding: PYRAMID_OUT,
                    resource: wgpu::BindingResource::TextureView(&pyramid.mips[k as usize]),
                },
                wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::TextureView(input),
                },
            ];
            // Only the passes that compare depths read the order.
            if k > 0 || multisampled {
                entries.push(wgpu::BindGroupEntry {
                    binding: PYRAMID_PARAMS,
                    resource: pyramid.params.as_entire_binding(),
                });
            }
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("depth pyramid level"),
                layout: &step.layout,
                entries: &entries,
            });
            let (w, h) = pyramid_level_size(pyramid.width, pyramid.height, k);
            pass.set_pipeline(&step.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(w.div_ceil(PYRAMID_GROUP), h.div_ceil(PYRAMID_GROUP), 1);
        }
        Ok(())
    }
}

/// The pyramid's WGSL (an entry module of its own).
pub const PYRAMID_SHADER: crate::kernel::ShaderModule = crate::kernel::shader_module!("pyramid.wgsl");
