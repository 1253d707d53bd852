//! The stdio transport: LSP base-protocol frames in, [`Message`]s out, and back.
//!
//! lsp-server's own stdio transport ends the server on the first malformed frame and
//! allocates whatever Content-Length says (100 GB aborts the process). This one follows
//! JSON-RPC 2.0 instead: a body that is not JSON (or not UTF-8, or nested past serde_json's
//! limit) is answered with −32700 Parse error, a JSON value that is no request,
//! notification or response with −32600 Invalid Request (with its id when the id is a
//! number or a string, else null), and the server keeps serving. The reader keeps in step
//! with the client whatever it sends ([`FrameReader`]): a header block that makes no
//! sense (no Content-Length, two of them, one that is no byte count, a control character
//! or a line without `:`) is answered with −32700 and reading goes on at the next
//! `Content-Length:`; bytes before a header are reported and skipped; a body whose JSON
//! value ends before its Content-Length does, where the next `Content-Length:` begins, is
//! answered with −32700 (and its id) and the next frame read from there. A frame over
//! [`MAX_MESSAGE`] is refused and its body discarded as it streams past, so memory stays
//! bounded. Frames go through a [`Connection`] pair, so the server's loop is
//! the same one the in-memory tests drive.

use lsp_server::{Connection, ErrorCode, Message};
use serde_json::{json, Value};
use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The largest frame body accepted: a document at the CLI's 8 MiB file limit, escaped.
pub const MAX_MESSAGE: usize = 32 << 20;
/// The longest header line, and the most header lines in one frame.
const MAX_HEADER_LINE: usize = 8 << 10;
const MAX_HEADER_LINES: usize = 32;

/// The server's end of a transport over `input`/`output`, and the threads that pump it
/// (joined after the server drops its [`Connection`]).
pub fn spawn(
    input: impl BufRead + Send + 'static,
    output: impl Write + Send + 'static,
) -> (Connection, TransportThreads) {
    let (server, client) = Connection::memory();
    let out = Arc::new(Mutex::new(output));
    let reader_out = Arc::clone(&out);
    let to_server = client.sender;
    let reader = std::thread::Builder::new()
        .name("dic-lsp-read".into())
        .spawn(move || {
            let mut input = FrameReader::new(input);
            loop {
                match input.read_frame() {
                    Frame::Eof => break,
                    Frame::Message(m) => {
                        let exit = matches!(&m, Message::Notification(n) if n.method == "exit");
                        if to_server.send(m).is_err() || exit {
                            break;
                        }
                    }
                    Frame::Error { id, code, message } => {
                        let reply = json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "error": { "code": code, "message": message },
                        });
                        if write_text(&reader_out, &reply.to_string()).is_err() {
                            break;
                        }
                    }
                }
            }
            // Dropping `to_server` tells the server the client is gone.
        })
        .expect("spawn the LSP reader thread");
    let from_server = client.receiver;
    let writer = std::thread::Builder::new()
        .name("dic-lsp-write".into())
        .spawn(move || {
            for m in from_server {
                if write_message(&out, &m).is_err() {
                    break;
                }
            }
        })
        .expect("spawn the LSP writer thread");
    (server, TransportThreads { reader, writer })
}

