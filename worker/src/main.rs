//! `kiln-worker`: the measuring instrument.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kiln_protocol::config::benchmark::{Limits, RunPolicy};
use kiln_protocol::frame::MAX_FRAME;
use kiln_protocol::message::StepOutcome;
use kiln_protocol::{ContentHash, Metric};
use kiln_worker::launch::checked_output::LineFilter;
use kiln_worker::measure::report;
use kiln_worker::measure::{self, OutputSpec, Plan};
use kiln_worker::{launch, probe, serve};

/// kiln's worker: builds benchmarks under decision sets, runs them pinned,
/// in a clean environment and with timeouts, and measures every run.
#[derive(Parser)]
#[command(name = "kiln-worker", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Speak kiln's protocol on stdin/stdout (logs go to stderr; KILN_LOG sets the level).
    ///
    /// Steps run concurrently, one per slot, each in DIR/slots/<slot>/ and on
    /// the CPUs its request names. Bundles are cached in DIR/bundles/<hash>/.
    Serve {
        /// The worker's folder (created if missing).
        #[arg(long)]
        rundir: PathBuf,
        /// Largest accepted frame in bytes; larger ones are answered with an error and skipped.
        #[arg(long, default_value_t = MAX_FRAME)]
        max_frame: usize,
        /// A compiler whose version hello reports (repeatable; default: clang and rustc).
        #[arg(long = "compiler")]
        compilers: Vec<String>,
    },
    /// Print what this machine is and can measure (CPU, counters, valgrind, compilers).
    Probe {
        /// A compiler to report the version of (repeatable; default: clang and rustc).
        #[arg(long = "compiler")]
        compilers: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Measure one command by hand with the engine steps use, and print a summary.
    ///
    /// The command runs in the current folder with a clean environment
    /// (PATH=/usr/local/bin:/usr/bin:/bin, HOME=the current folder, LANG=C,
    /// plus --env), stdin from /dev/null. Without --runs, runs repeat from
    /// --min until the median's 95 % CI half-width is within --target-rel-ci,
    /// --max runs, or --max-time seconds.
    Measure(MeasureArgs),
    /// Print the worker's version.
    Version,
}

/// `measure`'s flags and command.
#[derive(Args)]
struct MeasureArgs {
    /// Exactly this many measured runs (sets --min and --max).
    #[arg(long, conflicts_with_all = ["min", "max"])]
    runs: Option<u32>,
    /// Warm-up runs first (shown, not summarised).
    #[arg(long, default_value_t = RunPolicy::default().warmup)]
    warmup: u32,
    /// Fewest measured runs.
    #[arg(long)]
    min: Option<u32>,
    /// Most measured runs.
    #[arg(long)]
    max: Option<u32>,
    /// Target relative half-width of the median's 95 % CI.
    #[arg(long, default_value_t = RunPolicy::default().target_rel_ci)]
    target_rel_ci: f64,
    /// Stop adding runs after this many seconds.
    #[arg(long, default_value_t = RunPolicy::default().max_time_s)]
    max_time: f64,
    /// The metric the adaptive repetition watches.
    #[arg(long, default_value = "wall-time")]
    objective: Metric,
    /// An extra metric (repeatable): `instructions` adds a callgrind run,
    /// cpu-percent-avg/cpu-percent-peak/rss-avg turn on sampling, gpu-time and the
    /// other CUPTI metrics trace CUDA (libkiln_cupti.so beside kiln-worker), energy and
    /// the other NVML metrics sample the GPUs.
    #[arg(long = "metric")]
    metrics: Vec<Metric>,
    /// Timeout of one run in seconds (the process group is killed).
    #[arg(long, default_value = "60", value_parser = parse_seconds)]
    timeout: Duration,
    /// CPUs to pin to, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<u32>,
    /// Limit the runs to this many CPUs' worth of time, e.g. 1.5 (cgroup cpu quota).
    #[arg(long, value_parser = parse_cpu_limit)]
    limit_cpus: Option<f64>,
    /// Limit the runs' memory, e.g. 512m or 2g (cgroup memory limit, no swap).
    #[arg(long, value_parser = parse_memory_limit)]
    limit_memory: Option<u64>,
    /// Extra environment variable NAME=VALUE (repeatable).
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Fail unless every run's stdout has this digest (blake3, hex, as printed after a run).
    #[arg(long, value_parser = parse_hash)]
    expect_output: Option<ContentHash>,
    /// Print the runs and summaries as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_cpu_limit(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "expected a number of CPUs above 0, like 1.5; found '{s}'"
        )),
    }
}

