//! Bounds on the work one request may start (`docs/spec/operations.md`, "The admin API at its
//! edges"): no route waits longer than its client would, and a flood of slow requests cannot
//! take every blocking thread.
//!
//! A [`Gate`] admits at most `permits` pieces of blocking work at a time and waits for each at
//! most `deadline`; past either bound the request gets 503 with `Retry-After` rather than an
//! answer its client has stopped waiting for. Blocking work cannot be cancelled, so the permit
//! goes with the work onto its thread and is freed when the work ends, not when the request
//! gives up: work that outlives its request still counts against the bound.

use super::error::ApiError;
use std::time::Duration;
use tokio::sync::Semaphore;

/// What a gate admits and for how long.
#[derive(Debug)]
pub struct Gate {
    permits: Semaphore,
    /// How many permits there are.
    total: usize,
    /// Whether a request finding every permit taken waits for one (within the deadline)
    /// rather than being refused at once.
    queue: bool,
    deadline: Duration,
    /// What the work is, for the 503's message ("validations").
    what: &'static str,
}

/// Rule-set dry runs (`POST /v1/rules/validate`, unauthenticated): two at a time, 5 s each; a
/// third is refused at once.
pub static VALIDATIONS: Gate = Gate::new("validations", 2, false, Duration::from_secs(5));

/// What-if runs (`POST /v1/rules/whatif`, unauthenticated): each decides the whole decision
/// log again (up to `decisions.keep` contexts), so one at a time, 30 s each; a second is
/// refused at once.
pub static WHAT_IFS: Gate = Gate::new("what-if runs", 1, false, Duration::from_secs(30));

/// The store's reads and writes behind the operator's routes (listing dead letters scans them
/// on Redis): four at a time, the rest waiting, each answered within 20 s, below the 30 s a
/// client commonly waits.
pub static STORE_WORK: Gate = Gate::new("store requests", 4, true, Duration::from_secs(20));

/// How long a refused client is told to wait before it tries again.
const RETRY_AFTER_SECONDS: u64 = 2;

impl Gate {
    /// A gate for `permits` pieces of `what` at a time, each answered within `deadline`.
    pub const fn new(what: &'static str, permits: usize, queue: bool, deadline: Duration) -> Gate {
        Gate {
            permits: Semaphore::const_new(permits),
            total: permits,
            queue,
            deadline,
            what,
        }
    }

    /// Runs `work` on a blocking thread within the gate's bounds; 503 with `Retry-After` past
    /// them.
    pub async fn run<T: Send + 'static>(
        &'static self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let busy = || {
            ApiError::busy(
                format!(
                    "too many {} at once: at most {} run at a time; try again shortly",
                    self.what, self.total
                ),
                RETRY_AFTER_SECONDS,
            )
        };
        let within = tokio::time::Instant::now() + self.deadline;
        let permit = if self.queue {
            match tokio::time::timeout_at(within, self.permits.acquire()).await {
                Ok(Ok(permit)) => permit,
                _ => return Err(busy()),
            }
        } else {
            self.permits.try_acquire().map_err(|_| busy())?
        };
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        });
        match tokio::time::timeout_at(within, task).await {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => Err(ApiError::internal(format!(
                "the {} task failed: {e}",
                self.what
            ))),
            Err(_) => Err(ApiError::busy(
                format!(
                    "the request took longer than {} s and was given up; try again shortly, or \
                     narrow it",
                    self.deadline.as_secs_f64()
                ),
                RETRY_AFTER_SECONDS,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use std::sync::mpsc;

    fn refused(e: ApiError) -> bool {
        let response = e.into_response();
        response.status() == StatusCode::SERVICE_UNAVAILABLE
            && response.headers().contains_key(header::RETRY_AFTER)
    }

    /// Starts work on `gate` that runs until `release` is sent to (or dropped).
    fn held(
        gate: &'static Gate,
    ) -> (
        mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<(), ApiError>>,
    ) {
        let (release, wait) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let task = tokio::spawn(gate.run(move || {
            let _ = started.send(());
            let _ = wait.recv();
        }));
        // The permit is taken before the work starts.
        running.recv().expect("the work starts");
        (release, task)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_permits_a_request_is_refused_at_once_with_retry_after() {
        static GATE: Gate = Gate::new("tests", 2, false, Duration::from_secs(600));
        let (a, first) = held(&GATE);
        let (b, second) = held(&GATE);
        let third = GATE.run(|| ()).await.expect_err("a third is refused");
        assert!(refused(third));
        drop(a);
        first.await.unwrap().unwrap();
        GATE.run(|| ()).await.expect("a permit is free again");
        drop(b);
        second.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_past_the_deadline_is_answered_503_and_keeps_its_permit_until_it_ends() {
        static GATE: Gate = Gate::new("tests", 1, false, Duration::from_millis(100));
        let (release, wait) = mpsc::channel::<()>();
        let slow = GATE.run(move || {
            let _ = wait.recv();
        });
        assert!(refused(slow.await.expect_err("given up at the deadline")));
        // The abandoned work still runs, and still holds the one permit.
        assert!(refused(GATE.run(|| ()).await.expect_err("no permit")));
        drop(release);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while GATE.run(|| ()).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "the permit came back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queueing_gate_waits_for_a_permit_within_its_deadline() {
        static GATE: Gate = Gate::new("tests", 1, true, Duration::from_secs(600));
        let (release, first) = held(&GATE);
        let waiting = tokio::spawn(GATE.run(|| 7));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "it waits while the permit is taken");
        drop(release);
        first.await.unwrap().unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queueing_gate_gives_up_waiting_at_its_deadline() {
        static GATE: Gate = Gate::new("tests", 1, true, Duration::from_millis(100));
        let (release, first) = held(&GATE);
        assert!(refused(
            GATE.run(|| ()).await.expect_err("no permit in time")
        ));
        drop(release);
        let _ = first.await;
    }
}
