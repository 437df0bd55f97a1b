//! Compiled passes and what encoding one needs: the layer between the
//! buffers and descriptors below and the scan variants above. A variant's
//! `encode` gets an [`EncodeContext`] and its [`CompiledPass`]es, in the
//! order of its [`PassLayout`]s.

use crate::CullError;
use crate::buffers::{CullInput, CullTarget};
use crate::cells::CellIndex;
use crate::kernel::{Chunk, DispatchShape, GpuParams, PARAMS_STRIDE, PassLayout, bindings};
use crate::timing::{PassKind, Recorder};

/// One pass, compiled: its pipeline and the layout of its group 0.
pub(crate) struct CompiledPass {
    pub layout: wgpu::BindGroupLayout,
    pub pipeline: wgpu::ComputePipeline,
    /// The bindings of its layout: [`EncodeContext::bind_group`] binds only
    /// these of the entries it is given (a visibility test's bindings are
    /// in the passes that vote only).
    pub bindings: Vec<u32>,
}

impl CompiledPass {
    /// Compiles `pass` from `module`; a typed error, before wgpu sees it,
    /// when the pass needs more storage buffers than the device binds per
    /// stage (WebGPU's default is 8; a batch past one binding needs more
    /// output windows).
    pub fn new(
        device: &wgpu::Device,
        module: &wgpu::ShaderModule,
        pass: &PassLayout,
    ) -> Result<Self, CullError> {
        check_storage_limit(device.limits(), pass)?;
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(pass.entry_point),
            entries: &pass.layout_entries(),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(pass.entry_point),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(pass.entry_point),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some(pass.entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                zero_initialize_workgroup_memory: pass.zeroed_workgroup_memory,
                ..Default::default()
            },
            cache: None,
        });
        Ok(Self {
            layout,
            pipeline,
            bindings: pass.bindings.iter().map(|&(b, _)| b).collect(),
        })
    }

    /// A pass compiled elsewhere (Bevy's `PipelineCache`) from `pass`: its
    /// group 0 layout is the pipeline's own.
    pub fn from_pipeline(pipeline: wgpu::ComputePipeline, pass: &PassLayout) -> Self {
        Self {
            layout: pipeline.get_bind_group_layout(0),
            pipeline,
            bindings: pass.bindings.iter().map(|&(b, _)| b).collect(),
        }
    }
}

/// [`CullError::TooManyStorageBuffers`] when `pass` binds more storage
/// buffers than `limits` allow per stage.
pub(crate) fn check_storage_limit(limits: wgpu::Limits, pass: &PassLayout) -> Result<(), CullError> {
    let needed = pass.storage_buffers();
    let limit = limits.max_storage_buffers_per_shader_stage;
    if needed > limit {
        return Err(CullError::TooManyStorageBuffers {
            pass: pass.entry_point.to_owned(),
            needed,
            limit,
        });
    }
    Ok(())
}

/// The binding of a byte range of a buffer.
pub(crate) fn bind_window(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset,
        size: wgpu::BufferSize::new(size),
    })
}

/// What encoding one cull needs: the buffers, the chunks, and how chunks
/// map to workgroups and uniform entries.
pub(crate) struct EncodeContext<'a, 'r> {
    pub device: &'a wgpu::Device,
    pub encoder: &'a mut wgpu::CommandEncoder,
    pub input: &'a CullInput,
    pub target: &'a CullTarget,
    /// The buffer holding the cull's uniform entries, and where they start
    /// there: the target's own, or, for a shared cull, the buffer of the
    /// culler's that its call took.
    pub params: (&'a wgpu::Buffer, u64),
    pub chunks: &'a [Chunk],
    pub dispatch: DispatchShape,
    /// Views culled (the target's first `views`).
    pub views: u32,
    /// Uniform entries per chunk and view slot (its passes', then one per
    /// extra step).
    pub params_per_chunk: u32,
    /// View slots of uniform entries per chunk: `views` for a kernel that
    /// dispatches per view, else 1 (one entry covers them all).
    pub param_views: u32,
    pub recorder: &'a mut Option<Recorder<'r>>,
    /// What the visibility test binds (the occlusion phases' history and
    /// pyramid), in every pass that votes.
    pub visibility_entries: &'a [wgpu::BindGroupEntry<'a>],
    /// A cull by cells: the batch's cells ([`crate::cells`]).
    pub cells: Option<&'a CellIndex>,
    /// A cull by cells whose kept cells the CPU listed: no cell pass.
    pub listed: Option<ListedCells>,
}

/// One dispatch of a cull, recorded later into a compute pass that culls
/// of other targets share ([`crate::Culler::cull_all`]): its pipeline, its
/// bind group with its uniform entry's offset, and its workgroup counts.
pub(crate) struct SharedDispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub offset: u32,
    pub dims: (u32, u32),
}

impl SharedDispatch {
    /// Records the dispatch into `pass`, whose pipeline the caller set.
    pub fn record(&self, pass: &mut wgpu::ComputePass) {
        pass.set_bind_group(0, &self.bind_group, &[self.offset]);
        pass.dispatch_workgroups(self.dims.0, self.dims.1, 1);
    }
}

/// The kept cells of a cull by cells as the CPU listed them
/// ([`crate::CellLayout::listed_tiles`]), in place of the cell pass's: each
/// chunk's list in `buffer` at the chunk's region (as the cell pass writes
/// it), and how many tiles each chunk's list holds (its dispatch's size).
pub(crate) struct ListedCells {
    pub buffer: wgpu::Buffer,
    pub tiles: Vec<u32>,
}

