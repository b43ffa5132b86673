//! Installation tokens shared through a [`TokenShelf`]: minted once by one process and
//! reused by another, an expired or refused one never used, and a failing shelf passed
//! over.

use crate::harness::{org, runner, Harness, START, TOKENS};
use crate::stub::Answer;
use ephemera_core::memory::MemoryTokenShelf;
use ephemera_core::ports::{Forge, SharedToken, TokenShelf};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;
use time::Duration;

fn shared(token: &str, expires_at: time::OffsetDateTime) -> SharedToken {
    SharedToken {
        token: SecretString::from(token.to_owned()),
        expires_at,
    }
}

/// Bearers the stub saw on calls other than token mints.
fn bearers(h: &Harness) -> Vec<String> {
    h.stub
        .seen()
        .iter()
        .filter(|seen| !seen.is("POST", TOKENS))
        .map(|seen| seen.bearer().to_owned())
        .collect()
}

#[tokio::test]
async fn a_token_minted_by_one_process_is_used_by_another() {
    let h = Harness::start(|_| runner(5)).await;
    let shelf = Arc::new(MemoryTokenShelf::new());
    let first = h.another_app().with_token_shelf(shelf.clone());
    let second = h.another_app().with_token_shelf(shelf.clone());
    first.get_runner(&org(), 5).await.expect("runner");
    second.get_runner(&org(), 5).await.expect("runner");
    second.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(h.stub.count("POST", TOKENS), 1, "one mint for both");
    assert_eq!(bearers(&h), ["tok-1", "tok-1", "tok-1"]);
    let held = shelf.shelved(4242, 7).expect("shelved");
    assert_eq!(held.token.expose_secret(), "tok-1");
    // The second process read the shelf once, then used its own cache.
    assert_eq!(shelf.calls().reads, 2);
    assert_eq!(shelf.calls().shelves, 1);
}

#[tokio::test]
async fn a_shelved_token_near_its_expiry_is_never_used() {
    let h = Harness::start(|_| runner(5)).await;
    let shelf = Arc::new(MemoryTokenShelf::new());
    // Four minutes left: inside the five-minute refresh margin.
    shelf
        .shelve(4242, 7, &shared("old", START + Duration::minutes(4)))
        .await
        .expect("shelve");
    let app = h.another_app().with_token_shelf(shelf.clone());
    app.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(bearers(&h), ["tok-1"]);
    assert_eq!(h.stub.count("POST", TOKENS), 1);
    let held = shelf.shelved(4242, 7).expect("shelved");
    assert_eq!(
        held.token.expose_secret(),
        "tok-1",
        "the fresh one replaced it"
    );
}

#[tokio::test]
async fn a_token_github_refuses_is_withdrawn_and_a_new_one_minted() {
    let h = Harness::start(|seen| {
        if seen.bearer() == "revoked" {
            Answer::json(401, serde_json::json!({"message": "Bad credentials"}))
        } else {
            runner(5)
        }
    })
    .await;
    let shelf = Arc::new(MemoryTokenShelf::new());
    shelf
        .shelve(4242, 7, &shared("revoked", START + Duration::minutes(50)))
        .await
        .expect("shelve");
    let app = h.another_app().with_token_shelf(shelf.clone());
    let found = app.get_runner(&org(), 5).await.expect("runner");
    assert!(found.is_some());
    assert_eq!(bearers(&h), ["revoked", "tok-1"]);
    let held = shelf.shelved(4242, 7).expect("shelved");
    assert_eq!(held.token.expose_secret(), "tok-1");
    assert_eq!(shelf.calls().withdrawals, 1);
    // Another process starting now finds the new token, never the refused one.
    let other = h.another_app().with_token_shelf(shelf.clone());
    other.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(bearers(&h), ["revoked", "tok-1", "tok-1"]);
    assert_eq!(h.stub.count("POST", TOKENS), 1);
}

#[tokio::test]
async fn a_later_token_on_the_shelf_is_not_withdrawn_for_an_earlier_refusal() {
    let shelf = MemoryTokenShelf::new();
    shelf
        .shelve(4242, 7, &shared("newer", START + Duration::minutes(60)))
        .await
        .expect("shelve");
    // An earlier token, shelved late, does not replace the later one.
    shelf
        .shelve(4242, 7, &shared("older", START + Duration::minutes(30)))
        .await
        .expect("shelve");
    let refused = shared("older", START);
    shelf
        .withdraw(4242, 7, &refused.fingerprint())
        .await
        .expect("withdraw");
    let held = shelf.shelved(4242, 7).expect("still shelved");
    assert_eq!(held.token.expose_secret(), "newer");
}

#[tokio::test]
async fn a_failing_shelf_leaves_the_process_minting_its_own() {
    let h = Harness::start(|_| runner(5)).await;
    let shelf = Arc::new(MemoryTokenShelf::new());
    shelf.fail_every_call();
    let app = h.another_app().with_token_shelf(shelf.clone());
    app.get_runner(&org(), 5).await.expect("runner");
    app.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(h.stub.count("POST", TOKENS), 1);
    assert_eq!(
        shelf.calls().failed,
        2,
        "one read and one shelve, both failed"
    );
}