/// The transport's threads.
pub struct TransportThreads {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl TransportThreads {
    /// Waits for the writer to flush what the server sent. The reader may be blocked on
    /// input that never comes; it ends with the process.
    pub fn join(self) {
        let _ = self.writer.join();
        drop(self.reader);
    }
}

fn write_message(out: &Mutex<impl Write>, m: &Message) -> io::Result<()> {
    let mut out = out.lock().map_err(|_| io::Error::other("poisoned"))?;
    m.write(&mut *out)
}

fn write_text(out: &Mutex<impl Write>, text: &str) -> io::Result<()> {
    let mut out = out.lock().map_err(|_| io::Error::other("poisoned"))?;
    write!(out, "Content-Length: {}\r\n\r\n{text}", text.len())?;
    out.flush()
}

/// What one frame turned out to be.
#[derive(Debug)]
pub enum Frame {
    Message(Message),
    /// The JSON-RPC error reply to send for a malformed frame (`id` null when unknown).
    Error {
        id: Value,
        code: i32,
        message: String,
    },
    Eof,
}

fn error(id: Value, code: ErrorCode, message: impl Into<String>) -> Frame {
    Frame::Error {
        id,
        code: code as i32,
        message: message.into(),
    }
}

/// JSON-RPC's id for a reply to a message whose id cannot be read.
fn null_id() -> Value {
    Value::Null
}

/// The header that starts every frame, lower-cased: where reading picks up again after a
/// frame that makes no sense.
const CONTENT_LENGTH: &[u8] = b"content-length:";

/// Where `Content-Length:` (any case) starts in `bytes`.
fn find_content_length(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(CONTENT_LENGTH.len())
        .position(|w| w.eq_ignore_ascii_case(CONTENT_LENGTH))
}

/// Matches `Content-Length:` one byte at a time, so a search never holds more than the
/// byte in hand. No proper prefix of it ends in its first letter, so a mismatch restarts.
#[derive(Default)]
struct ContentLengthMatch {
    matched: usize,
}

impl ContentLengthMatch {
    /// Feeds one byte; true when it completes `Content-Length:`.
    fn feed(&mut self, b: u8) -> bool {
        let b = b.to_ascii_lowercase();
        if b == CONTENT_LENGTH[self.matched] {
            self.matched += 1;
        } else {
            self.matched = usize::from(b == CONTENT_LENGTH[0]);
        }
        if self.matched == CONTENT_LENGTH.len() {
            self.matched = 0;
            return true;
        }
        false
    }
}

/// Follows a body byte by byte to the end of its top-level JSON object or array (strings
/// and escapes skipped), and then watches for a `Content-Length:` right after it: the next
/// frame, when the body's Content-Length counted past its own message.
#[derive(Default)]
struct BodyEnd {
    depth: usize,
    started: bool,
    in_string: bool,
    escaped: bool,
    /// The body's length up to the end of its JSON value, once it ended.
    value_end: Option<usize>,
    next_header: ContentLengthMatch,
    /// Gave up: the body is no object or array, or something other than a header follows.
    stopped: bool,
}

impl BodyEnd {
    /// Feeds `buf`, bytes `start..` of the body; where in it a `Content-Length:` after the
    /// JSON value completes. Inside strings it skips to the next quote or backslash.
    fn scan(&mut self, start: usize, buf: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < buf.len() && !self.stopped {
            if self.in_string && !self.escaped {
                i += buf[i..].iter().position(|&b| b == b'"' || b == b'\\')?;
            }
            if self.feed(start + i, buf[i]) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// Feeds byte `i` of the body; true when it completes a `Content-Length:` that follows
    /// the body's JSON value (with only whitespace between).
    fn feed(&mut self, i: usize, b: u8) -> bool {
        if self.stopped {
            return false;
        }
        if self.value_end.is_some() {
            if self.next_header.matched == 0 && b.is_ascii_whitespace() {
                return false;
            }
            let before = self.next_header.matched;
            let done = self.next_header.feed(b);
            if !done && self.next_header.matched != before + 1 {
                self.stopped = true;
            }
            return done;
        }
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return false;
        }
        match b {
            b'"' if self.started => self.in_string = true,
            b'{' | b'[' => {
                self.started = true;
                self.depth += 1;
            }
            b'}' | b']' if self.started => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.value_end = Some(i + 1);
                }
            }
            b if b.is_ascii_whitespace() => {}
            _ if self.started => {}
            _ => self.stopped = true,
        }
        false
    }
}

/// Reads frames from `input` and keeps in step with the sender: after a header block that
/// makes no sense it skips to the next `Content-Length:`, and a body whose JSON value ends
/// before its Content-Length, right where a `Content-Length:` begins, ends there.
pub struct FrameReader<R> {
    input: R,
    /// Bytes read ahead and handed back (the `Content-Length:` that reading stopped at),
    /// served before `input`; `given_back_at` of them are used.
    given_back: Vec<u8>,
    given_back_at: usize,
    /// The last frame's header block made no sense: skip to the next `Content-Length:`
    /// before reading on (after its error reply went out, so a client that waits for the
    /// reply before sending more is not kept waiting).
    skip_to_next_frame: bool,
}

impl<R: BufRead> Read for FrameReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for FrameReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.given_back_at < self.given_back.len() {
            return Ok(&self.given_back[self.given_back_at..]);
        }
        self.input.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        if self.given_back_at < self.given_back.len() {
            self.given_back_at = (self.given_back_at + amount).min(self.given_back.len());
        } else {
            self.input.consume(amount);
        }
    }
}

impl<R: BufRead> FrameReader<R> {
    pub fn new(input: R) -> Self {
        FrameReader {
            input,
            given_back: Vec::new(),
            given_back_at: 0,
            skip_to_next_frame: false,
        }
    }

    /// Puts `bytes` back in front of what is still to be read.
    fn give_back(&mut self, bytes: &[u8]) {
        let mut rest = bytes.to_vec();
        rest.extend_from_slice(&self.given_back[self.given_back_at..]);
        self.given_back = rest;
        self.given_back_at = 0;
    }

