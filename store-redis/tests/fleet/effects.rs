//! The shared idempotent effect set: each id once, repeats counted.

use rebound_store_redis::TestServer;

use crate::store;

#[test]
fn effects_are_kept_once_and_repeats_counted_as_duplicates() {
    let server = TestServer::start();
    let a = store(&server, "effects");
    let b = store(&server, "effects");
    assert_eq!(a.effects("orders").unwrap(), (0, 0));
    assert!(a.put_effects("orders", &[]).unwrap().is_empty());

    assert_eq!(
        a.put_effects("orders", &["o-1", "o-2", "o-1"]).unwrap(),
        [true, true, false],
        "a repeat within one batch is a duplicate too"
    );
    // Another node redelivers o-2.
    assert_eq!(
        b.put_effects("orders", &["o-2", "o-3"]).unwrap(),
        [false, true]
    );
    assert_eq!(a.effects("orders").unwrap(), (3, 2));
    assert!(b.effect_exists("orders", "o-3").unwrap());
    assert!(!b.effect_exists("orders", "o-4").unwrap());

    // Sets, and namespaces, are apart.
    assert_eq!(a.put_effects("orders:dups", &["o-1"]).unwrap(), [true]);
    assert_eq!(a.effects("orders:dups").unwrap(), (1, 0));
    assert_eq!(a.effects("orders").unwrap(), (3, 2));
    assert_eq!(
        store(&server, "effects-2").effects("orders").unwrap(),
        (0, 0)
    );
}
