//! The hand-written loop: XREADGROUP, one POST per message, XACK.

#![allow(unused_imports)]

use super::*;
// The hand-written loop.

pub(crate) async fn hand_loop(redis_url: String, stream: String, n: u64, handler: String) {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(GROUP)
        .arg("0")
        .query_async(&mut conn)
        .await;
    let http = rebound::outbound::client(None).unwrap();
    let url = reqwest::Url::parse(&handler).unwrap();
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let mut acks = tokio::task::JoinSet::new();
    let mut read = 0;
    while read < n {
        let reply: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg("hand")
            .arg("COUNT")
            .arg(BATCH)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(&mut conn)
            .await
            .unwrap();
        let entries: Vec<_> = reply.keys.into_iter().flat_map(|k| k.ids).collect();
        read += entries.len() as u64;
        let mut posts = Vec::with_capacity(entries.len());
        let mut ids = Vec::with_capacity(entries.len());
        for e in entries {
            let permit = permits.clone().acquire_owned().await.unwrap();
            let payload: Vec<u8> = e.get("payload").unwrap_or_default();
            let biz: String = e.get("biz").unwrap_or_default();
            let id = format!("{stream}/{}", e.id);
            ids.push(e.id);
            let request = http
                .post(url.clone())
                .header("rebound-message-id", &id)
                .header("rebound-attempt", "1")
                .header("rebound-biz", biz)
                .header("idempotency-key", &id)
                .header("content-type", "application/octet-stream")
                .body(payload);
            posts.push(tokio::spawn(async move {
                let response = request.send().await.unwrap();
                let ok = response.status().is_success();
                let _ = response.bytes().await;
                drop(permit);
                ok
            }));
        }
        if ids.is_empty() {
            continue;
        }
        let (mut conn, stream) = (conn.clone(), stream.clone());
        acks.spawn(async move {
            for p in posts {
                assert!(p.await.unwrap(), "the no-op handler answers 200");
            }
            let _: u64 = redis::cmd("XACK")
                .arg(&stream)
                .arg(GROUP)
                .arg(&ids)
                .query_async(&mut conn)
                .await
                .unwrap();
        });
    }
    while acks.join_next().await.is_some() {}
}
