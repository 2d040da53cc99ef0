//! The configuration file as the spec writes it, and what a wrong one reports.

use super::*;
use crate::admin::edges::Edges;
use rebound_runtime::topology::{
    Config, FuseConfig, OnDeadLetter, Ordered, OrderingConfig, RetryMix,
};
use std::collections::BTreeMap;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn parse(text: &str) -> Result<ConfigFile, Vec<Diagnostic>> {
    ConfigFile::parse(&SourceFile::new("c.yaml", "c.yaml", text))
}

fn first_error(text: &str) -> Diagnostic {
    parse(text).expect_err("the file is wrong").remove(0)
}

#[test]
fn every_key_of_the_spec_example_parses() {
    let config = ConfigFile::load(&fixture("operations-example.yaml")).expect("the example");
    assert_eq!(config.rules, Some(PathBuf::from("rules")));
    assert_eq!(config.data, Some(PathBuf::from("rebound-data")));
    assert_eq!(
        config.store.as_ref().map(|s| s.url.as_str()),
        Some("sqlite")
    );
    assert_eq!(config.namespace.as_deref(), Some("rebound"));
    assert_eq!(config.node.as_deref(), Some("pay-worker-1"));
    assert_eq!(config.admin.addr.as_deref(), Some("127.0.0.1:8080"));
    assert_eq!(
        config.admin.token_file,
        Some(PathBuf::from("/etc/rebound/token"))
    );
    let t = &config.topology;
    assert_eq!(t.message_timeout, Some(Duration::from_secs(30)));
    assert_eq!(t.max_spout_pending, Some(1000));
    assert_eq!(t.ackers, Some(1));
    assert_eq!(t.retry_mix, Some(3));
    assert_eq!(
        t.fuse,
        Some(Fuse::On {
            window: Some(Duration::from_secs(10)),
            threshold: Some(0.5),
            min_samples: Some(20),
        })
    );
    let oncall = config.receivers.get("oncall").expect("the oncall receiver");
    assert_eq!(oncall.name, "oncall");
    assert_eq!(oncall.webhook, "http://127.0.0.1:9093/rebound");
    assert_eq!(
        oncall.headers,
        BTreeMap::from([("X-Team".to_owned(), "payments".to_owned())])
    );
    assert_eq!(config.receivers.len(), 1);
}

#[test]
fn every_runtime_knob_is_reachable_under_topology() {
    let config = ConfigFile::load(&fixture("every-knob.yaml")).expect("every knob");
    let set = config.topology.apply(Config::default());
    let want = Config {
        message_timeout: Duration::from_secs(12),
        max_spout_pending: 77,
        ackers: 2,
        retry_mix: RetryMix { retries_per_new: 0 },
        fuse: FuseConfig {
            enabled: true,
            window: Duration::from_secs(5),
            threshold: 0.25,
            min_samples: 7,
        },
        channel_capacity: 16,
        batch_size: 32,
        spout_idle_wait: Duration::from_millis(5),
        ordering: OrderingConfig {
            ordered: Ordered::Biz(vec!["ORDER".into(), "PAYMENT".into()]),
            on_dead_letter: OnDeadLetter::Block,
            max_held: 500,
        },
        max_payload: 512 * 1024,
    };
    assert_eq!(set, want);
    assert_eq!(
        config.topology.drain,
        Some(Drain(StopBounds {
            trees: Duration::from_secs(3),
            total: Duration::from_secs(5),
        }))
    );
    // The other flags that fit.
    assert_eq!(config.lease, Some(Duration::from_secs(4)));
    assert_eq!(config.store_check, Some(StoreCheckSetting::Warn));
    assert_eq!(config.store_give_up, Some(Duration::from_secs(90)));
    assert_eq!(config.time_scale, Some(250.0));
    assert_eq!(config.messages, Some(1234));
    assert_eq!(config.rate, Some(5.5));
}

