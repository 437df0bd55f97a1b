// Survivors are written as their index in the batch (4 bytes each); the draw
// fetches the instance data through it.
alias OutputElement = u32;

fn output_element(i: u32, inst: InstanceData) -> OutputElement {
    return params.chunk_start + i;
}
