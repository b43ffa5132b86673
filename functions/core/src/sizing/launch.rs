//! What the launch of a sized job asks EC2 for: the request of its labels, bounded by
//! its pool's policy, as a [`FleetRequest`]. The launcher turns the [`Shape`] into the
//! instance types that match it; everything else (template, subnets, one instance per
//! runner, spot then on-demand) is the pool's launch as for any job.

use super::{Arch, SizingRequest};
use crate::config::PoolConfig;
use crate::model::{FleetRequest, Market, RootVolume, Shape};

/// One GiB in MiB: the labels speak GiB, EC2's `MemoryMiB` and instance types MiB.
const MIB_PER_GIB: u64 = 1024;

/// Why a sized job cannot be launched as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizedLaunchError {
    /// The image the job names is an SSM parameter, which the launch does not resolve
    /// yet (`resolve:ssm:` is not offered to CreateFleet here).
    #[error("image {name:?} of pool {pool:?} is the SSM parameter {path:?}; a sized launch takes only an AMI id (ami-…) for now")]
    SsmImage {
        pool: String,
        name: String,
        path: String,
    },
}

/// The instance types a sized job may run on: `None` when its labels name none of
/// `cpu`, `ram`, `family` and `arch` (it then runs on the pool's own types).
pub fn shape(pool: &PoolConfig, request: &SizingRequest) -> Option<Shape> {
    let asks_type = request.cpu.is_some()
        || request.ram_gib.is_some()
        || !request.families.is_empty()
        || request.arch.is_some();
    if !asks_type {
        return None;
    }
    let policy = &pool.sizing;
    let vcpu_cap = policy
        .max_vcpus_per_runner
        .min(pool.max_vcpus.unwrap_or(u32::MAX));
    let (vcpus_min, vcpus_max) = match request.cpu {
        Some(cpu) => (cpu.min, cpu.max.unwrap_or(vcpu_cap).min(vcpu_cap)),
        None => (1, vcpu_cap),
    };
    let ram_cap = policy.max_memory_gib;
    let (ram_min, ram_max) = match request.ram_gib {
        Some(ram) => (ram.min, ram.max.unwrap_or(ram_cap).min(ram_cap)),
        None => (0, ram_cap),
    };
    Some(Shape {
        vcpus_min,
        vcpus_max,
        memory_mib_min: u64::from(ram_min) * MIB_PER_GIB,
        memory_mib_max: Some(u64::from(ram_max) * MIB_PER_GIB),
        // The job's families, or else the ones the policy allows (all when it names none).
        families: if request.families.is_empty() {
            policy.families.clone()
        } else {
            request.families.clone()
        },
        architecture: request.arch.map(|arch| {
            match arch {
                Arch::X64 => "x86_64",
                Arch::Arm64 => "arm64",
            }
            .to_owned()
        }),
    })
}

/// The launch of `count` runners of `pool` for jobs asking `request`: the pool's own
/// launch ([`crate::handlers::scaler::fleet_request`]) with the shape, root volume,
/// image and purchase option the job asks. `market` is the market of this try (the
/// spot → on-demand fallback asks again on demand).
pub fn sized_fleet_request(
    base: FleetRequest,
    pool: &PoolConfig,
    request: &SizingRequest,
) -> Result<FleetRequest, SizedLaunchError> {
    let ami = match request.image.as_ref() {
        None => base.ami.clone(),
        Some(name) => {
            let location = pool.sizing.images.get(name).cloned().unwrap_or_default();
            if let Some(path) = location.strip_prefix("ssm:") {
                return Err(SizedLaunchError::SsmImage {
                    pool: pool.name.clone(),
                    name: name.clone(),
                    path: path.to_owned(),
                });
            }
            Some(location)
        }
    };
    Ok(FleetRequest {
        ami,
        shape: shape(pool, request),
        root_volume: request.disk.as_ref().map(|disk| RootVolume {
            gib: disk.gib,
            volume_type: disk.volume_type.clone(),
        }),
        ..base
    })
}

/// The market a sized job's launch tries first: the one its `spot` label names, or the
/// pool's.
pub fn first_market(pool: &PoolConfig, request: &SizingRequest) -> Market {
    match request.spot.unwrap_or(pool.spot) {
        true => Market::Spot,
        false => Market::OnDemand,
    }
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
