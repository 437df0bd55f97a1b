// Survivors are written as their index in the batch (4 bytes each); the draw
// fetches the instance data through it.
#define_import_path cull::outputs::indices

#import cull::params::params

struct OutputElement {
    batch_index: u32,
}

// The element for the chunk's instance `i` (indices need no instance data).
fn output_element(i: u32) -> OutputElement {
    return OutputElement(params.chunk_start + i);
}
