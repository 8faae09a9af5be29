//! The links of `text/html` answers through the `proxy` subresources put back under the
//! proxy's prefix, as kube-apiserver's proxy transport rewrites them
//! (apimachinery `pkg/util/proxy/transport.go`, `rewriteHTML` over `atomsToAttrs`).
//!
//! ## Guarantees
//! - The attributes kube rewrites (`a[href]`, `img[src]`, `form[action]`, `link[href]`,
//!   `script[src]` and the rest of `atomsToAttrs`) are rewritten with the rule of a redirect's
//!   `Location` ([`super::resource_proxy`]): a path, or a URL of the backend's host or the
//!   client's, is put under the prefix; a relative link, or one to another host, is kept.
//! - Streamed: each piece of the backend's answer is rewritten as it arrives (`lol_html`, a
//!   streaming rewriter), never the whole document at once; its parser holds at most
//!   [`PARSER_MEMORY_MAX`] bytes of a tag split across pieces, past which the answer ends
//!   (the connection is closed mid-answer).
//! - A `gzip` or `deflate` answer is decoded, rewritten and encoded again, as kube does; an
//!   answer in another encoding passes unchanged (kube logs it and does the same).
//!   `Content-Length` is removed (the length changes).
//!
//! ## Differences from kube-apiserver
//! - kube re-serializes every tag it tokenizes (attribute quoting normalized); here only the
//!   rewritten attributes change, the rest of the document passes byte for byte.

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::{DeflateDecoder, DeflateEncoder, GzDecoder, GzEncoder};
use lol_html::send::{HtmlRewriter, Settings};
use lol_html::{MemorySettings, OutputSink, element};

/// The most memory the HTML parser of one answer holds (a tag split across the answer's
/// pieces is buffered until it is whole).
pub const PARSER_MEMORY_MAX: usize = 1024 * 1024;

/// kube's `atomsToAttrs`: the attributes holding URLs, by element.
const URL_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("a", &["href"]),
    ("applet", &["codebase"]),
    ("area", &["href"]),
    ("audio", &["src"]),
    ("base", &["href"]),
    ("blockquote", &["cite"]),
    ("body", &["background"]),
    ("button", &["formaction"]),
    ("command", &["icon"]),
    ("del", &["cite"]),
    ("embed", &["src"]),
    ("form", &["action"]),
    ("frame", &["longdesc", "src"]),
    ("head", &["profile"]),
    ("html", &["manifest"]),
    ("iframe", &["longdesc", "src"]),
    ("img", &["longdesc", "src", "usemap"]),
    ("input", &["src", "usemap", "formaction"]),
    ("ins", &["cite"]),
    ("link", &["href"]),
    ("object", &["classid", "codebase", "data", "usemap"]),
    ("q", &["cite"]),
    ("script", &["src"]),
    ("source", &["src"]),
    ("video", &["poster", "src"]),
];

/// How an answer's body is encoded, when it can be rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// No `Content-Encoding`.
    Identity,
    /// `gzip`.
    Gzip,
    /// `deflate` (raw DEFLATE, as Go's `compress/flate` that kube reads it with).
    Deflate,
}

impl Encoding {
    /// The encoding of a `Content-Encoding` value, `None` for one kube does not rewrite.
    #[must_use]
    pub fn of(content_encoding: Option<&str>) -> Option<Encoding> {
        match content_encoding.map(str::trim) {
            None | Some("") => Some(Encoding::Identity),
            Some("gzip") => Some(Encoding::Gzip),
            Some("deflate") => Some(Encoding::Deflate),
            Some(_) => None,
        }
    }
}

/// Whether a `Content-Type` is kube's `text/html` (its media type, parameters aside).
#[must_use]
pub fn is_html(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim() == "text/html")
}

/// Where the rewritten bytes go: encoded again as the answer was, into a buffer the body
/// drains after each piece.
enum Encoder {
    Identity(Vec<u8>),
    Gzip(GzEncoder<Vec<u8>>),
    Deflate(DeflateEncoder<Vec<u8>>),
}

