//! LIST response bodies streamed from the snapshot, as kube-apiserver's streaming collection
//! encoder (KEP-5116) writes them: `{"kind":…,"apiVersion":…,"metadata":{…},"items":[`, each
//! item's cached encoding, then `]}`; or in protobuf ([`Framing::Protobuf`]): the envelope's
//! head and the list's `ListMeta`, each item's cached message behind its field tag and length,
//! then the envelope's tail.
//!
//! ## Guarantees
//! - The body's bytes are exactly those of the one-buffer form (the head, the items' cached
//!   encodings separated by `,`, `]}`), and its length is known up front, so HTTP/1.1 answers
//!   keep `Content-Length`.
//! - A piece is produced only when the transport polls for it (hyper does so only while its
//!   write buffer is below its bound, see the connection layer), so a client that reads slowly
//!   or not at all holds the objects it shares with the cache, a pointer per item, and at most
//!   one piece of copied text (`--list-chunk-bytes` plus one item under [`SHARE_MIN_BYTES`])
//!   beyond what the transport buffers — never a second full copy of the response.
//! - An item whose cached encoding is [`SHARE_MIN_BYTES`] or more is a piece of its own: the
//!   cached bytes themselves (a reference-counted clone), not a copy. Smaller items are copied
//!   together into pieces of about `--list-chunk-bytes`.
//! - Every item is encoded (and its encoding cached in the object, shared with watches and
//!   later LISTs) before the first byte is sent, to know the length: the same serializations
//!   as before, at most one per object and encoding.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use hyper::body::{Frame, SizeHint};
use watchkeeper_api::protobuf::{ENVELOPE_TAIL, cached_object_message, list_item_head};
use watchkeeper_api::watch_frame::{SHARE_MIN_BYTES, object_metadata_message};
use watchkeeper_core::{EncodeStats, Encoding, Object};

/// How the items of a list are written.
#[derive(Clone, Copy, Debug)]
pub enum Framing {
    /// JSON items in `encoding`, separated by `,`, the list ending with `]}`.
    Json(Encoding),
    /// Protobuf items (the objects' cached messages), each behind the tag and length of the
    /// list's field 2, the body ending with the envelope's tail.
    Protobuf,
    /// Protobuf `PartialObjectMetadata` items (a `PartialObjectMetadataList`), framed as
    /// [`Framing::Protobuf`]'s: each a slice of the object's cached message, or encoded from
    /// its metadata for a custom resource ([`object_metadata_message`]).
    ProtobufMetadata,
}

impl Framing {
    /// The item's cached encoding (empty for an object without protobuf, which
    /// [`protobuf_items_len`] rules out before a protobuf body is built).
    fn item(self, object: &Object, stats: &EncodeStats) -> Bytes {
        match self {
            Framing::Json(encoding) => object.encoded(encoding, stats).clone(),
            Framing::Protobuf => object
                .encoded_external(cached_object_message, stats)
                .cloned()
                .unwrap_or_default(),
            Framing::ProtobufMetadata => object_metadata_message(object, stats).unwrap_or_default(),
        }
    }

    /// Writes what precedes an item of `len` bytes.
    fn before(self, first: bool, len: usize, out: &mut BytesMut) {
        match self {
            Framing::Json(_) if !first => out.put_u8(b','),
            Framing::Json(_) => {}
            Framing::Protobuf | Framing::ProtobufMetadata => out.put_slice(&list_item_head(len)),
        }
    }

    fn before_len(self, first: bool, len: usize) -> usize {
        let mut out = BytesMut::new();
        self.before(first, len, &mut out);
        out.len()
    }

    fn tail(self) -> &'static [u8] {
        match self {
            Framing::Json(_) => b"]}",
            Framing::Protobuf | Framing::ProtobufMetadata => ENVELOPE_TAIL,
        }
    }
}

/// The length of the protobuf items of a list in `framing` ([`Framing::Protobuf`] or
/// [`Framing::ProtobufMetadata`]; each item's message with its tag and length), encoding (and
/// caching) every item's message; `None` when an item cannot be encoded.
#[must_use]
pub fn protobuf_items_len(
    stats: &EncodeStats,
    items: &[Arc<Object>],
    framing: Framing,
) -> Option<usize> {
    items.iter().try_fold(0, |total, object| {
        let len = match framing {
            Framing::ProtobufMetadata => object_metadata_message(object, stats)?.len(),
            _ => object.encoded_external(cached_object_message, stats)?.len(),
        };
        Some(total + framing.before_len(false, len) + len)
    })
}

