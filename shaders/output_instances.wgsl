// Survivors are written as copies of their instance data, ready to be read
// as per-instance vertex data or storage by the draw.
alias OutputElement = InstanceData;

fn output_element(i: u32, inst: InstanceData) -> OutputElement {
    return inst;
}
