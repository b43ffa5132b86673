//! A job's start on each host mode, stage by stage: the stopped host's stages are the
//! ones the stopped pool's design names, every stage quotes its source's figure and method or says why it
//! is assumed, the bimodal webhook keeps the published shape, the goals are judged on
//! the stage that costs the most, and the committed flood report covers 20 seeds.

use ephemera_model::host::{peer_stages, stages, Host, Source, Stage, Track};
use ephemera_model::quotas::Latencies;
use ephemera_model::stages::{START_TO_USER_DATA, WEBHOOK_DELIVERY};
use ephemera_model::start::{costliest, one_start};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

fn names(host: Host) -> Vec<&'static str> {
    stages(host, &Latencies::default())
        .iter()
        .map(|stage| stage.name)
        .collect()
}

fn every_stage() -> Vec<Stage> {
    let latencies = Latencies::default();
    Host::ALL
        .iter()
        .flat_map(|&host| stages(host, &latencies))
        .chain(peer_stages(&latencies))
        .collect()
}

#[test]
fn a_stopped_host_is_taken_written_started_then_resumes_the_bootstrap() {
    let all = stages(Host::Stopped, &Latencies::default());
    let position = |part: &str| {
        all.iter()
            .position(|stage| stage.name.contains(part))
            .unwrap_or_else(|| panic!("no stage with {part:?} in {all:#?}"))
    };
    // The take, the JIT config under the instance's ARN, then the start, in that order,
    // all before the instance runs.
    let (taken, written, started) = (
        position("stopped instance taken"),
        position("under the instance's ARN"),
        position("scaler: StartInstances"),
    );
    assert!(taken < written && written < started, "{all:#?}");
    for at in [taken, written, started] {
        assert_eq!(all[at].track, Track::Control, "{:?}", all[at]);
    }
    // StartInstances → running, the resumed bootstrap (Docker, the config, the runner),
    // then GitHub's assignment.
    let boot = position("StartInstances → running");
    assert_eq!(all[boot].track, Track::Boot);
    assert!(boot < position("Docker started"));
    assert!(position("JIT config read") < position("runner start and registration"));
    assert_eq!(all.last().map(|stage| stage.track), Some(Track::Assignment));
    // Nothing of a launch: no CreateFleet, no launch stage, and the volume's blocks were
    // read when the instance was prepared.
    let names = names(Host::Stopped);
    for launch_only in ["CreateFleet", "launch →", "EBS initialization", "download"] {
        assert!(
            names.iter().all(|name| !name.contains(launch_only)),
            "{launch_only}: {names:?}"
        );
    }
}

#[test]
fn the_boot_is_one_stage_from_end_to_end_figures_not_a_split() {
    for host in [Host::Stock, Host::Baked, Host::BakedStale] {
        let names = names(host);
        let launches = names
            .iter()
            .filter(|name| name.starts_with("launch → SSH"))
            .count();
        assert_eq!(launches, 1, "{host:?}: {names:?}");
        assert!(
            names
                .iter()
                .all(|name| !name.contains("pending → running") && !name.contains("OS boot")),
            "{names:?}"
        );
    }
}

#[test]
fn a_baked_host_pays_ebs_initialization_and_dockers_start_and_a_stock_one_its_installs() {
    let baked = names(Host::Baked);
    assert!(baked.iter().any(|name| name.contains("EBS initialization")));
    assert!(baked.iter().any(|name| name.contains("Docker started")));
    let stock = names(Host::Stock);
    assert!(stock.iter().any(|name| name.contains("package installs")));
    assert!(stock
        .iter()
        .all(|name| !name.contains("EBS initialization")));
}

/// A cited stage quotes a figure and says how it was obtained; an assumed one says why.
#[test]
fn every_stage_quotes_a_figure_and_its_method_or_says_it_is_assumed_and_why() {
    const METHODS: [&str; 4] = ["timed", "defaults to", "as systemd times", "→"];
    for stage in every_stage() {
        match stage.source {
            Source::Cited(text) => {
                assert!(
                    text.chars().any(|c| c.is_ascii_digit()),
                    "no figure: {stage:?}"
                );
                assert!(
                    METHODS.iter().any(|method| text.contains(method)),
                    "no method (what was timed, from where to where): {stage:?}"
                );
            }
            Source::Assumed(reason) => {
                assert!(reason.len() > 30, "no reason: {stage:?}");
                assert!(stage.source.text().starts_with("assumed: "));
            }
        }
    }
}

#[test]
fn the_webhook_delivery_keeps_its_published_shape_most_within_3_s_one_in_twenty_minutes_late() {
    let mut rng = StdRng::seed_from_u64(41);
    let mut drawn: Vec<f64> = (0..20_000)
        .map(|_| one_start(&[WEBHOOK_DELIVERY], &mut rng))
        .collect();
    drawn.sort_by(f64::total_cmp);
    let at = |p: f64| drawn[((drawn.len() - 1) as f64 * p) as usize];
    assert!((1.8..2.5).contains(&at(0.5)), "p50 {}", at(0.5));
    assert!(at(0.9) < 4.0, "p90 {} (published 3 s)", at(0.9));
    assert!(at(0.95) > 100.0, "p95 {} (published 143-162 s)", at(0.95));
}

#[test]
fn a_stopped_host_misses_its_goal_on_its_start_stage_alone() {
    let all = stages(Host::Stopped, &Latencies::default());
    let costliest = costliest(&all).expect("stages");
    assert_eq!(costliest.name, START_TO_USER_DATA.name);
    let goal = Host::Stopped.goal_p50().expect("a goal");
    assert!(costliest.latency.median > goal, "{costliest:?} {goal:?}");
}

#[test]
fn the_peer_starts_as_its_defaults_do_non_ephemeral_with_its_start_script() {
    let peer: Vec<&str> = peer_stages(&Latencies::default())
        .iter()
        .map(|stage| stage.name)
        .collect();
    for part in [
        "registration token",
        "config.sh",
        "four AWS CLI calls",
        "CloudWatch agent",
    ] {
        assert!(
            peer.iter().any(|name| name.contains(part)),
            "{part}: {peer:?}"
        );
    }
    assert!(
        peer.iter().all(|name| !name.contains("jitconfig")),
        "{peer:?}"
    );
}

/// The committed bench/model.json: the flooded cases over at least 20 seeds, each with a
/// mean between its least and its most.
#[test]
fn the_committed_flood_report_covers_at_least_20_seeds() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/model.json");
    let text = std::fs::read_to_string(path).expect("bench/model.json");
    let model: Value = serde_json::from_str(&text).expect("JSON");
    let seeds = &model["flood_seeds"];
    assert!(seeds["seeds"].as_u64() >= Some(20), "{seeds}");
    let cases = seeds["cases"].as_object().expect("cases");
    assert_eq!(cases.len(), 4, "{seeds}");
    for (case, figures) in cases {
        let registered = &figures["all_registered_s"];
        let (min, mean, max) = (
            registered["min"].as_f64().unwrap_or(f64::NAN),
            registered["mean"].as_f64().unwrap_or(f64::NAN),
            registered["max"].as_f64().unwrap_or(f64::NAN),
        );
        assert!(min <= mean && mean <= max, "{case}: {registered}");
    }
}