fn parse_memory_limit(s: &str) -> Result<u64, String> {
    kiln_protocol::decode::parse_byte_size(s)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("expected a size like 536870912, 512m or 2g; found '{s}'"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, found '{s}'"))
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|v| Duration::try_from_secs_f64(v).ok())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expected a positive number of seconds, found '{s}'"))
}

fn parse_hash(s: &str) -> Result<ContentHash, String> {
    ContentHash::try_from(s.to_string())
}

fn main() -> ExitCode {
    // Started as `clang`, `cc`, … from a build's wrapper folder: be that compiler.
    kiln_worker::build::wrap::run_if_wrapped();
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Cmd::Serve {
            rundir,
            max_frame,
            compilers,
        } => run_serve(rundir, max_frame, compilers),
        Cmd::Probe { compilers, json } => run_probe(compilers, json),
        Cmd::Measure(args) => run_measure(args),
        Cmd::Version => {
            println!("kiln-worker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}

/// The log to stderr, at KILN_LOG's level (info by default).
fn init_logging() {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let log = tracing_subscriber::fmt()
        .with_writer(|| LossyStderr)
        .with_ansi(terminal)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KILN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        );
    // Off a terminal, stderr goes to the controller, whose log stamps each line it forwards.
    if terminal {
        log.init();
    } else {
        log.without_time().init();
    }
}

/// `serve`: the protocol on stdin and stdout until the controller hangs up.
fn run_serve(rundir: PathBuf, max_frame: usize, compilers: Vec<String>) -> ExitCode {
    let opts = serve::ServeOptions {
        rundir,
        max_frame,
        compilers: or_default_compilers(compilers),
    };
    match serve::serve(&opts, std::io::stdin().lock(), std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `probe`: the machine's capabilities, as JSON or a table.
fn run_probe(compilers: Vec<String>, json: bool) -> ExitCode {
    let caps = probe::capabilities(&or_default_compilers(compilers));
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&caps).expect("capabilities serialize")
        );
    } else {
        print!("{}", probe::table(&caps));
    }
    ExitCode::SUCCESS
}

/// `measure`: one command measured in the current folder, its summary printed; fails
/// unless the measurement did.
fn run_measure(args: MeasureArgs) -> ExitCode {
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kiln-worker: cannot read the current folder: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plan = measure_plan(&args, cwd);
    let m = measure::measure(&plan, None);
    let _ = std::fs::remove_file(&plan.callgrind_out);
    let _ = std::fs::remove_dir_all(&plan.gpu_trace_dir);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&m).expect("measurements serialize")
        );
    } else {
        print!(
            "{}",
            report::table(
                &args.command.join(" "),
                &m,
                args.objective,
                args.target_rel_ci
            )
        );
    }
    if m.outcome == StepOutcome::Ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The plan `measure`'s flags ask for, run in `cwd`; callgrind's profile and the GPU
/// traces go to temporary files named after this process.
fn measure_plan(args: &MeasureArgs, cwd: PathBuf) -> Plan {
    let defaults = RunPolicy::default();
    let (min, max) = match args.runs {
        Some(n) => (n, n),
        None => {
            let min = args.min.unwrap_or(defaults.min);
            (min, args.max.unwrap_or(defaults.max).max(min))
        }
    };
    let temp = |suffix: &str| {
        std::env::temp_dir().join(format!("kiln-measure-{}.{suffix}", std::process::id()))
    };
    Plan {
        argv: args.command.clone(),
        env: launch::clean_env(&cwd, &args.env),
        cwd,
        cpus: args.cpus.clone(),
        timeout: args.timeout,
        policy: RunPolicy {
            warmup: args.warmup,
            min,
            max,
            target_rel_ci: args.target_rel_ci,
            max_time_s: args.max_time,
        },
        objective: args.objective,
        race: None,
        extra: args.metrics.clone(),
        output: OutputSpec::Stdout(LineFilter::All),
        expected_output: args.expect_output,
        callgrind_out: temp("callgrind"),
        function_costs: false,
        gpu_trace_dir: temp("gpu-trace"),
        limits: Limits {
            cpus: args.limit_cpus,
            memory_bytes: args.limit_memory,
        },
        container: None,
    }
}

fn or_default_compilers(named: Vec<String>) -> Vec<String> {
    if named.is_empty() {
        probe::DEFAULT_COMPILERS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        named
    }
}

/// stderr for the log, ignoring write errors. A local worker's stderr is a pipe to its
/// controller; once the controller is gone (SIGKILL), tracing's fallback for a failed write
/// would panic and end the worker before it cancels its steps and ends what they started.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
