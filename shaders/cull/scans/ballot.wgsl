// Ballot helpers shared by the passes that use subgroup operations
// (variants/subgroup_ballot.wgsl, variants/ordered_subgroup.wgsl). Ballots
// are 128 bits, so any subgroup size from 4 to 128 lanes works.
#define_import_path cull::scans::ballot

// Bits of the lanes below `lane` in a 128-bit ballot.
fn lanes_below(lane: u32) -> vec4<u32> {
    let word = vec4<u32>(0u, 32u, 64u, 96u);
    let full = vec4<bool>(lane >= 32u, lane >= 64u, lane >= 96u, lane >= 128u);
    let inside = vec4<bool>((lane > 0u) && (lane < 32u), (lane > 32u) && (lane < 64u),
                            (lane > 64u) && (lane < 96u), (lane > 96u) && (lane < 128u));
    let partial = (vec4<u32>(1u) << ((vec4<u32>(lane) - word) & vec4<u32>(31u))) - vec4<u32>(1u);
    return select(select(vec4<u32>(0u), partial, inside), vec4<u32>(0xffffffffu), full);
}

fn popcount_all(v: vec4<u32>) -> u32 {
    let c = countOneBits(v);
    return c.x + c.y + c.z + c.w;
}
