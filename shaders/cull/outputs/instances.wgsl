// Survivors are written as copies of their instance data, ready to be read
// as per-instance vertex data or storage by the draw. An element is the
// instance's 16-byte parts (the same bytes), so that a subgroup can write
// its survivors part by part, every store covering consecutive parts
// (cull::scans::ballot_rows).
#define_import_path cull::outputs::instances

// The format's InstanceData (a #select line, as in items.wgsl).
// #select formats: InstanceData, instance_parts

// 16-byte parts per instance: the format's stride / 16 (cull_core's
// FormatKernel::stride).
const INSTANCE_PARTS: u32 = #{INSTANCE_PARTS}u;

struct OutputElement {
    parts: array<vec4<u32>, INSTANCE_PARTS>,
}

fn output_element(inst: InstanceData) -> OutputElement {
    return OutputElement(instance_parts(inst));
}
