//! What a launch asks EC2 for: the market, the pool's template and types, and a sized
//! job's shape. The scaler builds it from the pool's [`crate::config`] and the job's
//! [`crate::sizing`], and hands it to the [`Launcher`](crate::ports::Launcher) port.

/// Which market instances are bought in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Market {
    Spot,
    OnDemand,
}

impl Market {
    pub fn as_str(self) -> &'static str {
        match self {
            Market::Spot => "spot",
            Market::OnDemand => "on_demand",
        }
    }
}

/// Instances for one pool, launched in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRequest {
    pub pool: String,
    pub count: u32,
    /// The launch template (EC2 CreateFleet): the pool's, or the deployment's for a
    /// pool that names only an image.
    pub launch_template: String,
    /// Which version of `launch_template` the instances are built from.
    pub template_version: TemplateVersion,
    /// An image that overrides the template's (its root volume follows the image).
    pub ami: Option<String>,
    /// Every combination of type and subnet is offered to EC2.
    pub instance_types: Vec<String>,
    pub subnets: Vec<String>,
    pub market: Market,
    /// How EC2 allocates spot capacity among the types and zones offered (the pool's
    /// `spot_allocation_strategy`).
    pub spot_allocation: SpotAllocation,
    /// For a sized job ([`crate::sizing`]): the shape its instance must have, which
    /// replaces `instance_types` by the types that match it.
    pub shape: Option<Shape>,
    /// The root volume a sized job asks for, on the root device of the image launched.
    pub root_volume: Option<RootVolume>,
}

/// The instance a sized job asks for, within its pool's policy: every instance type
/// whose vCPUs and memory fall in these ranges (and, when given, of these families and
/// this architecture) may be launched for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    pub vcpus_min: u32,
    pub vcpus_max: u32,
    pub memory_mib_min: u64,
    /// No upper bound when `None`.
    pub memory_mib_max: Option<u64>,
    /// Instance families (`m7i`, `m7i-flex`); empty: any family.
    pub families: Vec<String>,
    /// EC2's name of the architecture (`x86_64`, `arm64`), when the job names one.
    pub architecture: Option<String>,
}

/// A root volume's size and, when given, its EBS type (`gp3`, `io2`...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVolume {
    pub gib: u32,
    pub volume_type: Option<String>,
}

/// Which version of its launch template a launch uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateVersion {
    /// The deployment's own template: the version its stack last wrote, which the
    /// launcher is told. CloudFormation adds a version on every update and never moves
    /// the default one, so `$Default` would stay the stack's first forever.
    Stack,
    /// A version as EC2 names it, `$Default`, `$Latest` or a number: what the pool
    /// configures for a template of its own (see [`crate::config::PoolConfig`]).
    Named(String),
}

/// How EC2 allocates a pool's spot capacity among the types and zones offered: EC2
/// Fleet's `SpotOptions.AllocationStrategy`, the pool's `spot_allocation_strategy:`
/// (read and explained in `config/spot_allocation.rs`).
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SpotAllocation {
    /// Lowest interruption risk first, then lowest price (EC2's recommendation).
    #[default]
    PriceCapacityOptimized,
    /// Lowest interruption risk, whatever the price.
    CapacityOptimized,
    /// Lowest price, whatever the interruption risk.
    LowestPrice,
}

impl SpotAllocation {
    /// EC2's name of the strategy.
    pub fn as_str(self) -> &'static str {
        match self {
            SpotAllocation::PriceCapacityOptimized => "price-capacity-optimized",
            SpotAllocation::CapacityOptimized => "capacity-optimized",
            SpotAllocation::LowestPrice => "lowest-price",
        }
    }
}
