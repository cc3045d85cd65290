//! A logged-in connection to a worker, through either SSH client: remote commands run to their
//! end or started with pipes, the same for deployment and `serve` whichever client it is.

use openssh::Session;
use tokio::io::AsyncWriteExt as _;

use super::builtin::Builtin;
use super::command::{Exit, Ran, Spawned};
use super::login::error_chain;
use super::*;

/// A logged-in connection.
pub(super) enum Link {
    /// OpenSSH's client: a master process and its mux sessions.
    System(Arc<Session>),
    /// kiln's own client.
    Builtin(Builtin),
}

/// Why a remote command did not run.
pub(super) enum LinkError {
    /// The worker has no such program (its shell said 127).
    Missing,
    /// The connection failed; what it said.
    Broken(String),
}

/// The exit status a POSIX shell gives a command it cannot find.
const NOT_FOUND: Exit = Exit::Code(127);

impl Link {
    /// Runs `argv` to its end, `stdin` its standard input.
    pub(super) async fn output(&self, argv: &[&str], stdin: &[u8]) -> Result<Ran, LinkError> {
        let ran = match self {
            Link::System(session) => system_output(session, argv, stdin).await?,
            Link::Builtin(client) => (client.output(argv, stdin).await)
                .map_err(|e| LinkError::Broken(error_chain(&e)))?,
        };
        match ran.exit == NOT_FOUND {
            true => Err(LinkError::Missing),
            false => Ok(ran),
        }
    }

    /// Starts `argv` with its standard streams as pipes.
    pub(super) async fn spawn(&self, argv: &[&str]) -> Result<Spawned, LinkError> {
        match self {
            Link::System(session) => system_spawn(session, argv).await.map_err(broken),
            Link::Builtin(client) => {
                (client.spawn(argv).await).map_err(|e| LinkError::Broken(error_chain(&e)))
            }
        }
    }
}

fn broken(e: openssh::Error) -> LinkError {
    match e {
        openssh::Error::Remote(e) if e.kind() == std::io::ErrorKind::NotFound => LinkError::Missing,
        e => LinkError::Broken(error_chain(&e)),
    }
}

async fn system_output(session: &Session, argv: &[&str], stdin: &[u8]) -> Result<Ran, LinkError> {
    let (program, args) = argv.split_first().expect("a command names its program");
    let mut cmd = session.command(*program);
    let input = if stdin.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    };
    cmd.args(args)
        .stdin(input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().await.map_err(broken)?;
    let wrote = match child.stdin().take() {
        Some(mut pipe) => async {
            pipe.write_all(stdin).await?;
            pipe.flush().await?;
            pipe.shutdown().await
        }
        .await
        .map_err(|e| e.to_string()),
        None => Ok(()),
    };
    let out = child.wait_with_output().await.map_err(broken)?;
    let exit = Exit::of(out.status);
    // A command that failed says why better than the pipe it closed.
    if let (Err(e), true) = (wrote, exit.success()) {
        return Err(LinkError::Broken(format!("its input broke off: {e}")));
    }
    Ok(Ran {
        exit,
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

async fn system_spawn(session: &Arc<Session>, argv: &[&str]) -> Result<Spawned, openssh::Error> {
    let (program, args) = argv.split_first().expect("a command names its program");
    let mut child = Arc::clone(session)
        .arc_command(*program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .await?;
    Ok(Spawned {
        stdin: Box::new(child.stdin().take().expect("stdin is piped")),
        stdout: Box::new(child.stdout().take().expect("stdout is piped")),
        stderr: Box::new(child.stderr().take().expect("stderr is piped")),
        keep: Box::new(child),
    })
}
