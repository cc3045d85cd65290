//! `kiln serve` in a real headless browser (Debian's `chromium`, driven over
//! the DevTools protocol) beside a running campaign: the page loads without
//! console errors, shows the campaign's figures, and updates by itself as
//! steps land. With `KILN_LIVE_VIEW_PNG` set, its screenshot is saved there
//! (scripts/live-view-screenshot). A benchmark's failures show on the page as
//! text, its control characters escaped. The server holds little of any
//! request, never echoes one, and a signal stops it with its temporary
//! folder removed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use crate::common::campaign::{run_until_decided, slow_setup};
use crate::common::*;

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's chromium, if installed (scripts/install-deps installs it).
fn chromium() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join("chromium"))
        .find(|p| p.is_file())
}

/// Starts `kiln serve store --port 0` in `dir`, its temporary files in
/// `dir/tmp`; returns it and the page's URL.
fn serve(dir: &Path) -> (Killed, String) {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = Killed(
        kiln_cmd(dir)
            .args(["serve", "store", "--port", "0"])
            .env("TMPDIR", &tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (child, url)
}

/// A headless chromium and a DevTools session on one page.
struct Browser {
    _process: Killed,
    _profile: tempfile::TempDir,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    /// Console errors and uncaught exceptions seen so far.
    errors: Vec<String>,
}

impl Browser {
    /// Starts chromium; `None` (the test skipped) where it cannot run.
    fn start(binary: &Path) -> Option<Browser> {
        let profile = tempfile::tempdir().unwrap();
        let mut process = Killed(
            std::process::Command::new(binary)
                .args([
                    "--headless",
                    // Root (CI, containers) has no user namespace sandbox.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--remote-debugging-port=0",
                    "--window-size=1280,900",
                    "--hide-scrollbars",
                    "about:blank",
                ])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| skip(format!("chromium does not start: {e}")))
                .ok()?,
        );
        // chromium says where its DevTools listen on stderr.
        let stderr = BufReader::new(process.0.stderr.take().unwrap());
        let mut said = Vec::new();
        let mut ws = None;
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(at) = line.find("ws://") {
                ws = Some(line[at..].trim().to_string());
                break;
            }
            said.push(line);
        }
        let Some(ws) = ws else {
            skip(format!("chromium cannot run here: {}", said.join(" ")));
            return None;
        };
        let (socket, _) = tungstenite::connect(ws.as_str()).expect("DevTools answer");
        let mut browser = Browser {
            _process: process,
            _profile: profile,
            socket,
            session: String::new(),
            next_id: 0,
            errors: Vec::new(),
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().unwrap().to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            browser.call(domain, json!({}));
        }
        Some(browser)
    }

    /// Calls a DevTools method (on the page once attached) and returns its result,
    /// noting the console errors that arrive meanwhile.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap();
        loop {
            let Message::Text(text) = self.socket.read().expect("DevTools answer") else {
                continue;
            };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == json!(id) {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
            self.note(&v);
        }
    }

    fn note(&mut self, event: &Value) {
        let p = &event["params"];
        match event["method"].as_str() {
            Some("Runtime.exceptionThrown") => self.errors.push(p["exceptionDetails"].to_string()),
            Some("Runtime.consoleAPICalled") if p["type"] == "error" || p["type"] == "assert" => {
                self.errors.push(p["args"].to_string())
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                self.errors.push(p["entry"].to_string())
            }
            _ => {}
        }
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r["exceptionDetails"].is_null(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Polls `expression` every 100 ms until `done` accepts its value, for at most `limit`.
    fn wait_for(
        &mut self,
        expression: &str,
        limit: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.eval(expression);
            if done(&v) || Instant::now() > deadline {
                return v;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Points of the first chain's line in the chart of the best so far against steps.
const CURVE_POINTS: &str =
    "(document.querySelector('#course .chart polyline')?.getAttribute('points') || '')\
                            .split(' ').filter(p => p).length";

/// The page's count of decided steps (0 until the page has loaded).
const STEPS_SHOWN: &str = "Number((document.getElementById('steps-done') || {}).textContent || 0)";

#[test]
fn the_live_view_shows_a_running_campaign_and_updates_as_steps_land() {
    let Some(binary) = chromium() else {
        return skip("no chromium on PATH (scripts/install-deps installs it)");
    };
    let dir = slow_setup(400);
    let _campaign = Killed(run_until_decided(dir.path(), 2));
    let (_server, url) = serve(dir.path());
    let Some(mut browser) = Browser::start(&binary) else {
        return;
    };
    browser.call("Page.navigate", json!({ "url": url }));

    // The figures of the running campaign, from its snapshot.
    let first = browser.wait_for(STEPS_SHOWN, Duration::from_secs(10), |v| {
        v.as_u64().is_some_and(|n| n >= 2)
    });
    let first = first.as_u64().expect("steps shown");
    assert!(first >= 2, "the page shows {first} steps");
    let page = browser.eval("document.body.innerText").to_string();
    for expected in [
        "slow",
        // The controller's phase, and the chain's state.
        "searching",
        "running",
        "live snapshot",
        "/400",
        "time ratio",
        "local",
        "ok",
    ] {
        assert!(
            page.contains(expected),
            "{expected:?} not on the page: {page}"
        );
    }
    let ratio = browser
        .eval("document.querySelector('tr[data-chain=\"slow/0\"] td:nth-child(6)').textContent");
    // A ratio below 1 (shown to four places: one just below shows as 1.0000),
    // or, until a step beats the baseline, words that say so.
    let ratio = ratio.as_str().unwrap();
    assert!(
        ratio == "no step beat stock" || ratio.parse::<f64>().is_ok_and(|r| r > 0.0 && r <= 1.0),
        "time ratio {ratio:?}"
    );
    // Acceptance as every view says it: a share of the steps that could move the chain.
    let accepted = browser
        .eval("document.querySelector('tr[data-chain=\"slow/0\"] td:nth-child(3)').textContent");
    let accepted = accepted.as_str().unwrap();
    let (taken, rest) = accepted.split_once(" of ").unwrap_or_default();
    let (proposals, rate) = rest.split_once(" (").unwrap_or_default();
    assert!(
        taken.parse::<u32>().is_ok()
            && proposals.parse::<u32>().is_ok_and(|p| p >= 2)
            && rate.ends_with("%)"),
        "accepted {accepted:?}"
    );
    // How long the chain has to go, and the campaign.
    let eta = browser
        .eval("document.querySelector('tr[data-chain=\"slow/0\"] td:nth-child(10)').textContent");
    assert!(
        eta.as_str()
            .is_some_and(|e| e != "-" && e.ends_with(['s', 'm'])),
        "eta {eta}"
    );
    let left = browser.eval("document.getElementById('left').textContent");
    assert!(
        left.as_str()
            .is_some_and(|l| l.starts_with(", about ") && l.ends_with(" left")),
        "{left}"
    );

    // The chains' progress and ETA, what one checks daily, come before the charts.
    let order = browser.eval(
        "document.getElementById('experiments').compareDocumentPosition(document.getElementById('course'))",
    );
    assert_eq!(
        order.as_u64().map(|o| o & 4),
        Some(4),
        "the course follows the tables"
    );
    // The course, drawn in the page: six charts, each with its title.
    let titles = browser.eval(
        "[...document.querySelectorAll('#course .chart h3')].map(h => h.textContent).join('|')",
    );
    for title in [
        "Best so far (time ratio) against steps",
        "Best so far (time ratio) against time",
        "Throughput",
        "Failed steps so far, by reason",
        "Acceptance rate over the last 20 proposals",
        "Temperature",
    ] {
        assert!(
            titles.as_str().unwrap().contains(title),
            "{title:?} not in {titles}"
        );
    }
    let drawn = browser.eval(CURVE_POINTS).as_u64().unwrap_or(0);
    assert!(drawn >= 2, "the best-so-far curve has {drawn} points");

    // New steps land; the page shows them, and its curve grows, without being reloaded.
    let later = browser.wait_for(STEPS_SHOWN, Duration::from_secs(10), |v| {
        v.as_u64().is_some_and(|n| n > first)
    });
    assert!(
        later.as_u64().unwrap() > first,
        "the page still shows {first} steps after 10 s"
    );
    let grown = browser.wait_for(CURVE_POINTS, Duration::from_secs(10), |v| {
        v.as_u64().is_some_and(|n| n > drawn)
    });
    assert!(
        grown.as_u64().unwrap_or(0) > drawn,
        "the best-so-far curve still has {drawn} points"
    );
    // The worker's share of its slots' time on jobs.
    let busy = browser.eval("document.querySelector('#workers tbody td:nth-child(5)').textContent");
    assert!(busy.as_str().unwrap().ends_with('%'), "busy: {busy}");

    // The plots are a click away, drawn from a copy of the store in use.
    let plots = browser.eval(
        "fetch('/report/').then(async r => r.status + ' ' + (await r.text()).includes('slow-objective.png'))",
    );
    assert_eq!(plots, json!("200 true"));
    let image = browser.eval(
        "new Promise(done => { const i = new Image(); i.onload = () => done(i.naturalWidth); \
         i.onerror = () => done(0); i.src = '/report/slow-objective.png'; })",
    );
    assert!(
        image.as_u64().unwrap_or(0) > 0,
        "the objective plot does not load"
    );

    if let Some(path) = std::env::var_os("KILN_LIVE_VIEW_PNG") {
        // Tall enough for the course and the tables.
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1500, "deviceScaleFactor": 1, "mobile": false}),
        );
        let shot = browser.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(&path, png).unwrap();
    }
    // Give late events (a failed poll, a script error) a moment to arrive.
    browser.wait_for(STEPS_SHOWN, Duration::from_millis(1500), |_| false);
    assert!(
        browser.errors.is_empty(),
        "console errors: {:?}",
        browser.errors
    );
}

/// `GET url` over plain HTTP/1.0: the status code and the body.
fn get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(host).unwrap();
    write!(stream, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    // Images are not UTF-8: only the head and a text body need to be read.
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

#[test]
fn serving_a_store_never_holds_it_from_a_controller() {
    let dir = noop_campaign();
    let (_server, url) = serve(dir.path());
    let (status, body) = get(&format!("{url}api/status"));
    assert_eq!(status, 200, "{body}");
    let live: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(live["report"]["campaign"], "noop");
    assert_eq!(live["report"]["finished"], true);
    assert_eq!(live["live"], false, "{body}");
    assert_eq!(live["objective"], "median wall-time (ms)");
    assert_eq!(live["report"]["phase"], "finished");
    let figures = &live["figures"][0];
    // Formatted with their unit, as every command prints them.
    assert!(
        figures["best"].as_str().unwrap().ends_with('s'),
        "{figures}"
    );
    assert_eq!(figures["faster"], true, "{figures}");
    let (status, body) = get(&format!("{url}report/"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("a-objective.png"), "{body}");
    let (status, _) = get(&format!("{url}report/a-objective.png"));
    assert_eq!(status, 200);
    let (status, _) = get(&format!("{url}report/..%2Fdb"));
    assert_eq!(status, 404);
    // With the server up and its copies read, a controller still gets the store.
    let resumed = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
}

#[test]
fn a_controller_waits_out_a_reader_holding_the_store_for_a_moment() {
    let dir = noop_campaign();
    // A reader (no controller: the holder file names one that has exited) holds the lock
    // for 2 s, as the live view does while it reads the store.
    let mut reader = std::process::Command::new("flock")
        .args(["-x", "store/db/db", "sleep", "2"])
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let resumed = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    reader.wait().unwrap();
}

#[test]
fn the_live_view_waits_for_a_store_no_campaign_has_made_yet() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("noop")).unwrap();
    std::fs::write(dir.path().join("noop/README"), "nothing to build\n").unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), noop_config(false)).unwrap();
    let (_server, url) = serve(dir.path());
    let (status, body) = get(&format!("{url}api/status"));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("waiting for a campaign"), "{body}");
    let (status, body) = get(&url);
    assert_eq!(status, 200, "{body}");
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let (status, body) = get(&format!("{url}api/status"));
    assert_eq!(status, 200, "{body}");
    let live: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(live["report"]["campaign"], "noop");
    // A folder of other things is no store to wait for: bad input.
    let out = run_kiln(dir.path(), &["serve", "noop", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("noop is not a kiln store"),
        "{}",
        text(&out)
    );
}

