//! The stdio transport: LSP base-protocol frames in, [`Message`]s out, and back.
//!
//! lsp-server's own stdio transport ends the server on the first malformed frame and
//! allocates whatever Content-Length says (100 GB aborts the process). This one follows
//! JSON-RPC 2.0 instead: a body that is not JSON (or not UTF-8, or nested past serde_json's
//! limit) is answered with −32700 Parse error, a JSON value that is no request,
//! notification or response with −32600 Invalid Request (with its id when the id is a
//! number or a string, else null), and the server keeps serving. A header block that
//! makes no sense is answered with −32700 and skipped up to the next `Content-Length:`.
//! A frame over [`MAX_MESSAGE`] is refused and its body discarded as it streams past, so
//! memory stays bounded. Frames go through a [`Connection`] pair, so the server's loop is
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
            let mut input = input;
            loop {
                match read_frame(&mut input) {
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

/// Reads one line of a header block (without `\r\n`), at most [`MAX_HEADER_LINE`] bytes.
fn header_line(input: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = input
        .by_ref()
        .take(MAX_HEADER_LINE as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > MAX_HEADER_LINE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "header line too long",
        ));
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// Skips input up to (and through) the next blank line, bounded by the stream.
fn skip_to_blank_line(input: &mut impl BufRead) {
    while let Ok(Some(line)) = header_line(input) {
        if line.is_empty() {
            break;
        }
    }
}

/// Discards `n` bytes as they stream past; false at end of input.
fn discard(input: &mut impl BufRead, n: usize) -> bool {
    io::copy(&mut input.by_ref().take(n as u64), &mut io::sink()).is_ok_and(|c| c as usize == n)
}

/// Reads the next frame: a message, the error reply for a malformed one, or the end.
pub fn read_frame(input: &mut impl BufRead) -> Frame {
    let mut length: Option<usize> = None;
    let mut bad_header: Option<String> = None;
    let mut lines = 0;
    loop {
        let line = match header_line(input) {
            Ok(Some(l)) => l,
            Ok(None) => return Frame::Eof,
            Err(e) => {
                skip_to_blank_line(input);
                return error(null_id(), ErrorCode::ParseError, format!("bad header: {e}"));
            }
        };
        if line.is_empty() {
            if lines == 0 {
                continue; // stray blank lines between frames
            }
            break;
        }
        lines += 1;
        if lines > MAX_HEADER_LINES {
            skip_to_blank_line(input);
            return error(null_id(), ErrorCode::ParseError, "too many header lines");
        }
        match line.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) => length = Some(n),
                    Err(_) => {
                        bad_header = Some(format!(
                            "Content-Length `{}` is not a byte count",
                            value.trim()
                        ))
                    }
                }
            }
            Some(_) => {} // Content-Type and other headers are ignored
            None => {
                bad_header = Some(format!(
                    "header line `{}` has no `:`",
                    line.chars().take(80).collect::<String>()
                ))
            }
        }
    }
    if let Some(why) = bad_header {
        return error(null_id(), ErrorCode::ParseError, why);
    }
    let Some(length) = length else {
        return error(
            null_id(),
            ErrorCode::ParseError,
            "a frame without Content-Length",
        );
    };
    if length > MAX_MESSAGE {
        if !discard(input, length) {
            return Frame::Eof;
        }
        return error(
            null_id(),
            ErrorCode::InvalidRequest,
            format!("a message of {length} bytes; dic lsp accepts at most {MAX_MESSAGE}"),
        );
    }
    let mut body = vec![0u8; length];
    if input.read_exact(&mut body).is_err() {
        return Frame::Eof;
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(null_id(), ErrorCode::ParseError, format!("not JSON: {e}")),
    };
    // The id is echoed when it is one JSON-RPC allows (a number or a string).
    let id = match value.get("id") {
        Some(v @ (Value::Number(_) | Value::String(_))) => Some(v.clone()),
        _ => None,
    };
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
        let mut r = io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut r) {
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
        input.extend(b"Content-Length: banana\r\n\r\n");
        input.extend(b"no colon here\r\n\r\n");
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
}
