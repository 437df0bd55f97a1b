// Survivors are written as copies of their instance data, ready to be read
// as per-instance vertex data or storage by the draw.
#define_import_path cull::outputs::instances

// The format's InstanceData (one line per format, as in items.wgsl).
#ifdef FORMAT_MATRIX
#import cull::formats::matrix::InstanceData
#else ifdef FORMAT_POSQUAT
#import cull::formats::posquat::InstanceData
#else ifdef FORMAT_PACKED16
#import cull::formats::packed16::InstanceData
#endif

struct OutputElement {
    instance: InstanceData,
}

fn output_element(inst: InstanceData) -> OutputElement {
    return OutputElement(inst);
}
