//! A small blocking W3C WebDriver client for Debian's `chromedriver` and `chromium`: a session,
//! navigation, elements found by CSS, clicks and keys, scripts, screenshots, alerts and the
//! browser's console log. It is the part of the protocol these tests use and nothing more,
//! over the `reqwest` blocking client the other tests already build (no new crate, nothing
//! more to compile on a 2-core CI; fantoccini or thirtyfour would bring an async stack, a TLS
//! backend and the `webdriver` crate's types for the same dozen commands).
//!
//! [`Browser::start`] starts `chromedriver --port=0` (it prints the port it bound) and one
//! headless Chromium with a profile in a new temp dir; dropping the [`Browser`] ends the
//! session (Chromium quits), then kills chromedriver, then whatever is left of that Chromium.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key W3C WebDriver names an element reference by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for the page waits before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// One entry of the browser's console log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO`, …
    pub level: String,
    /// What the browser said, with its source URL first for a network error.
    pub message: String,
}

/// A chromedriver with one Chromium session.
pub struct Browser {
    driver: Option<Child>,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    http: reqwest::blocking::Client,
    profile: tempfile::TempDir,
}

/// An element of the page.
#[derive(Clone)]
pub struct Element<'b> {
    browser: &'b Browser,
    id: String,
}

impl Browser {
    /// Chromium headless with a viewport of `width`×`height` CSS pixels.
    pub fn start(width: u32, height: u32) -> Browser {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: `apt-get install -y chromium chromium-driver` (Debian's \
                 packages) brings it; .ci/run installs it ({package})"
            );
        }
        let mut driver = Command::new(CHROMEDRIVER)
            .args(["--port=0", "--log-level=WARNING"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let port = driver_port(&mut driver);
        let http = crate::support::http()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("an HTTP client");
        let profile = tempfile::tempdir().expect("a profile directory");
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-background-networking".to_owned(),
            "--no-first-run".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
            // An alert stays open for the test to see, rather than being dismissed quietly.
            "unhandledPromptBehavior": "ignore",
        }}});
        let root = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            driver: Some(driver),
            session: String::new(),
            http,
            profile,
        };
        let created = browser.call("POST", &format!("{root}/session"), Some(caps));
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {created}"));
        browser.session = format!("{root}/session/{id}");
        browser.set_viewport(width, height);
        browser
    }

    /// Resizes the window so that the page's viewport is `width`×`height` (the window also
    /// holds the browser's own bars, even headless).
    pub fn set_viewport(&self, width: u32, height: u32) {
        let (mut w, mut h) = (i64::from(width), i64::from(height));
        let inner = || {
            let inner = self.execute("return [window.innerWidth, window.innerHeight]", json!([]));
            (inner[0].as_i64().unwrap(), inner[1].as_i64().unwrap())
        };
        let mut last = inner();
        for _ in 0..3 {
            let before = last;
            self.post("/window/rect", json!({"width": w, "height": h}));
            // The page sees a resize when the browser gets to it, which on a loaded machine can
            // be after the command returns: read until it has (or the target is reached).
            let deadline = Instant::now() + Duration::from_secs(5);
            last = inner();
            while last == before
                && last != (i64::from(width), i64::from(height))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
                last = inner();
            }
            if last == (i64::from(width), i64::from(height)) {
                return;
            }
            w += i64::from(width) - last.0;
            h += i64::from(height) - last.1;
        }
        panic!(
            "cannot make the viewport {width}x{height} (it stays {}x{})",
            last.0, last.1
        );
    }

    /// Navigates to `url` and waits for its load event.
    pub fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url }));
    }

    /// The current URL.
    pub fn url(&self) -> String {
        self.get("/url").as_str().unwrap_or_default().to_owned()
    }

    /// The first element matching `css`, if any.
    pub fn find(&self, css: &str) -> Option<Element<'_>> {
        self.find_all(css).into_iter().next()
    }

    /// Every element matching `css`.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.post("/elements", json!({"using": "css selector", "value": css}));
        found
            .as_array()
            .expect("a list of elements")
            .iter()
            .map(|e| self.element(e))
            .collect()
    }

    /// The first element matching `css`, waited for.
    pub fn wait_for(&self, css: &str) -> Element<'_> {
        let mut found = None;
        self.wait_until(&format!("an element `{css}`"), || {
            found = self.find(css);
            found.is_some()
        });
        found.expect("found")
    }

    /// Waits until the script `condition` (a JavaScript expression) is true.
    pub fn wait_js(&self, what: &str, condition: &str) {
        let script = format!("return !!({condition});");
        self.wait_until(what, || self.execute(&script, json!([])) == json!(true));
    }

    /// Polls `f` every 50 ms until it holds; fails the test after [`PATIENCE`].
    pub fn wait_until(&self, what: &str, mut f: impl FnMut() -> bool) {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            f(),
            "waited {PATIENCE:?} for {what} on {}; page text:\n{}",
            self.url(),
            self.execute("return document.body.innerText", json!([]))
        );
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its value.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
    }

    /// Runs `script` (a function body whose last argument is the callback it calls with its
    /// result; the others are `args`) and returns what it called back with. A script may take
    /// up to two minutes (a loaded machine runs axe-core slowly).
    pub fn execute_async(&self, script: &str, args: Value) -> Value {
        self.post("/timeouts", json!({ "script": 120_000 }));
        self.post("/execute/async", json!({"script": script, "args": args}))
    }

    /// The browser's console log since the last call (chromedriver hands each entry once).
    pub fn log(&self) -> Vec<LogEntry> {
        let entries = self.post("/se/log", json!({"type": "browser"}));
        entries
            .as_array()
            .expect("a list of log entries")
            .iter()
            .map(|e| LogEntry {
                level: e["level"].as_str().unwrap_or_default().to_owned(),
                message: e["message"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// The text of the open alert, confirm or prompt, if one is open.
    pub fn alert_text(&self) -> Option<String> {
        let res = self.send("GET", &format!("{}/alert/text", self.session), None);
        match res {
            Ok(v) => Some(v.as_str().unwrap_or_default().to_owned()),
            Err((_, e)) if e["error"] == "no such alert" => None,
            Err((status, e)) => panic!("GET alert/text: {status} {e}"),
        }
    }

    /// Accepts the open alert.
    pub fn accept_alert(&self) {
        self.post("/alert/accept", json!({}));
    }

    /// Writes a PNG of the viewport to `path`.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let shot = self.get("/screenshot");
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().expect("base64 text"))
            .expect("a base64 PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        std::fs::write(path, png).expect("write the screenshot");
    }

    fn element(&self, reference: &Value) -> Element<'_> {
        Element {
            browser: self,
            id: reference[ELEMENT]
                .as_str()
                .unwrap_or_else(|| panic!("not an element: {reference}"))
                .to_owned(),
        }
    }

    fn get(&self, path: &str) -> Value {
        self.call("GET", &format!("{}{path}", self.session), None)
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.call("POST", &format!("{}{path}", self.session), Some(body))
    }

    fn call(&self, method: &str, url: &str, body: Option<Value>) -> Value {
        self.send(method, url, body)
            .unwrap_or_else(|(status, e)| panic!("WebDriver {method} {url}: {status} {e}"))
    }

    /// One command: its `value`, or the status and the error `value` of a refusal.
    fn send(&self, method: &str, url: &str, body: Option<Value>) -> Result<Value, (u16, Value)> {
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let res = req
            .send()
            .unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}"));
        let status = res.status().as_u16();
        let mut answer: Value = res
            .json()
            .unwrap_or_else(|e| panic!("WebDriver {method} {url}: not JSON: {e}"));
        let value = answer["value"].take();
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            Err((status, value))
        }
    }
}

