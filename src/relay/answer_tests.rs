//! The fate table of sources.md ("Handlers"), one test per row, and the edges of the body and
//! of `Retry-After`.

use super::*;
use http::HeaderValue;

fn now() -> SystemTime {
    // A fixed instant: Tue, 14 Nov 2023 22:13:20 GMT.
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn no_headers() -> HeaderMap {
    HeaderMap::new()
}

fn retry_after_header(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::RETRY_AFTER,
        HeaderValue::from_str(value).unwrap(),
    );
    h
}

fn failure(status: u16, headers: &HeaderMap, body: Option<&[u8]>) -> Failure {
    fate(status, headers, body, now()).expect_err("a failure")
}

#[test]
fn any_2xx_acks_whatever_the_body_and_headers() {
    for status in [200, 201, 202, 204, 299] {
        assert_eq!(fate(status, &no_headers(), None, now()), Ok(()));
    }
    let body = br#"{"code": "IGNORED"}"#;
    assert_eq!(
        fate(200, &retry_after_header("5"), Some(body), now()),
        Ok(())
    );
}

#[test]
fn a_json_body_with_a_code_is_that_failure_with_its_message_and_attrs() {
    let body =
        br#"{"code": "CARD_DECLINED", "message": "insufficient funds", "attrs": {"bank": "acme"}}"#;
    for status in [400, 422, 500, 503] {
        let f = failure(status, &no_headers(), Some(body));
        assert_eq!(f.code, "CARD_DECLINED");
        assert_eq!(f.message, "insufficient funds");
        assert_eq!(f.attrs.get("bank").map(String::as_str), Some("acme"));
        assert_eq!(f.retry_after, None);
    }
}

