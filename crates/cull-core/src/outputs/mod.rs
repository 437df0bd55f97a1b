//! Output kinds: what compaction writes for each survivor. One module each
//! (the Rust descriptor here, the WGSL in `shaders/cull/outputs/`),
//! registered in [`OUTPUTS`] and selected by shader def in `items.wgsl`
//! (its `#select outputs` line, generated from the registry:
//! [`crate::selection`]).

use crate::InstanceFormat;
use crate::kernel::{ShaderModule, shader_module};

/// What the compaction writes for each survivor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OutputKind {
    /// A copy of the instance, in the input's format: the draw reads it as
    /// per-instance data directly.
    #[default]
    Instances,
    /// The survivor's index in the batch (`u32`): 4 bytes written per survivor,
    /// the draw fetches the instance through it.
    Indices,
}

/// One output kind, described.
pub(crate) struct OutputKernel {
    pub kind: OutputKind,
    /// Bytes per element; `None`: the instance format's stride.
    pub element_bytes: Option<u64>,
    /// The shader def that selects it in `items.wgsl`.
    pub shader_def: &'static str,
    /// Its WGSL: `OutputElement` and `output_element()`.
    pub module: ShaderModule,
}

/// The registry.
pub(crate) static OUTPUTS: [OutputKernel; 2] = [
    OutputKernel {
        kind: OutputKind::Instances,
        element_bytes: None,
        shader_def: "OUTPUT_INSTANCES",
        module: shader_module!("outputs/instances.wgsl"),
    },
    OutputKernel {
        kind: OutputKind::Indices,
        element_bytes: Some(4),
        shader_def: "OUTPUT_INDICES",
        module: shader_module!("outputs/indices.wgsl"),
    },
];

impl OutputKind {
    /// Every output kind.
    pub const ALL: [OutputKind; 2] = [Self::Instances, Self::Indices];

    /// This kind's registration.
    pub(crate) const fn kernel(self) -> &'static OutputKernel {
        let mut i = 0;
        while i < OUTPUTS.len() {
            if OUTPUTS[i].kind as u8 == self as u8 {
                return &OUTPUTS[i];
            }
            i += 1;
        }
        panic!("every output kind is registered in OUTPUTS")
    }

    /// Bytes per output element.
    pub const fn stride(self, format: InstanceFormat) -> u64 {
        match self.kernel().element_bytes {
            Some(bytes) => bytes,
            None => format.stride(),
        }
    }
}
