//! `kiln serve`: a live view of a campaign in the browser.
//!
//! One page (`page.html`) fetches `/api/status` every second and redraws its
//! tables: per experiment and chain, progress, best against the baseline as a
//! time ratio, acceptance and failures; the workers' health. `/report/`
//! regenerates `kiln report`'s plots when the store changed and serves them.
//!
//! A running controller's `status.json` is read while it is fresh. Otherwise
//! the status and the plots are read from the store in place where no
//! controller holds it ([`Store::open_view`]: the chains' states and the steps
//! drawn, so sled's lock is held for moments, which a `kiln run` starting then
//! waits out), else from a copy of its database taken then; both again only
//! when its files changed.
//!
//! Requests are read within bounds ([`http`]), each connection on a thread of
//! its own, at most [`MAX_CONNECTIONS`] at once. [`Server::close`] removes the
//! plots' temporary folder.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::campaign::status::{self, Report};
use crate::report::{self, ObjectiveAxis};
use crate::store::time_ratio;
use crate::store::{layout, now_ms, Store};
use crate::text::{best_cells, format_measure};

mod http;

use http::Response;

/// A `status.json` older than this is a controller's last word, not a live one.
const SNAPSHOT_FRESH_MS: u64 = 5_000;

/// Connections answered at once, each on its own thread: the plots can take
/// seconds to draw, and the status must not wait for them. Past it, a
/// connection is closed unanswered.
const MAX_CONNECTIONS: usize = 32;

/// What `/api/status` answers.
#[derive(Serialize)]
struct Live {
    report: Report,
    /// Where the figures come from, in words.
    source: String,
    /// Whether a controller is writing them now.
    live: bool,
    /// The statistic, metric and unit of the objective.
    objective: String,
    /// Per chain (in the report's order), its figures as every command prints them.
    figures: Vec<Figures>,
    /// Seconds until the last running chain ends, while a controller runs it.
    left_s: Option<f64>,
}

/// A chain's figures as text, formatted as by every command (`crate::text`).
#[derive(Serialize)]
struct Figures {
    best: String,
    baseline: String,
    time_ratio: String,
    /// Whether the best is faster than the baseline (`None`: no ratio yet, or as fast).
    faster: Option<bool>,
    /// Seconds to its end, while a controller runs it ([`crate::campaign::status::ChainRow::eta`]).
    eta_s: Option<f64>,
}

impl Live {
    fn new(report: Report, source: String, live: bool, objective: &ObjectiveAxis) -> Live {
        let figures = report
            .chains
            .iter()
            .map(|r| {
                let ratio = time_ratio(r.best, r.baseline);
                let [best, time_ratio] = best_cells(r.best, r.baseline, r.done, &report.unit);
                Figures {
                    best,
                    baseline: format_measure(r.baseline, &report.unit),
                    time_ratio,
                    // Only a step below the baseline is a best at all.
                    faster: (ratio.is_finite() && ratio < 1.0).then_some(true),
                    eta_s: r.eta().filter(|_| live),
                }
            })
            .collect();
        Live {
            left_s: report.eta().filter(|_| live),
            report,
            source,
            live,
            objective: objective.label.clone(),
            figures,
        }
    }
}

/// Whether `dir` holds a campaign store (or a running controller's status).
pub fn has_store(dir: &Path) -> bool {
    layout::db_file(dir).is_file() || layout::status_snapshot(dir).is_file()
}

/// The modification signature of a store's database files: changes whenever a writer writes.
type Signature = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// A live view of one store, bound to its address.
pub struct Server {
    listener: TcpListener,
    store: PathBuf,
    /// The status last read from the store, by the signature of its files then.
    last_read: Mutex<Option<(Signature, Report)>>,
    /// The plots, drawn into a temporary folder, by the signature they show.
    plots: Mutex<Option<(Signature, tempfile::TempDir)>>,
    /// Set by [`Server::close`]: no plots are drawn any more.
    closed: AtomicBool,
    /// Connections being answered.
    connections: AtomicUsize,
    /// The campaign's objective, read from its config once.
    objective: OnceLock<ObjectiveAxis>,
}

