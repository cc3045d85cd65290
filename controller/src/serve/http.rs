//! The HTTP the live view speaks: one `GET` a connection, its head read
//! within bounds (parsed by `httparse`), the answer written whole, the
//! connection closed. A client can make the server hold at most
//! [`MAX_HEAD`] bytes of its request, whatever it sends.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The longest request line answered; a longer one gets 414.
pub const MAX_REQUEST_LINE: usize = 8 * 1024;

/// The longest request head (request line and headers) answered; a longer one gets 431.
pub const MAX_HEAD: usize = 32 * 1024;

/// The most headers a request may have (431 past it).
const MAX_HEADERS: usize = 64;

/// How long a client may take to send its head, or to read the answer.
const PATIENCE: Duration = Duration::from_secs(10);

/// After an answer, how long and how much of what the client still sends is
/// read and dropped: closing with bytes unread would reset the connection,
/// and the reset can reach a client before it has read the answer.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;

/// An answer: status, headers beyond those every answer has, body.
pub struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Response {
    /// An answer of content type `kind`.
    pub fn new(status: u16, kind: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", kind.to_string())],
            body,
        }
    }

    /// A plain-text answer.
    pub fn text(status: u16, body: &str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", body.into())
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Response {
        self.headers.push((name, value.to_string()));
        self
    }

    fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        // Every answer is of the store as it is now, and the last on its connection.
        head.push_str(&format!(
            "Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        out.write_all(head.as_bytes())?;
        out.write_all(&self.body)?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

/// Answers the one request of a connection with `answer(path)`; a request
/// the server does not take is refused. Never echoes the request.
pub fn serve(mut stream: TcpStream, answer: impl FnOnce(&str) -> Response) {
    let _ = stream.set_read_timeout(Some(PATIENCE));
    let _ = stream.set_write_timeout(Some(PATIENCE));
    let response = match read_request(&mut stream) {
        Ok(Ok(path)) => answer(&path),
        Ok(Err(refused)) => refused,
        // The client went away, or stalled: no one to answer.
        Err(_) => return,
    };
    if response.write_to(&mut stream).is_ok() {
        linger(stream);
    }
}

/// Reads a request's head, at most [`MAX_HEAD`] bytes of it: the path a
/// `GET` asks for, or the answer that refuses the request.
fn read_request(stream: &mut impl Read) -> std::io::Result<Result<String, Response>> {
    let mut head = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&chunk[..n]);
        let line = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
        if line > MAX_REQUEST_LINE {
            return Ok(Err(Response::text(414, "request line too long")));
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        return Ok(match request.parse(&head) {
            Ok(httparse::Status::Complete(_)) => match (request.method, request.path) {
                (Some("GET"), Some(path)) => Ok(path.split('?').next().unwrap_or("/").into()),
                _ => Err(Response::text(405, "only GET is served").with_header("Allow", "GET")),
            },
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                Err(Response::text(431, "request headers too large"))
            }
            Err(_) => Err(Response::text(400, "not an HTTP request")),
        });
    }
}

/// Closes the connection once the client has had the answer (see [`LINGER`]).
fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut dropped = 0;
    let mut chunk = [0u8; 8192];
    while dropped < LINGER_BYTES && Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => dropped += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(request: &[u8]) -> Result<String, u16> {
        read_request(&mut &request[..])
            .expect("a whole head")
            .map_err(|r| r.status)
    }

    #[test]
    fn heads_are_read_within_bounds() {
        assert_eq!(
            status_of(b"GET /api/status?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Ok("/api/status".into())
        );
        assert_eq!(status_of(b"POST / HTTP/1.1\r\n\r\n"), Err(405));
        assert_eq!(status_of(b"\x16\x03\x01 hello\r\n\r\n"), Err(400));
        let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_REQUEST_LINE));
        assert_eq!(status_of(long_line.as_bytes()), Err(414));
        let big_header = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(status_of(big_header.as_bytes()), Err(431));
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "X: 1\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(status_of(many.as_bytes()), Err(431));
    }
}
