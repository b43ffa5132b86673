//! [`Ec2Fleet`]: the [`Fleet`] port on EC2 (the [`Launcher`](ephemera_core::ports::Launcher) half is in
//! [`crate::launch`]).
//!
//! The reaper lists the deployment's instances (by the deployment tag, see
//! [`crate::tags`]) and terminates them. EC2's error codes are sorted into what callers
//! branch on: no capacity (try another type or later), throttled, refused as asked,
//! transient.

use crate::tags;
use async_trait::async_trait;
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::InstanceStateName;
use aws_sdk_ec2::Client;
use ephemera_core::ports::{
    Fleet, FleetError, Instance, InstanceState, ShutdownBehaviour, TemplateVersion,
};
use time::OffsetDateTime;
use tracing::{instrument, warn};

/// Runner instances of one deployment.
#[derive(Debug, Clone)]
pub struct Ec2Fleet {
    pub(crate) client: Client,
    pub(crate) deployment: String,
    /// Root devices of the images launches run ([`crate::image`]).
    pub(crate) roots: crate::image::RootCache,
    /// EC2's instance types, for sized launches ([`crate::instance_types`]).
    pub(crate) catalog: crate::instance_types::Catalog,
    /// The version of the deployment's own launch template that launches use.
    pub(crate) stack_template_version: String,
    /// The same for its Session Manager template (pools with `ssm_access`).
    pub(crate) ssm_template_version: String,
}

/// The version of the deployment's launch template launched when the stack names none:
/// the newest, since CloudFormation never moves the default version.
pub const LATEST_VERSION: &str = "$Latest";

impl Ec2Fleet {
    pub fn new(client: Client, deployment: impl Into<String>) -> Self {
        Ec2Fleet {
            client,
            deployment: deployment.into(),
            roots: Default::default(),
            catalog: Default::default(),
            stack_template_version: LATEST_VERSION.to_owned(),
            ssm_template_version: LATEST_VERSION.to_owned(),
        }
    }

    /// Launches of the deployment's own template use `version`, the
    /// `LatestVersionNumber` the stack passes to the functions (template.yaml), so a
    /// stack update reaches the functions with their new configuration. Unless set,
    /// [`LATEST_VERSION`].
    pub fn with_stack_template_version(mut self, version: impl Into<String>) -> Self {
        self.stack_template_version = version.into();
        self
    }

    /// Launches of the deployment's Session Manager template use `version`, as
    /// [`Ec2Fleet::with_stack_template_version`] for the runner template.
    pub fn with_ssm_template_version(mut self, version: impl Into<String>) -> Self {
        self.ssm_template_version = version.into();
        self
    }

    /// The version `version` of the launch template `template` names for EC2: the stack
    /// writes two templates, each with its own versions.
    pub(crate) fn version_name<'a>(
        &'a self,
        template: &str,
        version: &'a TemplateVersion,
    ) -> &'a str {
        match version {
            TemplateVersion::Stack
                if template == ephemera_core::names::ssm_launch_template_name(&self.deployment) =>
            {
                &self.ssm_template_version
            }
            TemplateVersion::Stack => &self.stack_template_version,
            TemplateVersion::Named(name) => name,
        }
    }
}

/// What an EC2 error means to a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    CapacityUnavailable,
    Throttled,
    Rejected,
    Transient,
}

/// Sorts an EC2 error code; `client_error` says whether EC2 answered with a 4xx status.
pub(crate) fn classify(code: Option<&str>, client_error: bool) -> ErrorClass {
    match code {
        Some(
            "InsufficientInstanceCapacity"
            | "InsufficientCapacity"
            | "InsufficientHostCapacity"
            | "MaxSpotInstanceCountExceeded"
            | "SpotMaxPriceTooLow"
            | "UnfulfillableCapacity"
            | "InsufficientFreeAddressesInSubnet",
        ) => ErrorClass::CapacityUnavailable,
        Some("RequestLimitExceeded" | "Throttling" | "ThrottlingException") => {
            ErrorClass::Throttled
        }
        Some(_) if client_error => ErrorClass::Rejected,
        _ => ErrorClass::Transient,
    }
}