impl Server {
    /// Listens on `addr` (port 0: any free port) for a view of the store in
    /// `store`, which a campaign may not have made yet ([`Server::waiting`]).
    pub fn bind(store: &Path, addr: SocketAddr) -> Result<Server> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        Ok(Server {
            listener,
            store: store.to_path_buf(),
            last_read: Mutex::new(None),
            plots: Mutex::new(None),
            closed: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            objective: OnceLock::new(),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .context("the server listens on no address")
    }

    /// Answers requests until the process ends.
    pub fn run(self: Arc<Self>) {
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was
                    // accepted: the next one may do.
                    tracing::warn!("cannot accept a connection: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if self.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                self.connections.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let server = Arc::clone(&self);
            std::thread::spawn(move || {
                http::serve(stream, |path| server.respond(path));
                server.connections.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// Removes the plots' temporary folder, waiting for a drawing under way;
    /// no plots are drawn after it.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        *self.plots.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The answer to a `GET` of `path`; a failure is a 500 that says why.
    fn respond(&self, path: &str) -> Response {
        self.answer(path)
            .unwrap_or_else(|e| Response::text(500, &format!("{e:#}")))
    }

    fn answer(&self, path: &str) -> Result<Response> {
        Ok(match path {
            "/" | "/index.html" => html(include_str!("page.html").into()),
            "/api/status" if self.waiting() => Response::text(
                503,
                &format!(
                    "waiting for a campaign to make its store in {}",
                    self.store.display()
                ),
            ),
            "/api/status" => {
                let live = self.status()?;
                Response::new(200, "application/json", serde_json::to_vec(&live)?)
            }
            "/report" => Response::text(302, "").with_header("Location", "/report/"),
            "/report/" | "/report/index.html" => {
                html(std::fs::read(self.plots()?.join("index.html"))?)
            }
            _ => match path.strip_prefix("/report/").and_then(plot_file) {
                Some((name, kind)) => match std::fs::read(self.plots()?.join(name)) {
                    Ok(bytes) => Response::new(200, kind, bytes),
                    Err(_) => not_found(),
                },
                None => not_found(),
            },
        })
    }

    /// Whether no campaign has made the store yet: the page says it waits,
    /// and shows the campaign once a controller starts writing it.
    pub fn waiting(&self) -> bool {
        !has_store(&self.store)
    }

    /// The campaign's status: the running controller's snapshot while it is
    /// fresh and unfinished, else read from the store.
    fn status(&self) -> Result<Live> {
        let snapshot = layout::status_snapshot(&self.store);
        if let Ok(bytes) = std::fs::read(&snapshot) {
            if let Ok(report) = serde_json::from_slice::<Report>(&bytes) {
                let age = now_ms().saturating_sub(report.at_ms);
                // A finished campaign's controller is exiting, or gone.
                if age < SNAPSHOT_FRESH_MS && !report.finished {
                    let source = format!(
                        "live snapshot from the running controller, {:.1} s old",
                        age as f64 / 1000.0
                    );
                    return Ok(Live::new(report, source, true, &self.objective()?));
                }
            }
        }
        let source = "the store (no controller is writing it)".to_string();
        if let Some(sealed) = status::sealed(&self.store) {
            let objective = ObjectiveAxis::of(sealed.objective.as_ref());
            return Ok(Live::new(sealed.report, source, false, &objective));
        }
        let signature = signature(&self.store)?;
        let mut last_read = self.last_read.lock().unwrap_or_else(|p| p.into_inner());
        let report = match last_read.as_ref() {
            Some((s, report)) if *s == signature => report.clone(),
            _ => {
                let report = status::from_store(&Store::open_view(&self.store)?)?;
                *last_read = Some((signature, report.clone()));
                report
            }
        };
        Ok(Live::new(report, source, false, &self.objective()?))
    }

    /// The campaign's objective, from its config in the store (read once).
    fn objective(&self) -> Result<ObjectiveAxis> {
        if let Some(o) = self.objective.get() {
            return Ok(o.clone());
        }
        let config = Store::open_view(&self.store)?.config()?;
        Ok(self
            .objective
            .get_or_init(|| ObjectiveAxis::of(config.as_ref().map(|c| &c.objective)))
            .clone())
    }

    /// The folder of the plots of the store as it is now, drawn again if it changed.
    fn plots(&self) -> Result<PathBuf> {
        let signature = signature(&self.store)?;
        let mut plots = self.plots.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the lock: [`Server::close`] takes it after setting the flag.
        if self.closed.load(Ordering::SeqCst) {
            bail!("the live view is closing");
        }
        if let Some((s, dir)) = plots.as_ref() {
            if *s == signature {
                return Ok(dir.path().to_path_buf());
            }
        }
        let dir = tempfile::Builder::new().prefix("kiln-serve-").tempdir()?;
        report::report(&Store::open_view(&self.store)?, dir.path())?;
        let path = dir.path().to_path_buf();
        *plots = Some((signature, dir));
        Ok(path)
    }
}

/// The signature of the store's database files (sizes and modification times).
fn signature(store: &Path) -> Result<Signature> {
    let db = layout::db(store);
    let mut files = Vec::new();
    let mut dirs = vec![db.clone()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                files.push((entry.path(), meta.len(), meta.modified().ok()));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A plot's file name and its content type; `None` for anything else (no paths).
fn plot_file(name: &str) -> Option<(&str, &'static str)> {
    let kind = match name.rsplit_once('.')?.1 {
        "png" => "image/png",
        "svg" => "image/svg+xml",
        _ => return None,
    };
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (plain && !name.starts_with('.')).then_some((name, kind))
}

fn html(page: Vec<u8>) -> Response {
    Response::new(200, "text/html; charset=utf-8", page)
}

/// Not found: the request's path is never echoed.
fn not_found() -> Response {
    Response::text(404, "not found")
}

#[cfg(test)]
mod tests {
    use super::plot_file;

    #[test]
    fn only_plot_files_are_served() {
        assert_eq!(
            plot_file("slow-objective.png"),
            Some(("slow-objective.png", "image/png"))
        );
        assert_eq!(
            plot_file("workers-throughput.svg"),
            Some(("workers-throughput.svg", "image/svg+xml"))
        );
        for bad in [
            "../db/conf.png",
            "a/b.svg",
            "index.html",
            ".png",
            "x%2f.png",
        ] {
            assert_eq!(plot_file(bad), None, "{bad}");
        }
    }
}