/// The body of one LIST response: the head, the items, the tail, produced piece by piece.
pub struct ListBody {
    /// How every item is sent.
    framing: Framing,
    /// `{"kind":…,"items":[` until it is sent.
    head: Option<Bytes>,
    /// The items not yet sent, in order.
    items: std::vec::IntoIter<Arc<Object>>,
    /// Whether an item was sent (the next one needs a `,`).
    started: bool,
    /// A shared item waiting behind the text piece just returned.
    pending: Option<Bytes>,
    /// Whether `]}` was sent.
    ended: bool,
    /// Bytes of small items copied per piece (at least).
    piece_bytes: usize,
    /// Bytes not yet produced.
    remaining: u64,
    /// Never counts: every item was encoded (and counted) by [`ListBody::new`], so reading the
    /// cached encoding again serializes nothing.
    cached: EncodeStats,
}

impl std::fmt::Debug for ListBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListBody")
            .field("items", &self.items.len())
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl ListBody {
    /// The body of a list whose head (up to and including `"items":[`, or the protobuf
    /// envelope's head and the `ListMeta`) is `head`, with `items` framed as `framing` says
    /// (serializations counted in `stats`); small items are copied into pieces of about
    /// `piece_bytes`.
    #[must_use]
    pub fn new(
        stats: &EncodeStats,
        framing: Framing,
        head: Bytes,
        items: Vec<Arc<Object>>,
        piece_bytes: usize,
    ) -> ListBody {
        let items_bytes: usize = items
            .iter()
            .enumerate()
            .map(|(index, object)| {
                let len = framing.item(object, stats).len();
                framing.before_len(index == 0, len) + len
            })
            .sum();
        let total = head.len() + items_bytes + framing.tail().len();
        ListBody {
            framing,
            head: Some(head),
            items: items.into_iter(),
            started: false,
            pending: None,
            ended: false,
            piece_bytes: piece_bytes.max(1),
            remaining: u64::try_from(total).unwrap_or(u64::MAX),
            cached: EncodeStats::default(),
        }
    }

    /// The next piece, or `None` at the end.
    fn next_piece(&mut self) -> Option<Bytes> {
        if let Some(item) = self.pending.take() {
            return Some(item);
        }
        let mut text = BytesMut::new();
        if let Some(head) = self.head.take() {
            text.put_slice(&head);
        }
        for object in self.items.by_ref() {
            let bytes = self.framing.item(&object, &self.cached);
            self.framing.before(!self.started, bytes.len(), &mut text);
            self.started = true;
            if bytes.len() >= SHARE_MIN_BYTES {
                if text.is_empty() {
                    return Some(bytes);
                }
                self.pending = Some(bytes);
                return Some(text.freeze());
            }
            if text.is_empty() {
                text.reserve(self.piece_bytes + SHARE_MIN_BYTES);
            }
            text.put_slice(&bytes);
            if text.len() >= self.piece_bytes {
                return Some(text.freeze());
            }
        }
        if !self.ended {
            self.ended = true;
            text.put_slice(self.framing.tail());
        }
        (!text.is_empty()).then(|| text.freeze())
    }
}