#[test]
fn an_empty_file_and_empty_sections_change_nothing() {
    assert_eq!(parse("# nothing yet\n").unwrap(), ConfigFile::default());
    assert_eq!(
        parse("admin:\ntopology:\nreceivers:\n").unwrap(),
        ConfigFile::default()
    );
    let config = parse("topology: {}\nreceivers:\n").unwrap();
    assert_eq!(config.topology.apply(Config::default()), Config::default());
    assert!(config.receivers.is_empty());
}

#[test]
fn fuse_off_disables_the_fuse_and_keeps_the_rest() {
    let config = parse("topology:\n  fuse: off\n").unwrap();
    let set = config.topology.apply(Config::default());
    assert!(!set.fuse.enabled);
    assert_eq!(set.fuse.window, Config::default().fuse.window);
}

#[test]
fn ordered_takes_all_or_a_list_and_on_dead_letter_continue_or_block() {
    let set = |text: &str| {
        parse(text)
            .unwrap()
            .topology
            .apply(Config::default())
            .ordering
    };
    assert_eq!(set("topology:\n  ordered: all\n").ordered, Ordered::All);
    assert_eq!(set("topology:\n  ordered: []\n").ordered, Ordered::None);
    let block = set("topology:\n  ordered: [ORDER]\n  on_dead_letter: block\n");
    assert_eq!(block.ordered, Ordered::Biz(vec!["ORDER".into()]));
    assert_eq!(block.on_dead_letter, OnDeadLetter::Block);
    assert_eq!(block.max_held, 10_000);
    assert_eq!(
        set("topology:\n  on_dead_letter: continue\n"),
        OrderingConfig::default()
    );
}

#[test]
fn a_misspelt_key_is_located_with_the_nearest_key() {
    let err = ConfigFile::load(&fixture("misspelt-key.yaml")).unwrap_err();
    let ConfigError::Rejected { diagnostics, .. } = err else {
        panic!("rejected, not {err}");
    };
    let d = &diagnostics[0];
    assert!(d.file.ends_with("misspelt-key.yaml"), "{d}");
    assert_eq!((d.line, d.column), (Some(3), Some(3)), "{d}");
    assert!(
        d.message.starts_with("unknown field 'max_spout_pendng'"),
        "{d}"
    );
    assert_eq!(d.help.as_deref(), Some("did you mean 'max_spout_pending'?"));
}

