//! The canary's controller: a task that, every [`TICK`] while a canary runs, judges it on its
//! figures and acts ([`CanaryDesk::tick`](super::CanaryDesk::tick): roll back, promote, hold). `promote_after` and the
//! canary's age run in real time, whatever the runtime's `--time-scale`.

use super::ReleaseDesk;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often a running canary is judged.
pub const TICK: Duration = Duration::from_millis(250);

/// Starts the controller of `desk` on the current tokio runtime; it runs until aborted (the
/// returned handle) or the runtime stops. A tick does its blocking work (the history, a
/// promotion's files) off the async workers.
pub fn spawn_controller(desk: Arc<ReleaseDesk>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !desk.canary.is_running() {
                continue;
            }
            let desk = Arc::clone(&desk);
            if let Err(e) = tokio::task::spawn_blocking(move || desk.canary.tick()).await {
                tracing::error!("the canary's controller failed a tick: {e}");
            }
        }
    })
}