impl hyper::body::Body for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let piece = self.next_piece();
        if let Some(piece) = &piece {
            self.remaining = self
                .remaining
                .saturating_sub(u64::try_from(piece.len()).unwrap_or(u64::MAX));
        }
        Poll::Ready(piece.map(|piece| Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http_body_util::BodyExt;
    use hyper::body::Body as _;
    use serde_json::json;

    use super::*;

    fn object(name: &str, data_bytes: usize) -> Arc<Object> {
        Arc::new(Object::new(
            "default",
            name,
            BTreeMap::new(),
            BTreeMap::new(),
            7,
            json!({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": name, "namespace": "default", "resourceVersion": "7"},
                   "data": {"d": "x".repeat(data_bytes)}}),
        ))
    }

    /// The one-buffer form the streamed body must equal.
    fn whole(head: &[u8], items: &[Arc<Object>], stats: &EncodeStats) -> Vec<u8> {
        let mut out = head.to_vec();
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item.encoded(Encoding::Json, stats));
        }
        out.extend_from_slice(b"]}");
        out
    }

    fn pieces(mut body: ListBody) -> Vec<Bytes> {
        let mut pieces = Vec::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        loop {
            let before = body.size_hint().exact().unwrap();
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let piece = frame.into_data().unwrap();
                    assert_eq!(
                        body.size_hint().exact().unwrap(),
                        before - piece.len() as u64
                    );
                    pieces.push(piece);
                }
                Poll::Ready(None) => {
                    assert_eq!(before, 0);
                    assert!(body.is_end_stream());
                    return pieces;
                }
                other => panic!("{other:?}"),
            }
        }
    }

    const HEAD: &[u8] = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":["#;

    #[test]
    fn a_list_is_produced_in_bounded_pieces_equal_to_the_whole() {
        let stats = EncodeStats::default();
        // Small items (copied together) and large ones (shared) interleaved.
        let items: Vec<Arc<Object>> = (0..500)
            .map(|i| object(&format!("o-{i:04}"), if i % 50 == 7 { 4096 } else { 100 }))
            .collect();
        let expected = whole(HEAD, &items, &EncodeStats::default());
        let serializations = stats.serializations();
        let body = ListBody::new(
            &stats,
            Framing::Json(Encoding::Json),
            Bytes::from_static(HEAD),
            items.clone(),
            4096,
        );
        assert_eq!(body.size_hint().exact(), Some(expected.len() as u64));
        // Encoded once each at most (here already cached by `whole`): nothing counted again.
        assert_eq!(stats.serializations(), serializations);
        let pieces = pieces(body);
        assert_eq!(pieces.concat(), expected);
        assert!(pieces.len() > 10, "{} pieces", pieces.len());
        for piece in &pieces {
            // A copied piece stops at the first item that takes it past the bound.
            assert!(piece.len() < 4096 + SHARE_MIN_BYTES, "{}", piece.len());
        }
        // Every large item is its cached encoding itself, not a copy.
        for item in items
            .iter()
            .filter(|o| o.encoded(Encoding::Json, &stats).len() >= 4096)
        {
            let cached = item.encoded(Encoding::Json, &stats);
            assert!(
                pieces.iter().any(|p| p.as_ptr() == cached.as_ptr()),
                "{} shared",
                item.name()
            );
        }
    }

    #[test]
    fn empty_and_single_item_lists_match_the_whole() {
        let stats = EncodeStats::default();
        for items in [vec![], vec![object("a", 10)], vec![object("b", 5000)]] {
            let expected = whole(HEAD, &items, &stats);
            let body = ListBody::new(
                &stats,
                Framing::Json(Encoding::Json),
                Bytes::from_static(HEAD),
                items,
                64,
            );
            assert_eq!(pieces(body).concat(), expected);
        }
    }

    #[test]
    fn the_body_collects_to_the_whole() {
        let stats = EncodeStats::default();
        let items: Vec<Arc<Object>> = (0..20).map(|i| object(&format!("c-{i}"), 300)).collect();
        let expected = whole(HEAD, &items, &stats);
        let body = ListBody::new(
            &stats,
            Framing::Json(Encoding::Json),
            Bytes::from_static(HEAD),
            items,
            1000,
        );
        let collected = futures_util::FutureExt::now_or_never(body.collect())
            .unwrap()
            .unwrap()
            .to_bytes();
        assert_eq!(collected, expected);
    }

    #[test]
    fn a_protobuf_list_streams_the_bytes_of_the_whole_encoding() {
        let stats = EncodeStats::default();
        let items: Vec<Arc<Object>> = (0..40)
            .map(|i| object(&format!("p-{i:02}"), if i % 9 == 4 { 3000 } else { 50 }))
            .collect();
        let metadata = json!({"resourceVersion": "7"});
        let list_meta = watchkeeper_api::protobuf::list_meta_field(&metadata).unwrap();
        let items_len = protobuf_items_len(&stats, &items, Framing::Protobuf).unwrap();
        let mut head = watchkeeper_api::protobuf::envelope_head(
            "v1",
            "ConfigMapList",
            list_meta.len() + items_len,
        );
        head.extend_from_slice(&list_meta);
        let body = ListBody::new(&stats, Framing::Protobuf, head.into(), items.clone(), 1000);
        let whole_list = json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": metadata,
            "items": items.iter().map(|o| o.body().clone()).collect::<Vec<_>>()});
        let expected = watchkeeper_api::protobuf::encode_protobuf(&whole_list).unwrap();
        let pieces = pieces(body);
        assert_eq!(pieces.concat(), expected);
        // Large items are the objects' cached messages themselves.
        for item in items
            .iter()
            .filter(|o| o.body()["data"]["d"].as_str().unwrap().len() == 3000)
        {
            let cached = item
                .encoded_external(cached_object_message, &stats)
                .unwrap();
            assert!(pieces.iter().any(|p| p.as_ptr() == cached.as_ptr()));
        }
        // An object outside the schemas: no protobuf length.
        let mut probed =
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}});
        probed["unknownField"] = json!(1);
        let odd = Arc::new(Object::new(
            "default",
            "x",
            BTreeMap::new(),
            BTreeMap::new(),
            7,
            probed,
        ));
        assert_eq!(protobuf_items_len(&stats, &[odd], Framing::Protobuf), None);
    }
}