impl EncodeContext<'_, '_> {
    /// The dynamic offset of uniform entry `step` of `chunk` for view slot
    /// `view` (0 for a kernel that covers every view in one dispatch).
    pub fn params_offset(&self, chunk: &Chunk, view: u32, step: u32) -> u32 {
        let slot = chunk.index as u64 * self.param_views as u64 + view as u64;
        (self.params.1 + (slot * self.params_per_chunk as u64 + step as u64) * PARAMS_STRIDE) as u32
    }

    /// The binding of the uniform block (one entry; the offset picks it).
    pub fn params_entry(&self) -> wgpu::BindGroupEntry<'_> {
        wgpu::BindGroupEntry {
            binding: bindings::PARAMS,
            resource: bind_window(self.params.0, 0, size_of::<GpuParams>() as u64),
        }
    }

    /// Bind group entries shared by the passes that read instances and
    /// write survivors: params, the chunk's instances, and (`with_outputs`)
    /// draw arguments and the output windows.
    pub fn chunk_entries(&self, chunk: &Chunk, with_outputs: bool) -> Vec<wgpu::BindGroupEntry<'_>> {
        let stride = self.input.format().stride();
        let mut entries = vec![
            self.params_entry(),
            wgpu::BindGroupEntry {
                binding: bindings::INSTANCES,
                resource: bind_window(
                    self.input.buffer(),
                    chunk.start as u64 * stride,
                    chunk.len as u64 * stride,
                ),
            },
        ];
        entries.extend(self.visibility_entries.iter().cloned());
        if with_outputs {
            entries.push(wgpu::BindGroupEntry {
                binding: bindings::DRAW_ARGS,
                resource: self.target.draw_args().as_entire_binding(),
            });
            entries.extend(
                self.target
                    .output_windows()
                    .map(|(w, offset, size)| wgpu::BindGroupEntry {
                        binding: bindings::OUTPUT + w,
                        resource: bind_window(self.target.output_buffer(), offset, size),
                    }),
            );
        }
        entries
    }

    /// A bind group for `pass`, of the entries its layout has: the one the
    /// target's previous cull made, where it binds the same.
    pub fn bind_group(&self, pass: &CompiledPass, entries: &[wgpu::BindGroupEntry]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = entries
            .iter()
            .filter(|e| pass.bindings.contains(&e.binding))
            .cloned()
            .collect();
        self.target.bind_groups().get(self.device, &pass.layout, &entries)
    }

    /// Begins a compute pass, with timestamp writes when recording.
    pub fn begin_pass(&mut self, kind: PassKind) -> wgpu::ComputePass<'_> {
        let timestamp_writes = self.recorder.as_mut().and_then(|r| r.next(kind));
        self.encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(kind.label()),
            timestamp_writes,
        })
    }

    /// Workgroup counts of a chunk's dispatch.
    /// A cull by cells listed on the CPU: a workgroup per listed tile
    /// (one, which returns at once, for a chunk with none listed).
    pub fn dims(&self, chunk: &Chunk) -> (u32, u32) {
        match &self.listed {
            Some(listed) => self.dispatch.dims(listed.tiles[chunk.index as usize]),
            None => self.dispatch.dims(self.dispatch.groups_for(chunk.len)),
        }
    }

    /// Where the kept cells of a cull by `cells` are: the CPU's list, or
    /// the cell pass's.
    pub fn kept_cells<'c>(&'c self, cells: &'c CellIndex) -> &'c wgpu::Buffer {
        self.listed.as_ref().map_or(&cells.kept, |l| &l.buffer)
    }
}

/// A cull by cells ([`crate::cells`]) starts with the cell pass over every
/// cell of the chunks, which writes each chunk's kept cells.
pub(crate) fn encode_cell_pass(cx: &mut EncodeContext, cell_pass: &CompiledPass, cells: &CellIndex) {
    let Some(first) = cx.chunks.first() else {
        return;
    };
    let cell_count = cx
        .chunks
        .iter()
        .map(|c| c.len)
        .sum::<u32>()
        .div_ceil(cells.cell_len);
    let mut entries = vec![
        cx.params_entry(),
        wgpu::BindGroupEntry {
            binding: bindings::CELL_BOUNDS,
            resource: cells.bounds.as_entire_binding(),
        },
        wgpu::BindGroupEntry {
            binding: bindings::CELL_LISTS,
            resource: cells.kept.as_entire_binding(),
        },
    ];
    // The late occlusion phase's pyramid and uniforms (ModuleShape::passes
    // gives the cell pass those bindings then; bind_group drops them for a
    // cell pass without).
    entries.extend(
        cx.visibility_entries
            .iter()
            .filter(|e| [bindings::DEPTH_PYRAMID, bindings::TEST_UNIFORMS].contains(&e.binding))
            .cloned(),
    );
    let bind_group = cx.bind_group(cell_pass, &entries);
    // The first chunk's uniforms: the views' planes and the cell geometry
    // are the same in every entry.
    let offset = cx.params_offset(first, 0, 0);
    let (x, y) = cx
        .dispatch
        .dims(cell_count.div_ceil(crate::cells::CELL_PASS_WORKGROUP));
    let mut compute = cx.begin_pass(PassKind::Cells);
    compute.set_pipeline(&cell_pass.pipeline);
    compute.set_bind_group(0, &bind_group, &[offset]);
    compute.dispatch_workgroups(x, y, 1);
}
