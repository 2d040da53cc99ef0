//! The console's files, embedded in the binary.

/// Every asset: its name under `/ui/assets/`, its content type and its bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    ("console.js", JS, include_str!("assets/console.js")),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("assets/favicon.svg"),
    ),
    ("overview.js", JS, include_str!("assets/overview.js")),
    ("rules.js", JS, include_str!("assets/rules.js")),
    ("history.js", JS, include_str!("assets/history.js")),
    ("paths.js", JS, include_str!("assets/paths.js")),
    (
        "dead-letters.js",
        JS,
        include_str!("assets/dead-letters.js"),
    ),
    ("retries.js", JS, include_str!("assets/retries.js")),
    ("audit.js", JS, include_str!("assets/audit.js")),
    ("nodes.js", JS, include_str!("assets/nodes.js")),
    ("message.js", JS, include_str!("assets/message.js")),
];

const JS: &str = "text/javascript; charset=utf-8";

/// The content type and the text of the asset `name`.
pub fn get(name: &str) -> Option<(&'static str, &'static str)> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, t, body)| (*t, *body))
}
