"""EC2's rules for stopping and starting instances, where moto stops and starts anything
at once.

- Only a running instance stops; one already stopping or stopped is left as it is; any
  other state is refused with `IncorrectInstanceState`. A stop passes through `stopping`
  for `ec2_stop_seconds` before `stopped` ("Stop and start Amazon EC2 instances",
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Stop_Start.html: the instance
  "enters the stopping state", then "stopped").
- A spot instance is refused with `UnsupportedOperation`: only a persistent spot
  request's instance can be stopped, and CreateFleet `instant` makes one-time requests
  ("You can't stop the Spot Instance … because it is associated with a one-time Spot
  Instance request", the same page, "Limitations").
- Only a stopped instance starts; a pending or running one is left as it is; a stopping,
  shutting-down or terminated one is refused with `IncorrectInstanceState`. A start passes
  through `pending` for `ec2_start_seconds` before `running`.
- Each instance stopped or started takes a token of the call's resource bucket: 1,000
  held, 20 a second for StopInstances and 2 a second for StartInstances ("Request
  throttling for the Amazon EC2 API", resource token bucket sizes and refill rates,
  https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html); an empty
  bucket answers `RequestLimitExceeded`, nothing changed.
- `ec2_start_insufficient_capacity` = N refuses the next N StartInstances with
  `InsufficientInstanceCapacity`, as EC2 does when the zone has none of the type
  ("Troubleshoot Amazon EC2 instance launch issues", insufficient instance capacity,
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/troubleshooting-launch.html).

Each refusal is counted under its kind (`ec2_stop_refused`, `ec2_start_refused`,
`ec2_start_insufficient_capacity`, `ec2_stop_throttled`, `ec2_start_throttled`).
`install()` wraps moto's Instance.start and Instance.stop; `settle()` finishes the
transitions whose time has come, and runs before every request."""

from .core import STATE

RESOURCE_BUCKET = 1000
STOP_REFILL = 20
START_REFILL = 2
CODES = {"pending": 0, "running": 16, "stopping": 64, "stopped": 80}


def settle():
    """Moves every instance whose stop or start has taken its time on to its end state."""
    with STATE.lock:
        if not STATE.instance_transitions:
            return
        now = STATE.clock.now()
        for key, (instance, via, to, due) in list(STATE.instance_transitions.items()):
            if instance._state.name != via:  # terminated meanwhile
                del STATE.instance_transitions[key]
            elif now >= due:
                instance._state.name, instance._state.code = to, CODES[to]
                del STATE.instance_transitions[key]


def refuse(kind, code, message):
    from moto.ec2.exceptions import EC2ClientError

    STATE.count(kind)
    raise EC2ClientError(code, message)


def take(call, refill, kind):
    if not STATE.take_token(f"ec2:{call}:resource", refill, RESOURCE_BUCKET):
        refuse(kind, "RequestLimitExceeded", "Request limit exceeded.")


def begin(instance, via, to, seconds):
    with STATE.lock:
        instance._state.name, instance._state.code = via, CODES[via]
        due = STATE.clock.now() + float(seconds)
        STATE.instance_transitions[id(instance)] = (instance, via, to, due)


def install():
    from moto.ec2.models.instances import Instance

    original_stop, original_start = Instance.stop, Instance.start

    def stop(self):
        if not STATE.setting("enabled"):
            return original_stop(self)
        settle()
        state = self._state.name
        if getattr(self, "lifecycle", None) == "spot":
            refuse(
                "ec2_stop_refused",
                "UnsupportedOperation",
                f"You can't stop the Spot Instance '{self.id}' because it is associated with a "
                "one-time Spot Instance request. You can only stop Spot Instances associated with "
                "persistent Spot Instance requests.",
            )
        if state in ("stopping", "stopped"):
            return self._state.__class__(state, CODES[state])
        if state != "running":
            refuse(
                "ec2_stop_refused",
                "IncorrectInstanceState",
                f"The instance '{self.id}' is not in a state from which it can be stopped.",
            )
        take("StopInstances", STOP_REFILL, "ec2_stop_throttled")
        previous = original_stop(self)
        begin(self, "stopping", "stopped", STATE.setting("ec2_stop_seconds"))
        return previous

    def start(self):
        if not STATE.setting("enabled"):
            return original_start(self)
        settle()
        state = self._state.name
        if state in ("pending", "running"):
            return self._state.__class__(state, CODES[state])
        if state != "stopped":
            refuse(
                "ec2_start_refused",
                "IncorrectInstanceState",
                f"The instance '{self.id}' is not in a state from which it can be started.",
            )
        with STATE.lock:
            refusals = STATE.settings["ec2_start_insufficient_capacity"]
            if refusals > 0:
                STATE.settings["ec2_start_insufficient_capacity"] = refusals - 1
        if refusals > 0:
            refuse(
                "ec2_start_insufficient_capacity",
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {self.instance_type} capacity in the "
                f"Availability Zone you requested ({self.placement}). Our system will be working "
                "on provisioning additional capacity.",
            )
        take("StartInstances", START_REFILL, "ec2_start_throttled")
        previous = original_start(self)
        begin(self, "pending", "running", STATE.setting("ec2_start_seconds"))
        return previous

    Instance.stop, Instance.start = stop, start