#[test]
fn every_misspelt_key_is_reported_at_once() {
    let errs = parse("dta: x\ntopology:\n  ackerz: 2\nreceivers:\n  a:\n    webhok: http://h/\n")
        .unwrap_err();
    let found: Vec<_> = errs
        .iter()
        .map(|d| (d.line.unwrap(), d.help.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        found,
        [
            (1, "did you mean 'data'?".to_owned()),
            (3, "did you mean 'ackers'?".to_owned()),
            (6, "did you mean 'webhook'?".to_owned()),
        ]
    );
}

#[test]
fn a_bad_duration_is_located_at_its_value() {
    let d = first_error("topology:\n  message_timeout: 30 seconds\n");
    assert_eq!((d.line, d.column), (Some(2), Some(20)), "{d}");
    assert!(d.message.contains("bad duration '30 seconds'"), "{d}");
    let d = first_error("topology:\n  fuse: { window: 10x }\n");
    assert_eq!((d.line, d.column), (Some(2), Some(19)), "{d}");
    let d = first_error("lease: 0s\n");
    assert_eq!(d.line, Some(1), "{d}");
    assert!(d.message.contains("zero"), "{d}");
}

#[test]
fn bad_values_are_located_and_say_what_was_expected() {
    let cases = [
        ("topology:\n  ackers: 0\n", (2, 11), "at least 1, got 0"),
        ("topology:\n  fuse: { threshold: 150% }\n", (2, 22), "share"),
        ("topology:\n  fuse: sometimes\n", (2, 9), "'off'"),
        ("store: postgres://x\n", (1, 8), "expected 'sqlite'"),
        ("namespace: 'a b'\n", (1, 12), "without braces or spaces"),
        ("store_check: warm\n", (1, 14), "unknown variant 'warm'"),
        (
            "topology:\n  ordered: some\n",
            (2, 12),
            "'all' or a list of biz types",
        ),
        (
            "topology:\n  ordered: [ORDER, 'A B']\n",
            (2, 20),
            "not a biz type",
        ),
        (
            "topology:\n  on_dead_letter: stop\n",
            (2, 19),
            "unknown variant 'stop'",
        ),
        ("topology:\n  max_held: 0\n", (2, 13), "at least 1, got 0"),
        ("admin:\n  addr: localhost\n", (2, 9), "HOST:PORT"),
        ("time_scale: -1\n", (1, 13), "greater than zero"),
        ("messages: 0\n", (1, 11), "at least 1"),
        (
            "receivers:\n  oncall:\n    webhook: ftp://x/y\n",
            (3, 14),
            "expected http://HOST[:PORT]/PATH or https://",
        ),
        (
            "receivers:\n  oncall:\n    webhook: https://x/y\n    ca_file: /no/such/ca.pem\n",
            (4, 14),
            "CA file /no/such/ca.pem: cannot be read",
        ),
        (
            "receivers:\n  oncall:\n    webhook: https://x/y\n    ca_fil: ca.pem\n",
            (4, 5),
            "unknown field 'ca_fil'",
        ),
        (
            "receivers:\n  oncall:\n    webhook: not a url\n",
            (3, 14),
            "bad webhook URL",
        ),
        (
            "receivers:\n  oncall:\n    webhook: http://h/\n    headers: { 'X Team': a }\n",
            (4, 16),
            "bad header name",
        ),
        (
            "receivers:\n  oncall: {}\n",
            (2, 3),
            "a receiver needs webhook: URL or alertmanager: URL",
        ),
    ];
    for (text, (line, column), says) in cases {
        let d = first_error(text);
        assert_eq!(
            (d.line, d.column),
            (Some(line), Some(column)),
            "{text}: {d}"
        );
        assert!(d.message.contains(says), "{text}: {d}");
    }
    let d = first_error("store_check: warm\n");
    assert_eq!(d.help.as_deref(), Some("did you mean 'warn'?"));
}

#[test]
fn an_https_receiver_takes_a_ca_file_that_holds_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = crate::outbound::test_server::TestCa::new("Receivers' CA").write(dir.path(), "ca.pem");
    let text = format!(
        "receivers:\n  oncall:\n    webhook: https://alerts.example/hook\n    ca_file: {}\n",
        ca.display()
    );
    let config = parse(&text).expect("an https receiver with its CA file");
    let oncall = config.receivers.get("oncall").expect("oncall");
    assert_eq!(oncall.webhook, "https://alerts.example/hook");
    assert_eq!(oncall.ca_file.as_deref(), Some(ca.as_path()));
    // Without one, the system's roots.
    let config =
        parse("receivers:\n  oncall:\n    webhook: https://alerts.example/hook\n").unwrap();
    assert_eq!(config.receivers.get("oncall").unwrap().ca_file, None);
    // A file that is not PEM is an error at its place, naming it.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a certificate\n").unwrap();
    let d = first_error(&format!(
        "receivers:\n  oncall:\n    webhook: https://h/\n    ca_file: {}\n",
        notes.display()
    ));
    assert_eq!((d.line, d.column), (Some(4), Some(14)), "{d}");
    assert!(
        d.message.contains("notes.txt") && d.message.contains("holds no certificate"),
        "{d}"
    );
}

