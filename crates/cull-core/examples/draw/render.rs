//! The drawing side, which knows nothing of culling but the survivors'
//! vertex layout: a cube mesh, its shader, the pipeline that takes the
//! survivors as per-instance vertices, and render targets.

use cull_core::{CullTarget, InstanceFormat};
use glam::{Mat4, Vec3, Vec4};
use wgpu::TextureFormat;
use wgpu::util::DeviceExt;

/// The cube mesh (24 vertices: position, normal; 36 indices) and the
/// per-instance transform from `PosQuat`'s two attributes.
const SHADER: &str = r#"
struct Camera { clip_from_world: mat4x4<f32>, far: f32 }
@group(0) @binding(0) var<uniform> camera: Camera;
const LIGHT = vec3<f32>(0.4, 1.0, 0.3); // towards the light
struct Varyings {
    @builtin(position) clip: vec4<f32>,
    @location(0) normal: vec3<f32>,
    @location(1) color: vec3<f32>,
    @location(2) distance: f32,
}
fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    let t = 2.0 * cross(q.xyz, v);
    return v + q.w * t + cross(q.xyz, t);
}
@vertex fn vs(@location(0) position: vec3<f32>, @location(1) normal: vec3<f32>,
              @location(2) position_scale: vec4<f32>, @location(3) rotation: vec4<f32>) -> Varyings {
    let world = position_scale.xyz + rotate(rotation, position * position_scale.w);
    let tint = vec3<f32>(0.6, 0.5, 0.4) + 0.4 * sin(position_scale.xzx * vec3<f32>(0.05, 0.07, 0.0));
    let clip = camera.clip_from_world * vec4<f32>(world, 1.0);
    return Varyings(clip, rotate(rotation, normal), tint, clip.w);
}
@fragment fn fs(in: Varyings) -> @location(0) vec4<f32> {
    let light = 0.2 + 0.8 * max(dot(normalize(in.normal), normalize(LIGHT)), 0.0);
    // Fog hides the far plane, which culls the far side of the field.
    let fog = smoothstep(0.3 * camera.far, camera.far, in.distance);
    return vec4<f32>(in.color * light * (1.0 - fog), 1.0);
}"#;

pub const DEPTH: TextureFormat = TextureFormat::Depth32Float;

/// The cube's faces, four vertices each (position, normal), and their triangles.
pub fn cube() -> (Vec<[f32; 6]>, Vec<u16>) {
    let mut vertices = Vec::new();
    for axis in 0..3 {
        for sign in [-1.0f32, 1.0] {
            let normal = Vec3::from_array(std::array::from_fn(|a| if a == axis { sign } else { 0.0 }));
            // u × w = normal: counter-clockwise seen from outside, the front face.
            let u = normal.any_orthonormal_vector();
            let w = normal.cross(u);
            for (a, b) in [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)] {
                let p = 0.5 * (normal + a * u + b * w);
                vertices.push([p.x, p.y, p.z, normal.x, normal.y, normal.z]);
            }
        }
    }
    let indices = (0..6u16)
        .flat_map(|f| [0, 1, 2, 0, 2, 3].map(|k| f * 4 + k))
        .collect();
    (vertices, indices)
}

/// The cube's buffers, its camera uniform and its pipeline.
pub struct CubeRenderer {
    vertices: wgpu::Buffer,
    indices: wgpu::Buffer,
    camera: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipeline: wgpu::RenderPipeline,
}

impl CubeRenderer {
    /// Draws into `color` with a [`DEPTH`] buffer; the instances come in
    /// `format`'s layout.
    pub fn new(device: &wgpu::Device, color: TextureFormat, format: InstanceFormat) -> Self {
        use wgpu::BufferUsages;
        let (vertices, indices) = cube();
        let buffer = |contents: &[u8], usage| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents,
                usage,
            })
        };
        let vertices = buffer(bytemuck::cast_slice(&vertices), BufferUsages::VERTEX);
        let indices = buffer(bytemuck::cast_slice(&indices), BufferUsages::INDEX);
        let camera = buffer(&[0; 80], BufferUsages::UNIFORM | BufferUsages::COPY_DST);
        let source = wgpu::ShaderSource::Wgsl(SHADER.into());
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: None, source });
        let mesh_attributes = wgpu::vertex_attr_array![0 => Float32x3, 1 => Float32x3];
        // The survivors, in the input's format: position and scale at location 2, rotation at 3.
        let instance_attributes = format.vertex_attributes(2);
        let buffers = [
            wgpu::VertexBufferLayout {
                array_stride: 24,
                step_mode: wgpu::VertexStepMode::Vertex,
                attributes: &mesh_attributes,
            },
            format.vertex_layout(&instance_attributes),
        ];
        let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("draw"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &buffers,
            },
            primitive: wgpu::PrimitiveState {
                cull_mode: Some(wgpu::Face::Back),
                ..Default::default()
            },
            depth_stencil: Some(wgpu::DepthStencilState {
                format: DEPTH,
                depth_write_enabled: Some(true),
                depth_compare: Some(wgpu::CompareFunction::Less),
                stencil: Default::default(),
                bias: Default::default(),
            }),
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                targets: &[Some(color.into())],
            }),
            multiview_mask: None,
            cache: None,
        });
        let entries = [wgpu::BindGroupEntry {
            binding: 0,
            resource: camera.as_entire_binding(),
        }];
        let layout = &pipeline.get_bind_group_layout(0);
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &entries,
        });
        Self {
            vertices,
            indices,
            camera,
            bind_group,
            pipeline,
        }
    }

    /// Sets the camera: `far` is where the fog is thickest.
    pub fn set_camera(&self, queue: &wgpu::Queue, clip_from_world: Mat4, far: f32) {
        let m = clip_from_world;
        let uniforms = [m.x_axis, m.y_axis, m.z_axis, m.w_axis, Vec4::splat(far)];
        queue.write_buffer(&self.camera, 0, bytemuck::cast_slice(&uniforms));
    }

    /// Draws the survivors of `target`'s first view: the cube mesh per
    /// survivor, in one indirect draw whose instance count the cull wrote.
    pub fn draw(&self, pass: &mut wgpu::RenderPass, target: &CullTarget) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.set_vertex_buffer(0, self.vertices.slice(..));
        pass.set_index_buffer(self.indices.slice(..), wgpu::IndexFormat::Uint16);
        // The survivors as the per-instance vertex buffer (slot 1), and the draw.
        target.bind_view_instances(pass, 1, 0);
        target.draw_view_indexed(pass, 0);
    }
}

/// A render target; COPY_SRC for the headless mode, which reads its image back.
pub fn texture(device: &wgpu::Device, (width, height): (u32, u32), format: TextureFormat) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: None,
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}