/// Maps a failed EC2 request onto the port's error, keeping it as the cause.
pub(crate) fn fleet_error<E>(err: SdkError<E, HttpResponse>) -> FleetError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let client_error = match &err {
        SdkError::ServiceError(context) => context.raw().status().is_client_error(),
        _ => false,
    };
    let code = err.code().map(str::to_owned);
    match classify(code.as_deref(), client_error) {
        ErrorClass::CapacityUnavailable => {
            FleetError::CapacityUnavailable(code.unwrap_or_default())
        }
        ErrorClass::Throttled => FleetError::Throttled(Box::new(err)),
        ErrorClass::Rejected => FleetError::Rejected {
            code: code.unwrap_or_default(),
            message: err.message().unwrap_or_default().to_owned(),
        },
        ErrorClass::Transient => FleetError::Transient(Box::new(err)),
    }
}

/// One error of an instant CreateFleet answer: EC2 gives one per override (instance
/// type and zone) it could not launch, next to the instances it did launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OverrideError {
    pub code: String,
    pub message: String,
}

/// Why an instant CreateFleet made fewer than `asked` instances, read from every error of
/// its answer (not the first only): a capacity error anywhere makes the shortfall a
/// capacity shortfall, so the spot → on-demand fallback happens even when another zone
/// answered `Unsupported`; then a throttled or transient one (worth a retry); then a
/// refusal. With every instance launched the errors are logged by the caller and the
/// answer is no shortfall.
pub(crate) fn fleet_shortfall(
    errors: &[OverrideError],
    launched: usize,
    asked: usize,
) -> Option<FleetError> {
    if launched >= asked {
        return None;
    }
    let of_class = |class: ErrorClass| {
        errors
            .iter()
            .filter(move |err| classify(Some(&err.code), true) == class)
    };
    let capacity: Vec<&str> = of_class(ErrorClass::CapacityUnavailable)
        .map(|err| err.code.as_str())
        .collect();
    if !capacity.is_empty() {
        let mut codes = capacity;
        codes.sort_unstable();
        codes.dedup();
        return Some(FleetError::CapacityUnavailable(codes.join(", ")));
    }
    let retryable = of_class(ErrorClass::Throttled)
        .chain(of_class(ErrorClass::Transient))
        .next();
    if let Some(err) = retryable {
        return Some(FleetError::Transient(
            format!("{}: {}", err.code, err.message).into(),
        ));
    }
    Some(match of_class(ErrorClass::Rejected).next() {
        Some(err) => FleetError::Rejected {
            code: err.code.clone(),
            message: err.message.clone(),
        },
        None => FleetError::CapacityUnavailable("fewer instances than asked".to_owned()),
    })
}

fn instance_state(name: Option<&InstanceStateName>) -> InstanceState {
    match name {
        Some(InstanceStateName::Pending) => InstanceState::Pending,
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(InstanceStateName::ShuttingDown) => InstanceState::ShuttingDown,
        Some(InstanceStateName::Terminated) => InstanceState::Terminated,
        Some(InstanceStateName::Stopping) => InstanceState::Stopping,
        Some(InstanceStateName::Stopped) => InstanceState::Stopped,
        other => {
            // Treated as still starting: alive, so neither forgotten nor reported gone.
            warn!(state = ?other, "unknown EC2 instance state");
            InstanceState::Pending
        }
    }
}

fn to_instance(instance: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    let id = instance.instance_id()?.to_owned();
    let tags = instance.tags();
    Some(Instance {
        id,
        state: instance_state(instance.state().and_then(|s| s.name())),
        pool: tags::value(tags, tags::POOL).map(str::to_owned),
        launched_at: instance
            .launch_time()
            .and_then(|at| OffsetDateTime::from_unix_timestamp_nanos(at.as_nanos()).ok()),
        image_id: instance.image_id().map(str::to_owned),
    })
}

