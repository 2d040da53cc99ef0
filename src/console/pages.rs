//! The console's pages: one static HTML shell each, naming its scripts. A shell holds no value
//! from a rule file, a message or a failure: the scripts fetch them from the admin API and put
//! them in the page as text.

/// One page of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Its route.
    pub path: &'static str,
    /// Its name: its script is `/ui/assets/KEY.js`.
    pub key: &'static str,
    /// Its title, and its entry in the navigation.
    pub title: &'static str,
    /// Whether the navigation lists it.
    pub in_nav: bool,
}

/// Every page, in the navigation's order.
pub const PAGES: &[Page] = &[
    Page {
        path: "/ui/",
        key: "overview",
        title: "Overview",
        in_nav: true,
    },
    Page {
        path: "/ui/rules",
        key: "rules",
        title: "Rules",
        in_nav: true,
    },
    Page {
        path: "/ui/rules/history",
        key: "history",
        title: "Rule history",
        in_nav: true,
    },
    Page {
        path: "/ui/paths",
        key: "paths",
        title: "Paths",
        in_nav: true,
    },
    Page {
        path: "/ui/dead-letters",
        key: "dead-letters",
        title: "Dead letters",
        in_nav: true,
    },
    Page {
        path: "/ui/retries",
        key: "retries",
        title: "Retries",
        in_nav: true,
    },
    Page {
        path: "/ui/audit",
        key: "audit",
        title: "Audit",
        in_nav: true,
    },
    Page {
        path: "/ui/nodes",
        key: "nodes",
        title: "Nodes",
        in_nav: true,
    },
    Page {
        path: "/ui/messages/{id}",
        key: "message",
        title: "Message",
        in_nav: false,
    },
];

/// The page's HTML.
pub fn html(page: &Page) -> String {
    let nav: String = PAGES
        .iter()
        .filter(|p| p.in_nav)
        .map(|p| {
            let current = if p.key == page.key {
                " aria-current=\"page\""
            } else {
                ""
            };
            format!("<a href=\"{}\"{current}>{}</a>", p.path, p.title)
        })
        .collect();
    format!(
        "<!doctype html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">
<title>{title} · Rebound</title>
<link rel=\"icon\" href=\"/ui/assets/favicon.svg\" type=\"image/svg+xml\">
<link rel=\"stylesheet\" href=\"/ui/assets/console.css\">
<script src=\"/ui/assets/console.js\" defer></script>
<script src=\"/ui/assets/{key}.js\" defer></script>
</head>
<body data-page=\"{key}\">
<header class=\"top\">
<a class=\"brand\" href=\"/ui/\">Rebound</a>
<nav aria-label=\"Pages\">{nav}</nav>
<span id=\"token-state\" class=\"token-state\"></span>
</header>
<main>
<h1 id=\"title\">{title}</h1>
<div id=\"notice\" class=\"notice\" role=\"status\" hidden></div>
<div id=\"app\"><p class=\"muted\">Loading…</p></div>
</main>
<dialog id=\"token-dialog\">
<form method=\"dialog\" id=\"token-form\">
<p>This action needs the admin token. It is kept for this tab only.</p>
<label>Admin token <input type=\"password\" id=\"token-input\" autocomplete=\"off\" required></label>
<div class=\"buttons\"><button value=\"cancel\" type=\"button\" id=\"token-cancel\">Cancel</button>
<button value=\"ok\" id=\"token-ok\">Use token</button></div>
</form>
</dialog>
</body>
</html>
",
        title = page.title,
        key = page.key,
    )
}