impl Encoder {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Identity(out) => {
                out.extend_from_slice(bytes);
                Ok(())
            }
            Encoder::Gzip(encoder) => encoder.write_all(bytes),
            Encoder::Deflate(encoder) => encoder.write_all(bytes),
        }
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(match self {
            Encoder::Identity(out) => out,
            Encoder::Gzip(encoder) => encoder.get_mut(),
            Encoder::Deflate(encoder) => encoder.get_mut(),
        })
    }

    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Encoder::Identity(_) => Ok(()),
            Encoder::Gzip(encoder) => encoder.try_finish(),
            Encoder::Deflate(encoder) => encoder.try_finish(),
        }
    }
}

/// The rewriter's output, into the shared encoder.
struct Sink {
    encoder: Arc<Mutex<Encoder>>,
    failed: Arc<Mutex<Option<std::io::Error>>>,
}

impl OutputSink for Sink {
    fn handle_chunk(&mut self, chunk: &[u8]) {
        let mut encoder = self
            .encoder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(error) = encoder.write_all(chunk) {
            *self
                .failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error);
        }
    }
}

/// The decoded bytes, into the rewriter.
struct Feed(Option<HtmlRewriter<'static, Sink>>);

impl Write for Feed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(rewriter) = &mut self.0 {
            rewriter.write(buf).map_err(std::io::Error::other)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

enum Decoder {
    Identity(Feed),
    Gzip(GzDecoder<Feed>),
    Deflate(DeflateDecoder<Feed>),
}

/// One answer's rewriting, fed piece by piece.
pub struct Rewrite {
    decoder: Decoder,
    encoder: Arc<Mutex<Encoder>>,
    failed: Arc<Mutex<Option<std::io::Error>>>,
}

impl Rewrite {
    /// A rewriting of an answer in `encoding`, each link put through `rewrite`.
    pub fn new(
        encoding: Encoding,
        rewrite: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> Rewrite {
        let rewrite = Arc::new(rewrite);
        let mut settings = Settings::new_send().with_memory_settings(
            MemorySettings::new().with_max_allowed_memory_usage(PARSER_MEMORY_MAX),
        );
        for (tag, attributes) in URL_ATTRIBUTES {
            for attribute in *attributes {
                let rewrite = rewrite.clone();
                settings = settings.append_element_content_handler(element!(
                    format!("{tag}[{attribute}]"),
                    move |el| {
                        if let Some(value) = el.get_attribute(attribute) {
                            let rewritten = rewrite(&value);
                            if rewritten != value {
                                el.set_attribute(attribute, &rewritten)?;
                            }
                        }
                        Ok(())
                    }
                ));
            }
        }
        let encoder = Arc::new(Mutex::new(match encoding {
            Encoding::Identity => Encoder::Identity(Vec::new()),
            Encoding::Gzip => Encoder::Gzip(GzEncoder::new(Vec::new(), Compression::default())),
            Encoding::Deflate => {
                Encoder::Deflate(DeflateEncoder::new(Vec::new(), Compression::best()))
            }
        }));
        let failed = Arc::new(Mutex::new(None));
        let sink = Sink {
            encoder: encoder.clone(),
            failed: failed.clone(),
        };
        let feed = Feed(Some(HtmlRewriter::new(settings, sink)));
        let decoder = match encoding {
            Encoding::Identity => Decoder::Identity(feed),
            Encoding::Gzip => Decoder::Gzip(GzDecoder::new(feed)),
            Encoding::Deflate => Decoder::Deflate(DeflateDecoder::new(feed)),
        };
        Rewrite {
            decoder,
            encoder,
            failed,
        }
    }

    fn output(&self) -> std::io::Result<Bytes> {
        if let Some(error) = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            return Err(error);
        }
        Ok(Bytes::from(
            self.encoder
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        ))
    }

    /// The rewritten bytes of the next piece of the answer (maybe none yet).
    ///
    /// # Errors
    /// The piece cannot be decoded, or the parser's memory bound is passed.
    pub fn push(&mut self, piece: &[u8]) -> std::io::Result<Bytes> {
        match &mut self.decoder {
            Decoder::Identity(feed) => feed.write_all(piece)?,
            Decoder::Gzip(decoder) => decoder.write_all(piece)?,
            Decoder::Deflate(decoder) => decoder.write_all(piece)?,
        }
        self.output()
    }

    /// The rest of the rewritten answer, once the backend's is finished.
    ///
    /// # Errors
    /// As [`Rewrite::push`].
    pub fn finish(&mut self) -> std::io::Result<Bytes> {
        let feed = match &mut self.decoder {
            Decoder::Identity(feed) => feed,
            Decoder::Gzip(decoder) => {
                decoder.try_finish()?;
                decoder.get_mut()
            }
            Decoder::Deflate(decoder) => {
                decoder.try_finish()?;
                decoder.get_mut()
            }
        };
        if let Some(rewriter) = feed.0.take() {
            rewriter.end().map_err(std::io::Error::other)?;
        }
        self.encoder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .finish()?;
        self.output()
    }
}

/// A body being rewritten.
struct State<B> {
    body: B,
    rewrite: Rewrite,
    done: bool,
}

/// `body` with its HTML rewritten piece by piece (see the module docs).
pub fn rewritten<B>(body: B, rewrite: Rewrite) -> axum::body::Body
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt;
    let state = State {
        body,
        rewrite,
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        loop {
            let next = match state.body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => state.rewrite.push(&data),
                    // Trailers: nothing to rewrite.
                    Err(_) => continue,
                },
                Some(Err(error)) => Err(std::io::Error::other(error.to_string())),
                None => {
                    state.done = true;
                    state.rewrite.finish()
                }
            };
            match next {
                Ok(out) if out.is_empty() && !state.done => {}
                Ok(out) => return Some((Ok(out), state)),
                Err(error) => {
                    state.done = true;
                    return Some((Err(error), state));
                }
            }
        }
    });
    axum::body::Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn under_prefix(link: &str) -> String {
        if link.starts_with('/') {
            format!("/prefix{link}")
        } else {
            link.to_owned()
        }
    }

    fn rewrite_all(encoding: Encoding, pieces: &[&[u8]]) -> Vec<u8> {
        let mut rewrite = Rewrite::new(encoding, under_prefix);
        let mut out = Vec::new();
        for piece in pieces {
            out.extend_from_slice(&rewrite.push(piece).unwrap());
        }
        out.extend_from_slice(&rewrite.finish().unwrap());
        out
    }

    #[test]
    fn links_are_rewritten_across_pieces() {
        let html = br#"<html><body><a href="/a/b">x</a><img src="rel.png"><form action="/post"></form><p title="/keep">t</p></body></html>"#;
        let (first, second) = html.split_at(20);
        let out = rewrite_all(Encoding::Identity, &[first, second]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"<html><body><a href="/prefix/a/b">x</a><img src="rel.png"><form action="/prefix/post"></form><p title="/keep">t</p></body></html>"#
        );
    }

    #[test]
    fn compressed_answers_are_decoded_and_encoded_again() {
        let html = br#"<a href="/z">z</a>"#;
        let mut gzip = GzEncoder::new(Vec::new(), Compression::default());
        gzip.write_all(html).unwrap();
        let gzipped = gzip.finish().unwrap();
        let out = rewrite_all(Encoding::Gzip, &[&gzipped[..5], &gzipped[5..]]);
        let mut decoded = GzDecoder::new(Vec::new());
        decoded.write_all(&out).unwrap();
        assert_eq!(
            String::from_utf8(decoded.finish().unwrap()).unwrap(),
            r#"<a href="/prefix/z">z</a>"#
        );
    }

    #[test]
    fn a_tag_past_the_parser_bound_ends_the_answer() {
        let mut rewrite = Rewrite::new(Encoding::Identity, under_prefix);
        rewrite.push(b"<a href=\"/").unwrap();
        let filler = vec![b'x'; 64 * 1024];
        let refused = (0..(2 * PARSER_MEMORY_MAX / filler.len()))
            .map(|_| rewrite.push(&filler))
            .any(|result| result.is_err());
        assert!(refused, "a tag of 2 MiB was buffered");
    }

    #[test]
    fn media_types_and_encodings() {
        assert!(is_html(Some("text/html; charset=utf-8")));
        assert!(!is_html(Some("text/plain")));
        assert!(!is_html(None));
        assert_eq!(Encoding::of(None), Some(Encoding::Identity));
        assert_eq!(Encoding::of(Some("br")), None);
    }
}