#[test]
fn the_live_view_shows_a_benchmark_s_failures_as_text() {
    let Some(binary) = chromium() else {
        return skip("no chromium on PATH (scripts/install-deps installs it)");
    };
    let (dir, run) = loud_campaign();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let (_server, url) = serve(dir.path());
    let Some(mut browser) = Browser::start(&binary) else {
        return;
    };
    browser.call("Page.navigate", json!({ "url": url }));
    let failures = browser.wait_for(
        "(document.getElementById('failures') || {}).textContent || ''",
        Duration::from_secs(10),
        |v| v.as_str().is_some_and(|t| t.contains("loud/chain 0")),
    );
    let failures = failures.as_str().unwrap();
    assert!(!has_controls(failures), "{failures:?}");
    for shown in [
        "\\x1b[31mRED",
        "\\x1b]52;c;aGVsbG8=\\x07",
        "bell\\x07",
        "\\u{9b}2J",
        // Markup is text, never HTML.
        "<b>bold</b>",
    ] {
        assert!(failures.contains(shown), "{shown} not in {failures}");
    }
    assert_eq!(
        browser.eval("document.querySelectorAll('#failures b').length"),
        json!(0)
    );
    assert!(
        browser.errors.is_empty(),
        "console errors: {:?}",
        browser.errors
    );
}