#[test]
fn a_missing_file_is_an_io_error() {
    let err = ConfigFile::load(&fixture("no-such-file.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
    assert!(err.to_string().contains("no-such-file.yaml"), "{err}");
}

#[test]
fn the_admin_edges_default_to_the_spec_and_are_checked_where_written() {
    let edges = Edges::from(&parse("admin:\n  addr: 127.0.0.1:8080\n").unwrap().admin);
    assert_eq!(edges.max_connections, 512);
    assert_eq!(edges.header_timeout, Duration::from_secs(10));
    assert_eq!(edges.body_timeout, Duration::from_secs(30));
    assert_eq!(edges.idle_timeout, Duration::from_secs(60));
    assert!(edges.hosts.is_empty());
    let set = Edges::from(
        &parse(
            "admin:\n  max_connections: 4\n  hosts: [Rebound.Internal, '[::2]']\n  header_timeout: 1s\n",
        )
        .unwrap()
        .admin,
    );
    assert_eq!(set.max_connections, 4);
    assert_eq!(set.hosts, ["rebound.internal", "[::2]"]);
    assert_eq!(set.header_timeout, Duration::from_secs(1));
    let e = first_error("admin:\n  max_connections: 0\n");
    assert_eq!((e.line, e.column), (Some(2), Some(20)), "{e}");
    let e = first_error("admin:\n  hosts: [http://x:80]\n");
    assert_eq!((e.line, e.column), (Some(2), Some(11)), "{e}");
    assert!(e.message.contains("bad host name"), "{e}");
    let e = first_error("admin:\n  max_conections: 4\n");
    assert!(e.help.unwrap_or_default().contains("max_connections"));
}

#[test]
fn dead_letters_publish_is_read_checked_and_located() {
    let config = parse("dead_letters:\n  publish: redis-stream://u:pw@127.0.0.1:6379/dead\n")
        .expect("a Redis stream");
    assert_eq!(
        config.dead_letters.publish,
        Some(PublishUrl::RedisStream {
            server: "redis://u:pw@127.0.0.1:6379".into(),
            stream: "dead".into()
        })
    );
    let config = parse("dead_letters: {publish: 'nats://127.0.0.1:4222/dead.orders'}\n")
        .expect("a JetStream subject");
    assert_eq!(
        config.dead_letters.publish.map(|u| u.to_string()),
        Some("nats://127.0.0.1:4222/dead.orders".into())
    );
    assert_eq!(parse("dead_letters:\n").unwrap(), ConfigFile::default());
    let d = first_error("dead_letters:\n  publsh: nats://h:1/x\n");
    assert_eq!((d.line, d.column), (Some(2), Some(3)), "{d}");
    assert_eq!(d.help.as_deref(), Some("did you mean 'publish'?"), "{d}");
    let d = first_error("dead_letters:\n  publish: kafka://u:pw@h:9092/dead\n");
    assert_eq!((d.line, d.column), (Some(2), Some(12)), "{d}");
    #[cfg(not(feature = "kafka"))]
    assert!(d.message.contains("build with --features kafka"), "{d}");
    #[cfg(feature = "kafka")]
    assert!(d.message.contains("neither SASL nor TLS"), "{d}");
    assert!(!d.message.contains("pw"), "{d}");
}

#[test]
fn the_source_section_takes_its_keys_and_names_a_bad_one() {
    let config = parse(
        "source:\n  url: nats://127.0.0.1:4222/ORDERS?consumer=rebound\n  biz: ORDER\n  biz_token: 2\n  fates_keep: 30m\n",
    )
    .expect("a good source section");
    let source = config.source.expect("source:");
    assert_eq!(source.biz.as_deref(), Some("ORDER"));
    assert_eq!(source.biz_token.map(|n| n.get()), Some(2));
    assert_eq!(source.fates_keep, Some(Duration::from_secs(1800)));
    let d = first_error("source:\n  fates_keep: forever\n");
    assert_eq!((d.line, d.column), (Some(2), Some(15)), "{d:?}");
    assert!(
        d.message.contains("bad duration 'forever'"),
        "{}",
        d.message
    );
}

#[test]
fn a_size_takes_bytes_or_a_unit_and_names_a_bad_one() {
    for (text, bytes) in [
        ("2048", 2048),
        ("'100B'", 100),
        ("512KiB", 512 * 1024),
        ("1MiB", 1 << 20),
        ("2MB", 2_000_000),
        ("'1 GiB'", 1 << 30),
    ] {
        let config = parse(&format!("topology:\n  max_payload: {text}\n")).expect(text);
        assert_eq!(config.topology.max_payload, Some(bytes), "{text}");
    }
    for (text, says) in [
        ("0", "a size of zero"),
        ("1.5", "bad size 1.5"),
        ("lots", "bad size \"lots\""),
        ("5PB", "bad size \"5PB\""),
    ] {
        let d = first_error(&format!("topology:\n  max_payload: {text}\n"));
        assert_eq!((d.line, d.column), (Some(2), Some(16)), "{text}: {d:?}");
        assert!(d.message.contains(says), "{text}: {}", d.message);
    }
}

#[test]
fn a_receiver_is_a_webhook_or_an_alertmanager_and_may_ask_for_payloads() {
    let config = parse(
        "receivers:\n  hook:\n    webhook: http://127.0.0.1:9000/x\n  am:\n    alertmanager: http://127.0.0.1:9093\n    include_payload: true\n",
    )
    .expect("two receivers");
    let hook = config.receivers.get("hook").unwrap();
    assert_eq!(
        (hook.kind, hook.include_payload),
        (ReceiverKind::Webhook, false)
    );
    let am = config.receivers.get("am").unwrap();
    assert_eq!(
        (am.kind, am.include_payload, am.webhook.as_str()),
        (ReceiverKind::Alertmanager, true, "http://127.0.0.1:9093")
    );
    for (text, says) in [
        (
            "receivers:\n  x:\n    webhook: http://a/b\n    alertmanager: http://a\n",
            "a receiver has both webhook: and alertmanager:",
        ),
        (
            "receivers:\n  x:\n    include_payload: true\n",
            "a receiver needs webhook: URL or alertmanager: URL",
        ),
        ("receivers:\n  x:\n    alertmanager: ftp://a\n", "http"),
    ] {
        let d = first_error(text);
        assert!(d.message.contains(says), "{text}: {}", d.message);
        assert!(d.line.is_some(), "{text}: {d:?}");
    }
}

#[test]
fn a_drain_must_leave_the_stop_a_second_and_names_what_is_wrong() {
    let config = parse("topology:\n  drain: { stop: 30s }\n").unwrap();
    assert_eq!(
        config.topology.drain,
        Some(Drain(StopBounds {
            trees: Duration::from_secs(7),
            total: Duration::from_secs(30),
        }))
    );
    for (text, says) in [
        (
            "{ trees: 10s }",
            "drain.trees (10s) must leave at least 1s of drain.stop (10s)",
        ),
        ("{ trees: 5s, stop: 5500ms }", "must leave at least 1s"),
        ("{ stop: 0s }", "a duration of zero"),
        ("{ wait: 5s }", "unknown field 'wait'"),
    ] {
        let d = first_error(&format!("topology:\n  drain: {text}\n"));
        assert!(d.message.contains(says), "{text}: {}", d.message);
        assert_eq!(d.line, Some(2), "{text}: {d:?}");
    }
}

#[test]
fn the_decision_log_takes_a_sample_from_none_to_all_and_a_bound() {
    use rebound_runtime::release::LogOptions;
    let config = parse("decisions:\n  sample: 10%\n  keep: 5000\n").expect("a section");
    assert_eq!(
        config.decisions.apply(LogOptions::default()),
        LogOptions {
            sample: 0.1,
            keep: 5000
        }
    );
    for (text, share) in [("0%", 0.0), ("100%", 1.0), ("0.25", 0.25), ("1", 1.0)] {
        let config = parse(&format!("decisions:\n  sample: {text}\n")).expect(text);
        assert_eq!(config.decisions.sample, Some(share), "{text}");
    }
    assert_eq!(
        parse("{}").unwrap().decisions.apply(LogOptions::default()),
        LogOptions::default()
    );
    for (text, says) in [
        ("  sample: 150%", "a sample of 150%"),
        ("  sample: lots", "bad sample 'lots'"),
        ("  keep: 0", "at least 1"),
        ("  kept: 5", "kept"),
    ] {
        let d = first_error(&format!("decisions:\n{text}\n"));
        assert_eq!(d.line, Some(2), "{text}: {d:?}");
        assert!(d.message.contains(says), "{text}: {}", d.message);
    }
}
