//! The end of a runner host: when its runner process exits (an ephemeral runner's job
//! is done, or GitHub removed the runner, or it could not start), `bootstrap.sh` runs
//! `shutdown -h now`, and EC2 applies the instance's shutdown behaviour; so does a
//! stopped pool's host once it has prepared (see [`super::agent`]). The agent plays
//! that through the EC2 API: `terminate` ends the instance (TerminateInstances), `stop`
//! stops it (StopInstances). Unless the host hangs (a fault): then it stays up.
//!
//! The behaviour is the instance's `instanceInitiatedShutdownBehavior` attribute, which
//! instances launched through a launch template take from it (the strict layer makes
//! moto's CreateFleet do so, see `strict_moto/fleet_templates.py`).

use super::Shared;
use aws_sdk_ec2::types::{InstanceAttributeName, ShutdownBehavior};
use std::sync::Arc;

pub struct Power {
    ec2: aws_sdk_ec2::Client,
}

impl Power {
    pub fn new(ec2: aws_sdk_ec2::Client) -> Power {
        Power { ec2 }
    }

    /// Powers off every host whose runner exited, or that prepared, since the last call.
    pub async fn power_off_exited(&self, shared: &Arc<Shared>) {
        let hosts = std::mem::take(&mut shared.lock().hosts_to_power_off);
        for instance_id in hosts {
            if shared.faults().host_hangs() {
                tracing::warn!(instance_id = %instance_id, "host hangs at power-off (injected)");
                shared.lock().counters.hosts_hung += 1;
                continue;
            }
            match self.power_off(&instance_id).await {
                Ok(behaviour) => {
                    tracing::info!(instance_id = %instance_id, behaviour = %behaviour, "host powered off");
                    shared.lock().counters.hosts_powered_off += 1;
                }
                Err(error) => {
                    tracing::warn!(instance_id = %instance_id, error = %error, "host cannot power off")
                }
            }
        }
    }

    async fn power_off(&self, instance_id: &str) -> anyhow::Result<String> {
        let behaviour = self.shutdown_behaviour(instance_id).await?;
        if behaviour == ShutdownBehavior::Terminate {
            let call = self.ec2.terminate_instances().instance_ids(instance_id);
            call.send().await?;
        } else {
            let call = self.ec2.stop_instances().instance_ids(instance_id);
            call.send().await?;
        }
        Ok(behaviour.as_str().to_owned())
    }

    async fn shutdown_behaviour(&self, instance_id: &str) -> anyhow::Result<ShutdownBehavior> {
        let attribute = self
            .ec2
            .describe_instance_attribute()
            .instance_id(instance_id)
            .attribute(InstanceAttributeName::InstanceInitiatedShutdownBehavior)
            .send()
            .await?;
        Ok(attribute
            .instance_initiated_shutdown_behavior()
            .and_then(|v| v.value())
            .map(ShutdownBehavior::from)
            .unwrap_or(ShutdownBehavior::Stop))
    }
}