/// Sends `head` then `filler` bytes up to `total` on a connection of its own
/// while reading the answer; returns the answer and how much was sent before
/// the server closed the connection.
fn stream_request(url: &str, head: &str, filler: u8, total: usize) -> (String, usize) {
    let host = url.strip_prefix("http://").unwrap().trim_end_matches('/');
    let stream = TcpStream::connect(host).unwrap();
    let mut sender = stream.try_clone().unwrap();
    let head = head.to_string();
    let sending = std::thread::spawn(move || {
        let chunk = vec![filler; 64 * 1024];
        let mut sent = 0;
        if sender.write_all(head.as_bytes()).is_err() {
            return sent;
        }
        sent += head.len();
        while sent < total {
            match sender.write(&chunk[..chunk.len().min(total - sent)]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        sent
    });
    let mut answer = Vec::new();
    let mut reader = stream;
    let mut buf = [0u8; 8192];
    // The answer, then the end of the connection (or its reset: the server stops reading).
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let _ = reader.shutdown(std::net::Shutdown::Both);
    (
        String::from_utf8_lossy(&answer).into_owned(),
        sending.join().unwrap(),
    )
}

/// A process's resident set and its peak so far, in bytes (from /proc).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[test]
fn the_server_holds_little_of_a_request_and_never_echoes_it() {
    const MB: usize = 1 << 20;
    let dir = noop_campaign();
    let (server, url) = serve(dir.path());
    let pid = server.0.id();
    let (status, _) = get(&format!("{url}api/status"));
    assert_eq!(status, 200);
    let (rss, peak) = memory(pid);

    // A header line of 100 MB: refused once past the bound, long before its end.
    let (answer, header_sent) = stream_request(&url, "GET / HTTP/1.1\r\nX-Big: ", b'h', 100 * MB);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(
        header_sent < 50 * MB,
        "the server read {header_sent} bytes of the request"
    );
    // A URL of 8 MB: refused too, and not echoed.
    let (answer, sent) = stream_request(&url, "GET /", b'u', 8 * MB);
    assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
    assert!(!answer.contains("uuuu"), "{answer}");
    assert!(sent < 8 * MB, "the server read {sent} bytes of the request");
    let (after_rss, after_peak) = memory(pid);
    eprintln!(
        "kiln serve: cut a 100 MB header off after {} MB; resident {} MB before, {} MB after; \
         peak {} MB before, {} MB after",
        header_sent / MB,
        rss / MB as u64,
        after_rss / MB as u64,
        peak / MB as u64,
        after_peak / MB as u64
    );
    assert!(
        after_peak < peak + 16 * MB as u64,
        "the server grew from a peak of {peak} to {after_peak} bytes"
    );

    // A path that is nowhere is not echoed either.
    for path in [
        "no-such-page",
        "report/%3Cscript%3Ealert(1)%3C%2Fscript%3E.png",
    ] {
        let (status, body) = get(&format!("{url}{path}"));
        assert_eq!(status, 404, "{body}");
        assert!(
            !body.contains("no-such") && !body.contains("script"),
            "{body}"
        );
    }
    // The server still answers.
    let (status, _) = get(&format!("{url}api/status"));
    assert_eq!(status, 200);
}

#[test]
fn a_signal_stops_the_server_and_removes_its_plots() {
    let dir = noop_campaign();
    for (signal, status) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let (mut server, url) = serve(dir.path());
        let (code, _) = get(&format!("{url}report/"));
        assert_eq!(code, 200);
        let tmp = dir.path().join("tmp");
        let plots = || -> Vec<String> {
            std::fs::read_dir(&tmp)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kiln-serve-"))
                .collect()
        };
        assert_eq!(plots().len(), 1, "{:?}", plots());
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(server.0.id() as libc::pid_t, signal) };
        let ended = server.0.wait().unwrap();
        assert_eq!(ended.code(), Some(status), "{ended}");
        assert!(plots().is_empty(), "{:?} left behind", plots());
        // A signal is how a server ends: a note, never an error.
        let mut said = String::new();
        server
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert!(
            said.contains("the live view stopped") && !said.contains("error"),
            "{said}"
        );
    }
}
