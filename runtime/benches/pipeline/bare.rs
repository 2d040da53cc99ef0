//! The baselines: the same stages over bare tokio channels, per message and batched, with no
//! acking.

use super::*;

// ---- the bare pipelines ----

pub(crate) struct Parsed {
    order: u64,
    amount: i64,
    attempt: i64,
}

pub(crate) fn new_message(buf: &mut String, n: u64, biz: &Arc<str>, payload: &Bytes) -> Message {
    Message::new(id_for(buf, n), biz.clone(), payload.clone())
}

/// Bare channels, one send per message; returns (messages through, elapsed).
pub(crate) fn run_bare_per_item(rt: &tokio::runtime::Runtime, work: Work) -> (u64, Duration) {
    rt.block_on(async {
        let start = Instant::now();
        let (tx1, mut rx1) = mpsc::channel::<Message>(1024);
        let (tx2, mut rx2) = mpsc::channel::<Parsed>(1024);
        tokio::spawn(async move {
            let (biz, payload, mut buf) = (
                Arc::from("ORDER"),
                Bytes::from_static(PAYLOAD),
                String::new(),
            );
            for n in 1..=*MESSAGES {
                if tx1
                    .send(new_message(&mut buf, n, &biz, &payload))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(m) = rx1.recv().await {
                let (order, amount) = parse(work, m.id.as_str(), &m.payload);
                let p = Parsed {
                    order,
                    amount,
                    attempt: 1,
                };
                if tx2.send(p).await.is_err() {
                    return;
                }
            }
        });
        let done = tokio::spawn(async move {
            let mut table = vec![0i64; 4096];
            let mut ok = 0u64;
            while let Some(p) = rx2.recv().await {
                if store(&mut table, p.order, p.amount, p.attempt, 20) {
                    ok += 1;
                }
            }
            ok
        });
        let ok = done.await.expect("store stage");
        (ok, start.elapsed())
    })
}

/// Bare channels carrying batches of up to 256, flushed whenever a stage has handled what it
/// had (the runtime's own batching); returns (messages through, elapsed).
pub(crate) fn run_bare_batched(rt: &tokio::runtime::Runtime, work: Work) -> (u64, Duration) {
    const BATCH: usize = 256;
    rt.block_on(async {
        let start = Instant::now();
        let (tx1, mut rx1) = mpsc::channel::<Vec<Message>>(64);
        let (tx2, mut rx2) = mpsc::channel::<Vec<Parsed>>(64);
        tokio::spawn(async move {
            let (biz, payload, mut buf) = (
                Arc::from("ORDER"),
                Bytes::from_static(PAYLOAD),
                String::new(),
            );
            let mut n = 0;
            while n < *MESSAGES {
                let mut batch = Vec::with_capacity(BATCH);
                while batch.len() < BATCH && n < *MESSAGES {
                    n += 1;
                    batch.push(new_message(&mut buf, n, &biz, &payload));
                }
                if tx1.send(batch).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(batch) = rx1.recv().await {
                let out: Vec<Parsed> = batch
                    .iter()
                    .map(|m| {
                        let (order, amount) = parse(work, m.id.as_str(), &m.payload);
                        Parsed {
                            order,
                            amount,
                            attempt: 1,
                        }
                    })
                    .collect();
                if tx2.send(out).await.is_err() {
                    return;
                }
            }
        });
        let done = tokio::spawn(async move {
            let mut table = vec![0i64; 4096];
            let mut ok = 0u64;
            while let Some(batch) = rx2.recv().await {
                for p in batch {
                    if store(&mut table, p.order, p.amount, p.attempt, 20) {
                        ok += 1;
                    }
                }
            }
            ok
        });
        let ok = done.await.expect("store stage");
        (ok, start.elapsed())
    })
}
