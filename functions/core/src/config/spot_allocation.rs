//! A pool's spot allocation strategy (`spot_allocation_strategy:`): how EC2 picks among
//! the spot pools (instance type × zone) a launch offers.
//!
//! EC2 Fleet's `SpotOptions.AllocationStrategy`
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_SpotOptionsRequest.html>;
//! "Allocation strategies for Spot Instances" in the EC2 User Guide,
//! <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-allocation-strategy.html>)
//! recommends `price-capacity-optimized`: the pools least likely to be interrupted, and
//! the cheapest of those. `capacity-optimized` looks at capacity alone and may pick a
//! far dearer type when a sized launch offers up to 300; `lowest-price` looks at price
//! alone and is interrupted more often.

pub use crate::model::SpotAllocation;

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn pool(extra: &str) -> Result<crate::config::PoolConfig, String> {
        let text = format!(
            "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - name: p\n    labels: [a]\n    \
             max_runners: 1\n    instance_types: [m7i.large]\n    ami: ami-1\n    spot: true\n{extra}"
        );
        Config::parse("c.yaml", &text)
            .map(|c| c.pools[0].clone())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn spot_is_price_capacity_optimized_unless_the_pool_says_otherwise() {
        let default = pool("").expect("valid");
        assert_eq!(
            default.spot_allocation_strategy.as_str(),
            "price-capacity-optimized"
        );
        let chosen = pool("    spot_allocation_strategy: capacity-optimized\n").expect("valid");
        assert_eq!(
            chosen.spot_allocation_strategy.as_str(),
            "capacity-optimized"
        );
        let err = pool("    spot_allocation_strategy: cheapest\n").expect_err("unknown");
        assert!(err.contains("pools[0].spot_allocation_strategy"), "{err}");
    }
}