impl Element<'_> {
    /// Clicks it (scrolled into view first, as a user would).
    pub fn click(&self) {
        self.post("/click", json!({}));
    }

    /// Types `text` into it, after what it holds.
    pub fn send_keys(&self, text: &str) {
        self.post("/value", json!({ "text": text }));
    }

    /// Empties an input or a textarea.
    pub fn clear(&self) {
        self.post("/clear", json!({}));
    }

    /// Its rendered text.
    pub fn text(&self) -> String {
        self.get("/text").as_str().unwrap_or_default().to_owned()
    }

    /// Its attribute `name`, if it has one.
    pub fn attribute(&self, name: &str) -> Option<String> {
        self.get(&format!("/attribute/{name}"))
            .as_str()
            .map(str::to_owned)
    }

    /// Its DOM property `name` (`value`, `checked`, `naturalWidth`, …).
    pub fn property(&self, name: &str) -> Value {
        self.get(&format!("/property/{name}"))
    }

    /// The elements matching `css` inside it.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.post("/elements", json!({"using": "css selector", "value": css}));
        found
            .as_array()
            .expect("a list of elements")
            .iter()
            .map(|e| self.browser.element(e))
            .collect()
    }

    /// This element as a script argument.
    pub fn as_arg(&self) -> Value {
        json!({ ELEMENT: self.id })
    }

    fn get(&self, path: &str) -> Value {
        self.browser.get(&format!("/element/{}{path}", self.id))
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.browser
            .post(&format!("/element/{}{path}", self.id), body)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Ends the session: chromedriver quits Chromium.
            let _ = self.send("DELETE", &self.session.clone(), None);
        }
        if let Some(mut driver) = self.driver.take() {
            let _ = driver.kill();
            let _ = driver.wait();
        }
        kill_left_over(self.profile.path());
    }
}

/// The port chromedriver says it listens on ("… started successfully on port N.").
fn driver_port(driver: &mut Child) -> u16 {
    let stdout = driver.stdout.take().expect("chromedriver's stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                let port = rest.trim_end_matches('.').trim().parse::<u16>();
                let _ = tx.send(port);
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(port)) => port,
        other => {
            let _ = driver.kill();
            panic!("chromedriver did not say its port: {other:?}")
        }
    }
}

/// Kills, by id, any process still running with this session's profile directory (a Chromium
/// whose session could not be ended).
fn kill_left_over(profile: &Path) {
    let marker = format!("--user-data-dir={}", profile.display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
    }
}