impl Ec2Fleet {
    /// EC2 ModifyInstanceAttribute of `instanceInitiatedShutdownBehavior`, which may be
    /// changed while the instance is running or stopped. Sent as `Attribute` and `Value`,
    /// which the API takes for this attribute ("Value: ... Use only with the kernel,
    /// ramdisk, userData, disableApiTermination, or instanceInitiatedShutdownBehavior
    /// attribute",
    /// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyInstanceAttribute.html),
    /// and which moto applies too (its `InstanceInitiatedShutdownBehavior.Value` form is
    /// not implemented there).
    pub(crate) async fn modify_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        let call = self
            .client
            .modify_instance_attribute()
            .instance_id(instance_id)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::InstanceInitiatedShutdownBehavior)
            .value(behaviour.as_str());
        call.send().await.map(drop).map_err(fleet_error)
    }
}

#[async_trait]
impl Fleet for Ec2Fleet {
    #[instrument(skip_all, fields(instance_id, ?behaviour))]
    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        self.modify_shutdown_behaviour(instance_id, behaviour).await
    }

    #[instrument(skip_all, fields(instance_id))]
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        let result = self
            .client
            .terminate_instances()
            .instance_ids(instance_id)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if err.code() == Some("InvalidInstanceID.NotFound") => Ok(()),
            Err(err) => Err(fleet_error(err)),
        }
    }

    #[instrument(skip_all, fields(%template, ?version))]
    async fn launch_image(
        &self,
        template: &str,
        version: &TemplateVersion,
        ami: Option<&str>,
    ) -> Result<Option<String>, FleetError> {
        if let Some(ami) = ami {
            return Ok(Some(ami.to_owned()));
        }
        let version = self.version_name(template, version);
        self.template_image(template, version).await
    }

    #[instrument(skip_all, fields(deployment = %self.deployment))]
    async fn describe(&self) -> Result<Vec<Instance>, FleetError> {
        self.describe_where(&[]).await
    }

    /// Filtered by EC2 itself: a smaller answer than [`Fleet::describe`] once many
    /// instances have come and gone.
    async fn describe_live(&self) -> Result<Vec<Instance>, FleetError> {
        let live = aws_sdk_ec2::types::Filter::builder()
            .name("instance-state-name")
            .set_values(Some(
                ["pending", "running", "stopping", "stopped"]
                    .map(str::to_owned)
                    .to_vec(),
            ))
            .build();
        self.describe_where(&[live]).await
    }
}