    /// Reads one header line with its line ending, at most [`MAX_HEADER_LINE`] + 1 bytes.
    fn header_line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        self.by_ref()
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        Ok(line)
    }

    /// Skips input up to the next `Content-Length:` and leaves it to be read (or to the end).
    fn resynchronise(&mut self) {
        let mut matcher = ContentLengthMatch::default();
        loop {
            let (used, found) = match self.fill_buf() {
                Ok([]) | Err(_) => return,
                Ok(buf) => match buf.iter().position(|&b| matcher.feed(b)) {
                    Some(i) => (i + 1, true),
                    None => (buf.len(), false),
                },
            };
            self.consume(used);
            if found {
                self.give_back(CONTENT_LENGTH);
                return;
            }
        }
    }

    /// The error reply for a header block that makes no sense; reading goes on at the
    /// next frame.
    fn bad_header(&mut self, why: String) -> Frame {
        self.skip_to_next_frame = true;
        error(null_id(), ErrorCode::ParseError, why)
    }

    /// Reads the next frame: a message, the error reply for a malformed one, or the end.
    pub fn read_frame(&mut self) -> Frame {
        if std::mem::take(&mut self.skip_to_next_frame) {
            self.resynchronise();
        }
        let mut length: Option<usize> = None;
        let mut problem: Option<String> = None;
        let mut lines = 0;
        loop {
            let raw = match self.header_line() {
                Ok(l) if l.is_empty() => return Frame::Eof,
                Ok(l) => l,
                Err(e) => return self.bad_header(format!("bad header: {e}")),
            };
            // The rest of a message its Content-Length did not cover, glued to the next
            // frame's header: report it and read on from that header.
            if let Some(at) = find_content_length(&raw).filter(|&at| at > 0) {
                self.give_back(&raw[at..]);
                return error(
                    null_id(),
                    ErrorCode::ParseError,
                    format!("{at} bytes that are no frame before a `Content-Length:` header"),
                );
            }
            if raw.len() > MAX_HEADER_LINE {
                // Keep a `Content-Length:` cut in two by the limit findable.
                let tail = raw.len().saturating_sub(CONTENT_LENGTH.len() - 1);
                self.give_back(&raw[tail..]);
                return self
                    .bad_header(format!("a header line longer than {MAX_HEADER_LINE} bytes"));
            }
            let line = raw.trim_ascii_end();
            if line.is_empty() {
                if lines == 0 {
                    continue; // stray blank lines between frames
                }
                break;
            }
            lines += 1;
            if lines > MAX_HEADER_LINES {
                return self.bad_header("too many header lines".into());
            }
            if problem.is_some() {
                continue; // read to the end of the block; the first problem is reported
            }
            let shown = || {
                String::from_utf8_lossy(line)
                    .chars()
                    .take(80)
                    .flat_map(char::escape_debug)
                    .collect::<String>()
            };
            if line.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
                problem = Some(format!("header line `{}` has a control character", shown()));
                continue;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                problem = Some(format!("header line `{}` has no `:`", shown()));
                continue;
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            if !name.trim_ascii().eq_ignore_ascii_case(b"content-length") {
                continue; // Content-Type and other headers are ignored
            }
            let count = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<usize>().ok());
            problem = match (count, length) {
                (_, Some(_)) => Some("two Content-Length headers in one frame".into()),
                (None, None) => Some(format!(
                    "Content-Length `{}` is not a byte count",
                    String::from_utf8_lossy(value).escape_debug()
                )),
                (Some(n), None) => {
                    length = Some(n);
                    None
                }
            };
        }
        if let Some(why) = problem {
            return self.bad_header(why);
        }
        let Some(length) = length else {
            return self.bad_header("a frame without Content-Length".into());
        };
        self.body(length)
    }

    /// Reads a body of `length` bytes (kept only up to [`MAX_MESSAGE`]) and decodes it.
    fn body(&mut self, length: usize) -> Frame {
        let keep = length <= MAX_MESSAGE;
        let mut body = Vec::with_capacity(if keep { length.min(1 << 20) } else { 0 });
        let mut end = BodyEnd::default();
        let mut read = 0;
        while read < length {
            let (used, next_frame) = match self.fill_buf() {
                Ok([]) | Err(_) => return Frame::Eof,
                Ok(buf) => {
                    let buf = &buf[..buf.len().min(length - read)];
                    let next = end.scan(read, buf);
                    let used = next.map_or(buf.len(), |i| i + 1);
                    if keep {
                        body.extend_from_slice(&buf[..used]);
                    }
                    (used, next.is_some())
                }
            };
            self.consume(used);
            read += used;
            if next_frame {
                self.give_back(CONTENT_LENGTH);
                return self.cut_short(length, end.value_end, &body);
            }
        }
        // The body's last bytes begin a `Content-Length:` after its JSON value: hand them
        // back (no read past the body, which could wait on a client waiting for us).
        let begun = end.next_header.matched;
        if !end.stopped && begun > 0 {
            self.give_back(&CONTENT_LENGTH[..begun]);
            return self.cut_short(length, end.value_end, &body);
        }
        if !keep {
            return error(
                null_id(),
                ErrorCode::InvalidRequest,
                format!("a message of {length} bytes; dic lsp accepts at most {MAX_MESSAGE}"),
            );
        }
        decode(&body)
    }

    /// The reply for a body whose JSON value ended `value_end` bytes in, where the next
    /// frame's `Content-Length:` follows: read on from that header, answer the message's
    /// id with the mismatch.
    fn cut_short(&mut self, length: usize, value_end: Option<usize>, body: &[u8]) -> Frame {
        let value_end = value_end.unwrap_or(0);
        let id = body
            .get(..value_end)
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .and_then(|v| echoed_id(&v));
        error(
            id.unwrap_or_else(null_id),
            ErrorCode::ParseError,
            format!(
                "Content-Length says {length} bytes, but the message ends after {value_end} and the next frame begins"
            ),
        )
    }
}

