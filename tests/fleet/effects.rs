//! The bundled order sink's shared idempotent effect sets in the store
//! (`rebound::pipeline::fleet::effects`): each id once, repeats counted.

use rebound::pipeline::fleet::effects;
use rebound_store_redis::TestServer;

use crate::open as store;

#[test]
fn effects_are_kept_once_and_repeats_counted_as_duplicates() {
    let server = TestServer::start();
    let a = store(&server, "effects");
    let b = store(&server, "effects");
    assert_eq!(effects::count(&a, "orders").unwrap(), (0, 0));
    assert!(effects::put(&a, "orders", &[]).unwrap().is_empty());

    assert_eq!(
        effects::put(&a, "orders", &["o-1", "o-2", "o-1"]).unwrap(),
        [true, true, false],
        "a repeat within one batch is a duplicate too"
    );
    // Another node redelivers o-2.
    assert_eq!(
        effects::put(&b, "orders", &["o-2", "o-3"]).unwrap(),
        [false, true]
    );
    assert_eq!(effects::count(&a, "orders").unwrap(), (3, 2));
    assert_eq!(
        effects::held(&b, "orders", &["o-3", "o-4", "o-1"]).unwrap(),
        [true, false, true]
    );
    assert!(effects::held(&b, "orders", &[]).unwrap().is_empty());

    // Sets, and namespaces, are apart.
    assert_eq!(effects::put(&a, "orders:dups", &["o-1"]).unwrap(), [true]);
    assert_eq!(effects::count(&a, "orders:dups").unwrap(), (1, 0));
    assert_eq!(effects::count(&a, "orders").unwrap(), (3, 2));
    assert_eq!(
        effects::count(&store(&server, "effects-2"), "orders").unwrap(),
        (0, 0)
    );
}