impl Ec2Fleet {
    async fn describe_where(
        &self,
        filters: &[aws_sdk_ec2::types::Filter],
    ) -> Result<Vec<Instance>, FleetError> {
        let mut instances = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            let output = self
                .client
                .describe_instances()
                .set_filters(Some(
                    std::iter::once(tags::deployment_filter(&self.deployment))
                        .chain(filters.iter().cloned())
                        .collect(),
                ))
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(fleet_error)?;
            instances.extend(
                output
                    .reservations()
                    .iter()
                    .flat_map(|reservation| reservation.instances())
                    .filter_map(to_instance),
            );
            match output.next_token {
                Some(token) if !token.is_empty() => next_token = Some(token),
                _ => return Ok(instances),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_become_what_callers_branch_on() {
        for code in [
            "InsufficientInstanceCapacity",
            "InsufficientCapacity",
            "InsufficientHostCapacity",
            "MaxSpotInstanceCountExceeded",
            "SpotMaxPriceTooLow",
            "UnfulfillableCapacity",
            "InsufficientFreeAddressesInSubnet",
        ] {
            assert_eq!(classify(Some(code), true), ErrorClass::CapacityUnavailable);
        }
        assert_eq!(
            classify(Some("RequestLimitExceeded"), true),
            ErrorClass::Throttled
        );
        assert_eq!(classify(Some("Throttling"), true), ErrorClass::Throttled);
        for code in [
            "InvalidAMIID.NotFound",
            "InvalidSubnetID.NotFound",
            "InvalidParameterValue",
            "InvalidLaunchTemplateName.NotFoundException",
            "UnauthorizedOperation",
        ] {
            assert_eq!(classify(Some(code), true), ErrorClass::Rejected);
        }
        assert_eq!(
            classify(Some("InternalError"), false),
            ErrorClass::Transient
        );
        assert_eq!(classify(None, false), ErrorClass::Transient);
    }

    fn override_error(code: &str) -> OverrideError {
        OverrideError {
            code: code.to_owned(),
            message: format!("{code} in one zone"),
        }
    }

    #[test]
    fn a_capacity_error_anywhere_makes_a_capacity_shortfall() {
        let errors = [
            override_error("Unsupported"),
            override_error("InsufficientInstanceCapacity"),
        ];
        assert!(matches!(
            fleet_shortfall(&errors, 0, 2),
            Some(FleetError::CapacityUnavailable(codes)) if codes == "InsufficientInstanceCapacity"
        ));
        assert!(matches!(
            fleet_shortfall(&errors, 1, 2),
            Some(FleetError::CapacityUnavailable(_))
        ));
    }

    #[test]
    fn override_errors_next_to_a_full_launch_are_no_shortfall() {
        let errors = [
            override_error("Unsupported"),
            override_error("InsufficientInstanceCapacity"),
        ];
        assert!(fleet_shortfall(&errors, 3, 3).is_none());
        assert!(fleet_shortfall(&[], 3, 3).is_none());
    }

    #[test]
    fn without_capacity_errors_a_retryable_error_comes_before_a_refusal() {
        let errors = [
            override_error("Unsupported"),
            override_error("RequestLimitExceeded"),
        ];
        assert!(matches!(
            fleet_shortfall(&errors, 0, 1),
            Some(FleetError::Transient(_))
        ));
        assert!(matches!(
            fleet_shortfall(&[override_error("Unsupported")], 0, 1),
            Some(FleetError::Rejected { code, .. }) if code == "Unsupported"
        ));
        assert!(matches!(
            fleet_shortfall(&[], 1, 2),
            Some(FleetError::CapacityUnavailable(_))
        ));
    }

    fn offline_fleet() -> Ec2Fleet {
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .build();
        Ec2Fleet::new(Client::from_conf(config), "eph")
    }

    #[test]
    fn the_deployments_template_launches_the_version_its_stack_last_wrote() {
        let stack = TemplateVersion::Stack;
        let runner = "eph-runner";
        assert_eq!(offline_fleet().version_name(runner, &stack), LATEST_VERSION);
        let told = offline_fleet().with_stack_template_version("7");
        assert_eq!(told.version_name(runner, &stack), "7");
        let own = TemplateVersion::Named("$Default".to_owned());
        assert_eq!(
            told.version_name("team", &own),
            "$Default",
            "a pool's own template"
        );
    }

    #[test]
    fn the_session_manager_template_launches_its_own_stack_version() {
        let stack = TemplateVersion::Stack;
        let fleet = offline_fleet()
            .with_stack_template_version("7")
            .with_ssm_template_version("3");
        assert_eq!(fleet.version_name("eph-runner-ssm", &stack), "3");
        assert_eq!(fleet.version_name("eph-runner", &stack), "7");
        assert_eq!(
            offline_fleet().version_name("eph-runner-ssm", &stack),
            LATEST_VERSION
        );
    }

    #[test]
    fn unknown_states_count_as_alive() {
        assert_eq!(
            instance_state(Some(&InstanceStateName::Terminated)),
            InstanceState::Terminated
        );
        assert_eq!(instance_state(None), InstanceState::Pending);
    }
}
