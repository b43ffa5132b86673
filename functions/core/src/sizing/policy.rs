//! Whether a pool's policy ([`SizingPolicy`]) allows a sizing request: a pure check
//! whose refusal names the label and the bound it passes, for the unrouted record.

use super::{SizingRequest, PREFIX};
use crate::config::{PoolConfig, SizingPolicy};

/// Why `pool` cannot take `request`, if it cannot. A range is allowed while its
/// minimum fits (the launch asks within the policy's bound); an exact value or a
/// minimum above a bound is refused.
pub fn refusal(pool: &PoolConfig, request: &SizingRequest) -> Option<String> {
    let policy: &SizingPolicy = &pool.sizing;
    if !policy.accept {
        return Some(format!(
            "pool {:?} does not accept sizing labels (its sizing.accept is false)",
            pool.name
        ));
    }
    let label = |key: &str, value: &dyn std::fmt::Display| format!("{PREFIX}{key}={value}");
    if let Some(cpu) = request.cpu {
        let cap = policy
            .max_vcpus_per_runner
            .min(pool.max_vcpus.unwrap_or(u32::MAX));
        if cpu.min > cap {
            return Some(format!(
                "{} asks at least {} vCPUs, above pool {:?}'s limit of {cap} per runner \
                 (sizing.max_vcpus_per_runner, max_vcpus)",
                label("cpu", &cpu),
                cpu.min,
                pool.name
            ));
        }
    }
    if let Some(ram) = request.ram_gib.filter(|r| r.min > policy.max_memory_gib) {
        return Some(format!(
            "{} asks at least {} GiB of memory, above pool {:?}'s sizing.max_memory_gib ({})",
            label("ram", &ram),
            ram.min,
            pool.name,
            policy.max_memory_gib
        ));
    }
    if let Some(disk) = request
        .disk
        .as_ref()
        .filter(|d| d.gib > policy.max_disk_gib)
    {
        return Some(format!(
            "{} asks a {} GiB root volume, above pool {:?}'s sizing.max_disk_gib ({})",
            label("disk", disk),
            disk.gib,
            pool.name,
            policy.max_disk_gib
        ));
    }
    let allowed = |family: &String| policy.families.is_empty() || policy.families.contains(family);
    if let Some(family) = request.families.iter().find(|f| !allowed(f)) {
        return Some(format!(
            "{} names family {family:?}, not among pool {:?}'s sizing.families [{}]",
            label("family", &request.families.join("+")),
            pool.name,
            policy.families.join(", ")
        ));
    }
    if let Some(image) = request.image.as_ref() {
        if !policy.images.contains_key(image) {
            let names: Vec<&str> = policy.images.keys().map(String::as_str).collect();
            return Some(format!(
                "{} is not an image pool {:?} configured (sizing.images: [{}])",
                label("image", image),
                pool.name,
                names.join(", ")
            ));
        }
    }
    if let Some(spot) = request.spot.filter(|s| !policy.spot.contains(s)) {
        let what = if spot { "spot" } else { "on-demand" };
        return Some(format!(
            "{} asks {what}, which pool {:?}'s sizing.spot does not allow",
            label("spot", &spot),
            pool.name
        ));
    }
    None
}