/// The id to echo in an error reply: one JSON-RPC allows (a number or a string).
fn echoed_id(v: &Value) -> Option<Value> {
    match v.get("id") {
        Some(v @ (Value::Number(_) | Value::String(_))) => Some(v.clone()),
        _ => None,
    }
}

/// A body: a message, or the JSON-RPC error reply for one that is no message.
fn decode(body: &[u8]) -> Frame {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return error(null_id(), ErrorCode::ParseError, format!("not JSON: {e}")),
    };
    let id = echoed_id(&value);
    if let Err(why) = json_rpc_shape(&value) {
        return error(id.unwrap_or_else(null_id), ErrorCode::InvalidRequest, why);
    }
    match serde_json::from_value::<Message>(value) {
        Ok(m) => Frame::Message(m),
        Err(e) => error(
            id.unwrap_or_else(null_id),
            ErrorCode::InvalidRequest,
            format!("not a JSON-RPC request, notification or response: {e}"),
        ),
    }
}

/// JSON-RPC 2.0's shapes, checked before lsp-server's lenient untagged decoding (which
/// reads `[1, 2]` as a response and drops an object id): an object; a request has a
/// string `method` and an integer or string `id`, a notification a `method` and no `id`,
/// a response an `id` and a `result` or an `error`.
fn json_rpc_shape(v: &Value) -> Result<(), String> {
    let Some(obj) = v.as_object() else {
        return Err("a JSON-RPC message is an object".into());
    };
    let id_ok = |id: &Value| match id {
        Value::Number(n) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        Value::String(_) => true,
        _ => false,
    };
    match (obj.get("method"), obj.get("id")) {
        (Some(Value::String(_)), None) => Ok(()),
        (Some(Value::String(_)), Some(id)) if id_ok(id) => Ok(()),
        (Some(Value::String(_)), Some(_)) => Err("a request's id is an integer or a string".into()),
        (Some(_), _) => Err("`method` is not a string".into()),
        (None, Some(id))
            if id_ok(id) && (obj.contains_key("result") || obj.contains_key("error")) =>
        {
            Ok(())
        }
        (None, _) => Err(
            "neither a request (no `method`) nor a response (no `id` with `result` or `error`)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut r = FrameReader::new(io::BufReader::new(input));
        let mut out = Vec::new();
        loop {
            match r.read_frame() {
                Frame::Eof => break,
                f => out.push(f),
            }
            assert!(out.len() < 100);
        }
        out
    }

    fn frame(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    fn code(f: &Frame) -> Option<i32> {
        match f {
            Frame::Error { code, .. } => Some(*code),
            _ => None,
        }
    }

    #[test]
    fn malformed_frames_get_json_rpc_errors_and_reading_goes_on() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let mut input = Vec::new();
        input.extend(frame("{not json"));
        input.extend(frame("[1, 2]"));
        input.extend(frame(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#));
        input.extend(frame(r#"{"jsonrpc":"2.0","id":7,"method":5}"#));
        input.extend(frame(&format!(
            "{}1{}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        )));
        input.extend(b"Content-Length: 3\r\n\r\n\xff\xfe\xfd");
        input.extend(b"no colon here\r\n\r\n");
        input.extend(b"Content-Length: banana\r\n\r\n");
        input.extend(frame(ok));
        let got = frames(&input);
        let codes: Vec<Option<i32>> = got.iter().map(code).collect();
        let parse = Some(ErrorCode::ParseError as i32);
        let invalid = Some(ErrorCode::InvalidRequest as i32);
        assert_eq!(
            codes,
            [parse, invalid, invalid, invalid, parse, parse, parse, parse, None],
            "{got:?}"
        );
        // the id is echoed when it is a number or a string
        match (&got[2], &got[3]) {
            (Frame::Error { id: a, .. }, Frame::Error { id: b, .. }) => {
                assert_eq!(*a, Value::Null);
                assert_eq!(*b, json!(7));
            }
            f => panic!("{f:?}"),
        }
        assert!(matches!(&got[8], Frame::Message(Message::Request(r)) if r.method == "shutdown"));
    }

    #[test]
    fn oversized_frames_are_skipped_without_allocating_them() {
        let ok = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let mut input = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1).into_bytes();
        input.extend(std::iter::repeat_n(b'x', MAX_MESSAGE + 1));
        input.extend(frame(ok));
        let got = frames(&input);
        assert_eq!(code(&got[0]), Some(ErrorCode::InvalidRequest as i32));
        assert!(matches!(&got[1], Frame::Message(Message::Notification(_))));
        // a length larger than the rest of the stream: the end, not an allocation
        let got = frames(b"Content-Length: 100000000000\r\n\r\n{}");
        assert!(got.is_empty());
    }

    #[test]
    fn endless_header_lines_are_bounded() {
        let mut input = vec![b'a'; MAX_HEADER_LINE * 3];
        input.extend(b"\r\n\r\n");
        input.extend(frame(
            r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
        ));
        let got = frames(&input);
        assert_eq!(code(&got[0]), Some(ErrorCode::ParseError as i32));
        assert!(matches!(got.last(), Some(Frame::Message(_))));
    }

    /// Each kind of bad frame, then good ones: the good ones all come through, after one
    /// or two error replies for the bad frame.
    #[test]
    fn reading_picks_up_again_at_the_next_content_length() {
        let request = |id: i64| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"shutdown"}}"#);
        let body = request(99);
        let n = body.len();
        let bad_frames = [
            format!("Content-Type: x\r\n\r\n{body}"),
            format!("Content-Length: {n}\0\r\n\r\n{body}"),
            format!("Content-Length: {n}\r\n\0\r\n\r\n{body}"),
            format!("Content-Length: {}\r\n\r\n{body}", n + 30),
            format!("Content-Length: {}\r\n\r\n{body}", n + 3),
            format!("Content-Length: {}\r\n\r\n{body}\r\n", n + 3),
            format!("Content-Length: {}\r\n\r\n{body}", n - 4),
            format!("Content-Length: +{n}\r\n\r\n{body}"),
            format!("Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n{body}"),
            format!("Content-Length: {n}\r\n{body}"),
            format!("garbage{body}"),
            format!("Content-Length: {}\r\n\r\n{body}", MAX_MESSAGE + 1),
            format!(
                "Content-Length: {n}\r\n\r\n{}",
                "x".repeat(MAX_HEADER_LINE * 2)
            ),
        ];
        for bad in bad_frames {
            let mut input = bad.clone().into_bytes();
            for id in 1..=3 {
                input.extend(frame(&request(id)));
            }
            let got = frames(&input);
            let ids: Vec<String> = got
                .iter()
                .filter_map(|f| match f {
                    Frame::Message(Message::Request(r)) => Some(r.id.to_string()),
                    _ => None,
                })
                .collect();
            assert_eq!(ids, ["1", "2", "3"], "{bad:?}: {got:?}");
            let errors = got.len() - 3;
            assert!((1..=2).contains(&errors), "{bad:?}: {got:?}");
            assert!(got[..errors].iter().all(|f| code(f).is_some()), "{got:?}");
        }
        // A length that runs past the message is answered with the message's id.
        let got = frames(
            &[
                format!("Content-Length: {}\r\n\r\n{body}", n + 30).into_bytes(),
                frame(&request(1)),
            ]
            .concat(),
        );
        assert!(
            matches!(&got[0], Frame::Error { id, .. } if *id == json!(99)),
            "{got:?}"
        );
        // `Content-Length:` inside a string of a well-framed body is just text.
        let text = r#"{"jsonrpc":"2.0","id":5,"method":"x","params":{"t":"}Content-Length: 3"}}"#;
        let got = frames(&frame(text));
        assert!(matches!(&got[..], [Frame::Message(_)]), "{got:?}");
    }
}