#[test]
fn a_json_body_needs_only_its_code() {
    let f = failure(409, &no_headers(), Some(br#"{"code": "STALE"}"#));
    assert_eq!(f.code, "STALE");
    assert_eq!(f.message, "");
    assert!(f.attrs.is_empty());
}

#[test]
fn attrs_that_are_not_strings_are_kept_as_their_json_text() {
    let body = br#"{"code": "X", "attrs": {"n": 42, "ok": true, "list": [1, "a"], "none": null, "s": "t"}}"#;
    let f = failure(500, &no_headers(), Some(body));
    let attr = |k: &str| f.attrs.get(k).map(String::as_str);
    assert_eq!(attr("n"), Some("42"));
    assert_eq!(attr("ok"), Some("true"));
    assert_eq!(attr("list"), Some(r#"[1,"a"]"#));
    assert_eq!(attr("none"), Some("null"));
    assert_eq!(attr("s"), Some("t"));
}

#[test]
fn a_non_2xx_without_a_body_is_http_status() {
    let f = failure(503, &no_headers(), None);
    assert_eq!(f.code, "HTTP_503");
    assert!(
        f.message.contains("503 Service Unavailable"),
        "{}",
        f.message
    );
    assert_eq!(failure(404, &no_headers(), Some(b"")).code, "HTTP_404");
    // A status with no canonical reason still names itself.
    assert_eq!(failure(599, &no_headers(), None).code, "HTTP_599");
}

#[test]
fn redirects_and_informational_statuses_are_failures_of_class_4xx() {
    for status in [301, 302, 304, 307, 100] {
        assert_eq!(
            failure(status, &no_headers(), None).code,
            format!("HTTP_{status}")
        );
        assert_eq!(AnswerClass::of_status(status), AnswerClass::Client4xx);
    }
}

#[test]
fn invalid_json_counts_as_no_body() {
    for body in [
        &b"{not json"[..],
        b"<html>oops</html>",
        b"\xff\xfe",
        b"\"CODE\"",
    ] {
        assert_eq!(failure(500, &no_headers(), Some(body)).code, "HTTP_500");
    }
}

#[test]
fn json_without_a_usable_code_counts_as_no_body() {
    for body in [
        &br#"{"message": "no code"}"#[..],
        br#"{"code": ""}"#,
        br#"{"code": 42}"#,
        br#"{"code": null}"#,
        br#"[{"code": "X"}]"#,
        br#"{"code": "X", "attrs": ["not", "an", "object"]}"#,
    ] {
        let f = failure(502, &no_headers(), Some(body));
        assert_eq!(f.code, "HTTP_502", "{}", String::from_utf8_lossy(body));
    }
}

/// A valid failure body padded to `len` bytes.
fn failure_body_of(len: usize) -> Vec<u8> {
    let mut body = br#"{"code": "BIG", "message": ""#.to_vec();
    let tail = br#""}"#;
    body.resize(len - tail.len(), b'x');
    body.extend_from_slice(tail);
    assert_eq!(body.len(), len);
    body
}

#[test]
fn a_body_of_64_kib_counts_and_one_of_64_kib_and_1_is_no_body() {
    let f = failure(500, &no_headers(), Some(&failure_body_of(MAX_FAILURE_BODY)));
    assert_eq!(f.code, "BIG");
    let f = failure(
        500,
        &no_headers(),
        Some(&failure_body_of(MAX_FAILURE_BODY + 1)),
    );
    assert_eq!(f.code, "HTTP_500");
    // What the client hands when it stopped reading past the bound.
    assert_eq!(failure(500, &no_headers(), None).code, "HTTP_500");
}

#[test]
fn retry_after_in_seconds_is_the_failures_retry_after() {
    let f = failure(429, &retry_after_header("120"), None);
    assert_eq!(f.code, "HTTP_429");
    assert_eq!(f.retry_after, Some(Duration::from_secs(120)));
    let f = failure(
        503,
        &retry_after_header(" 0 "),
        Some(br#"{"code": "BUSY"}"#),
    );
    assert_eq!(f.code, "BUSY");
    assert_eq!(f.retry_after, Some(Duration::ZERO));
}

#[test]
fn retry_after_as_an_http_date_is_the_time_until_it() {
    // 90 s after now().
    let f = failure(
        503,
        &retry_after_header("Tue, 14 Nov 2023 22:14:50 GMT"),
        None,
    );
    assert_eq!(f.retry_after, Some(Duration::from_secs(90)));
}

#[test]
fn retry_after_as_a_date_in_the_past_is_zero() {
    let f = failure(
        503,
        &retry_after_header("Sun, 06 Nov 1994 08:49:37 GMT"),
        None,
    );
    assert_eq!(f.retry_after, Some(Duration::ZERO));
}

#[test]
fn a_retry_after_that_is_neither_is_ignored() {
    for value in ["soon", "-5", "1.5", "Tuesday"] {
        let f = failure(503, &retry_after_header(value), None);
        assert_eq!(f.retry_after, None, "{value}");
    }
}

#[test]
fn no_answer_within_the_timeout_is_handler_timeout() {
    let a = Answer::timed_out(Duration::from_millis(200), Duration::from_millis(201));
    let f = a.fate.expect_err("a failure");
    assert_eq!(f.code, HANDLER_TIMEOUT);
    assert!(f.message.contains("200ms"), "{}", f.message);
    assert_eq!((a.class, a.status), (AnswerClass::Timeout, None));
}

#[test]
fn an_unreachable_handler_is_handler_unavailable_with_the_cause() {
    let a = Answer::unavailable("tcp connect error: Connection refused", Duration::ZERO);
    let f = a.fate.expect_err("a failure");
    assert_eq!(f.code, HANDLER_UNAVAILABLE);
    assert_eq!(f.message, "tcp connect error: Connection refused");
    assert_eq!((a.class, a.status), (AnswerClass::Unavailable, None));
}

#[test]
fn classes_are_2xx_4xx_5xx_by_status() {
    let class = |s| AnswerClass::of_status(s).as_str();
    assert_eq!(
        [200, 204, 400, 404, 429, 302, 500, 503, 599].map(class),
        [
            "2xx", "2xx", "4xx", "4xx", "4xx", "4xx", "5xx", "5xx", "5xx"
        ]
    );
    let all: Vec<&str> = AnswerClass::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(all, ["2xx", "4xx", "5xx", "timeout", "unavailable"]);
    let a = Answer::answered(503, &HeaderMap::new(), None, now(), Duration::ZERO);
    assert_eq!((a.class, a.status), (AnswerClass::Server5xx, Some(503)));
}
